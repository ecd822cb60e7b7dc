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
)

// TestModelGiveUp: an agent that retries the model as Claude Code does (about 3 minutes)
// is not left to: without a credential /health says the daemon cannot reach a model and
// the turn ends at its first request as a misconfiguration naming the fix; with an
// upstream that is down `arizukod run` says the agent retries and why, and the turn ends
// after [model] give_up, on Podman 4.
func TestModelGiveUp(t *testing.T) {
	e := daemontest.Podman4(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()

	for _, tc := range []struct {
		name, env, toml string
		failure, error  string
		stderr          string
		within          time.Duration
	}{
		{name: "no credential", toml: fmt.Sprintf("[model]\nupstream = %q\n", down),
			failure: "misconfig", error: "api_key_file", within: 20 * time.Second},
		{name: "upstream down", env: "ANTHROPIC_API_KEY=sk-ant-test-" + daemontest.RandHex(16) + "\n",
			toml:    fmt.Sprintf("[model]\nupstream = %q\ngive_up = \"6s\"\n", down),
			failure: "model", error: "kept failing for 6s", stderr: "the agent is retrying the model: ", within: 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := daemontest.New(t, daemontest.Config{Engine: e, EnvFile: tc.env, TOML: tc.toml})
			d.Start(t)
			d.AddGroup(t, "main")
			h, _, err := d.Health()
			if err != nil {
				t.Fatal(err)
			}
			if noCred := strings.Contains(h.Model.Error, "no model credential"); noCred != (tc.env == "") || h.Model.Upstream != down {
				t.Errorf("/health model: %+v", h.Model)
			}
			start := time.Now()
			cmd := exec.Command(d.Bin, "run", "--folder", "main", "--message", "model-retry hi", "--socket", d.Socket)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err = cmd.Run()
			took := time.Since(start)
			var exit *exec.ExitError
			var r apiwire.Run
			if !errors.As(err, &exit) || json.Unmarshal(stdout.Bytes(), &r) != nil {
				t.Fatalf("run: %v\nstdout %s\nstderr %s", err, stdout.String(), stderr.String())
			}
			if r.Failure != tc.failure || !strings.Contains(r.Error, tc.error) || took > tc.within {
				t.Errorf("after %s: failure %q, error %q; want %q naming %q within %s", took, r.Failure, r.Error, tc.failure, tc.error, tc.within)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("run's stderr %q, want %q", stderr.String(), tc.stderr)
			}
		})
	}
}
