package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/logging"
)

// TestServeTerminal: `arizukod serve` in the foreground on a terminal (a real
// pseudo-terminal) prints its log as readable lines there, "no engine answered" included,
// and says first the journalctl line that finds its entries: it has no unit, so -t, not -u.
func TestServeTerminal(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "arizukod.toml")
	toml := fmt.Sprintf("data_dir = %q\nlisten = %q\nengine = \"podman\"\nengine_socket = %q\nimage = \"localhost/none:1\"\n",
		filepath.Join(dir, "data"), filepath.Join(dir, "api.sock"), "unix://"+filepath.Join(dir, "no-engine.sock"))
	if err := os.WriteFile(config, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemontest.Binary(t), "serve", "--config", config)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOTIFY_SOCKET=") && !strings.HasPrefix(kv, "LISTEN_") && !strings.HasPrefix(kv, "INVOCATION_ID=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{cmd: cmd, tty: tty, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		b := make([]byte, 4096)
		for {
			n, err := tty.Read(b)
			term.mu.Lock()
			term.buf.Write(b[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		tty.Close()
	})
	hint := foregroundLogs(logging.Journald(), "arizukod")
	term.waitFor(t, hint)
	term.waitFor(t, "engine unavailable")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := term.wait(t); code != 0 {
		t.Errorf("serve exited %d after SIGTERM", code)
	}
	out := strings.ReplaceAll(term.output(), "\r\n", "\n")
	if logging.Journald() && !strings.Contains(hint, "journalctl -t arizukod ARIZUKO_FOLDER=main") {
		t.Errorf("the hint with journald: %q, want the journalctl line of a daemon without a unit", hint)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d INFO arizukod listening socket=\S+api\.sock `),
		regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d WARN engine unavailable: work stays queued until it answers err=".+"$`),
		regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d INFO arizukod stopping`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the terminal lacks a line matching %s:\n%s", want, out)
		}
	}
}
