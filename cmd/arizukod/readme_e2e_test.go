package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
)

// readmeSections are the README's sections a clone's operator pastes in order, from the
// first turn to talking to the agent through the daemon.
var readmeSections = []string{"Running one turn by hand", "Running the daemon", "Talking to your agent"}

// TestREADMESections pastes the shell blocks of the README's sections, in order, into one
// bash on a fresh directory laid out as a clone after `make build` (bin/arizukod and
// bin/agent, this test's build of them): every command must succeed, with the engine the
// test host's Podman 4 (CONTAINER_HOST, as after hack/demo.sh) and the user service's
// directories in the test's own. Two things differ from a paste, said here: `make build`
// is skipped (bin/ is built already), and the agent image's tag is one of this test's,
// so that it leaves the engine's localhost/arizuko-agent:latest alone.
func TestREADMESections(t *testing.T) {
	e := daemontest.Podman4(t)
	eng, _ := e.Open(t)
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{"arizukod": daemontest.Binary(t), "agent": enginetest.AgentBinary(t)} {
		if err := os.Symlink(src, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	image := "localhost/arizuko-readme-test:" + daemontest.RandHex(6)
	t.Cleanup(func() { eng.(engine.ImageRemover).RemoveImage(context.Background(), image) })
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for _, title := range readmeSections {
		block := shellBlock(t, string(readme), title)
		for _, line := range strings.Split(block, "\n") {
			if strings.HasPrefix(line, "make build") {
				continue
			}
			script.WriteString(strings.ReplaceAll(line, "localhost/arizuko-agent:latest", image) + "\n")
		}
	}
	// What the test does after the paste: let the turns end, then stop the daemon.
	script.WriteString(`while bin/arizukod runs --json | grep -q '"state": "\(queued\|running\)"'; do sleep 0.2; done` + "\nkill %1\nwait\n")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = append(daemontestEnv(), "ARIZUKO_MODE=user", "XDG_RUNTIME_DIR="+filepath.Join(dir, "run"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_DATA_HOME="+filepath.Join(dir, "data"),
		"CONTAINER_HOST="+e.URI, "CONTAINER_IMAGE="+image, "USER=operator")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's sections, pasted in order: %v\n--- script\n%s--- output\n%s", err, script.String(), out.String())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`"result": "hi"`),   // run --local, and run through the daemon
		regexp.MustCompile(`"folder": "main"`), // groups add, inbox route
		regexp.MustCompile(`(?m)^hi$`),         // the echo into chat
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("the output lacks %s:\n%s", want, out.String())
		}
	}
}

// shellBlock is the first ```sh block of the README's section title.
func shellBlock(t *testing.T, readme, title string) string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", title)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatalf("README.md's section %q has no ```sh block", title)
	}
	block, _, _ = strings.Cut(block, "```")
	return strings.TrimRight(block, "\n")
}

// daemontestEnv is this process's environment without what would point the commands at
// another daemon, engine, image or data directory than the test's.
func daemontestEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "LISTEN_"), strings.HasPrefix(name, "XDG_"), name == "NOTIFY_SOCKET", name == "INVOCATION_ID",
			name == "DATA_DIR", name == "CONTAINER_IMAGE", name == "CONTAINER_HOST", name == "DOCKER_HOST", name == "ARIZUKO_MODE",
			name == "ARIZUKO_ENGINE", name == "ARIZUKO_ENGINE_SOCKET", name == "RUNED_RUN_TIMEOUT", name == "USER":
			continue
		}
		env = append(env, kv)
	}
	return env
}
