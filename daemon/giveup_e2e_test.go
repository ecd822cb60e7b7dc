package daemon_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/fakemodel"
)

// giveUpCase is one daemon whose turns cannot reach the model, and what `arizukod run`
// must end with.
type giveUpCase struct {
	name, env, toml string
	failure, error  string
	stderr          string
	// The run must end within within, and not before after (the give_up it waits out).
	within, after time.Duration
}

// TestModelGiveUp: an agent that retries the model as Claude Code does (about 3 minutes)
// is not left to: without a credential /health says the daemon cannot reach a model and
// the turn ends at its first request as a misconfiguration naming the fix; with an
// upstream that is down `arizukod run` says the agent retries and why, and the turn ends
// after [model] give_up, on Podman 4.
func TestModelGiveUp(t *testing.T) {
	e := daemontest.Podman4(t)
	down := closedPort(t)
	for _, tc := range []giveUpCase{
		{name: "no credential", toml: fmt.Sprintf("[model]\nupstream = %q\n", down),
			failure: "misconfig", error: "api_key_file", within: 20 * time.Second},
		{name: "upstream down", env: "ANTHROPIC_API_KEY=sk-ant-test-" + daemontest.RandHex(16) + "\n",
			toml:    fmt.Sprintf("[model]\nupstream = %q\ngive_up = \"6s\"\n", down),
			failure: "model", error: "kept failing for 6s", stderr: "the agent is retrying the model: ", within: 30 * time.Second, after: 6 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) { testGiveUp(t, daemontest.Config{Engine: e}, "model-retry hi", tc) })
	}
}

// TestClaudeModelGiveUp is TestModelGiveUp with the real Claude Code, which retries a
// failing upstream for about 3 minutes on its own: without a credential its turn fails at
// its first request as a misconfiguration naming the fix; with the upstream's port closed,
// or the upstream answering 529 (overloaded) or 500 to every request, `arizukod run` says
// that the agent retries and why, and the turn ends about [model] give_up after the first
// failure, on Podman 4.
func TestClaudeModelGiveUp(t *testing.T) {
	e := daemontest.Podman4(t)
	down := closedPort(t)
	failing := func(status int, typ string) string {
		fake := fakemodel.Start()
		t.Cleanup(fake.Close)
		fake.Reply = func(fakemodel.Request) fakemodel.Reply { return fakemodel.Reply{Status: status, ErrorType: typ} }
		return fake.URL
	}
	key := "ANTHROPIC_API_KEY=sk-ant-test-" + daemontest.RandHex(16) + "\n"
	giveUp := func(upstream string) string {
		return fmt.Sprintf("[model]\nupstream = %q\ngive_up = \"10s\"\n", upstream)
	}
	for _, tc := range []giveUpCase{
		{name: "no credential", toml: fmt.Sprintf("[model]\nupstream = %q\n", down),
			failure: "misconfig", error: "api_key_file", within: 30 * time.Second},
		{name: "upstream down", env: key, toml: giveUp(down), failure: "model", error: "kept failing for 10s",
			stderr: "the agent is retrying the model: the model API upstream could not be reached", within: 25 * time.Second, after: 10 * time.Second},
		{name: "upstream overloaded", env: key, toml: giveUp(failing(529, "overloaded_error")), failure: "model",
			error: "kept failing for 10s", stderr: "the agent is retrying the model: the model API upstream answered 529", within: 25 * time.Second, after: 10 * time.Second},
		{name: "upstream 500", env: key, toml: giveUp(failing(500, "api_error")), failure: "model",
			error: "kept failing for 10s", stderr: "the agent is retrying the model: the model API upstream answered 500", within: 25 * time.Second, after: 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testGiveUp(t, daemontest.Config{Engine: e, Claude: true, RunTimeout: "5m"}, "hello claude", tc)
		})
	}
}

// closedPort is a loopback URL nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

// testGiveUp starts a daemon as cfg with tc's environment and configuration, checks what
// /health says of its model, and runs message with `arizukod run`, which must end as tc
// says within tc.within.
func testGiveUp(t *testing.T, cfg daemontest.Config, message string, tc giveUpCase) {
	cfg.EnvFile, cfg.TOML = tc.env, tc.toml
	d := daemontest.New(t, cfg)
	d.Start(t)
	d.AddGroup(t, "main")
	h, _, err := d.Health()
	if err != nil {
		t.Fatal(err)
	}
	if noCred := strings.Contains(h.Model.Error, "no model credential"); noCred != (tc.env == "") || h.Model.Upstream == "" || !strings.Contains(tc.toml, fmt.Sprintf("%q", h.Model.Upstream)) {
		t.Errorf("/health model: %+v", h.Model)
	}
	start := time.Now()
	cmd := exec.Command(d.Bin, "run", "--folder", "main", "--message", message, "--socket", d.Socket)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	took := time.Since(start)
	t.Logf("%s: `arizukod run` ended after %s", tc.name, took.Round(100*time.Millisecond))
	var exit *exec.ExitError
	var r apiwire.Run
	if !errors.As(err, &exit) || json.Unmarshal(stdout.Bytes(), &r) != nil {
		t.Fatalf("run: %v\nstdout %s\nstderr %s", err, stdout.String(), stderr.String())
	}
	if r.Failure != tc.failure || !strings.Contains(r.Error, tc.error) || took > tc.within || took < tc.after {
		t.Errorf("after %s: failure %q, error %q; want %q naming %q within %s, not before %s", took, r.Failure, r.Error, tc.failure, tc.error, tc.within, tc.after)
	}
	if !strings.Contains(stderr.String(), tc.stderr) {
		t.Errorf("run's stderr %q, want %q", stderr.String(), tc.stderr)
	}
}
