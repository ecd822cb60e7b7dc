package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/store"
)

// TestChat talks to the example agent through `arizukod chat` against a real daemon on
// Podman 4: through a pipe (the reply, a reply sent with a tool, a failing turn), and through
// a real pseudo-terminal (a typed line gets its reply with a spinner and the run id, Ctrl-D
// ends; Ctrl-C during a turn kills it and leaves no run and no container behind).
func TestChat(t *testing.T) {
	d := daemontest.New(t, daemontest.Config{Engine: daemontest.Podman4(t)})
	d.Start(t)
	d.AddGroup(t, "main")
	d.AddGroup(t, "tty")
	d.AddGroup(t, "broken")
	st := d.OpenStore(t)

	t.Run("pipe", func(t *testing.T) {
		stdout, stderr, code := chatPipe(t, d, "main", "reply hello through a pipe\n")
		if code != 0 || stdout != "hello through a pipe\n" || !regexp.MustCompile(`(?m)^run r`).MatchString(stderr) {
			t.Errorf("exit %d, stdout %q, stderr %q; want the reply alone on stdout and the run id on stderr", code, stdout, stderr)
		}
		stdout, stderr, code = chatPipe(t, d, "main", `mcp send_reply {"text":"said with the tool"}`+"\n")
		if code != 0 || !strings.HasPrefix(stdout, "said with the tool\n") || !strings.Contains(stdout, `"isError":false`) {
			t.Errorf("exit %d, stdout %q, stderr %q; want the tool's reply, then the result", code, stdout, stderr)
		}
		stdout, stderr, code = chatPipe(t, d, "main", "error the agent gave up\n")
		if code != 1 || stdout != "" || !regexp.MustCompile(`✗ run r\S+ failed: the agent gave up`).MatchString(stderr) {
			t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and the failure with the run id", code, stdout, stderr)
		}
		// An agent that cannot start parks the folder: chat says so with the fix, the user
		// gets the daemon's notice, and inbox list shows the message waiting.
		stdout, stderr, code = chatPipe(t, d, "broken", "exit 126\n")
		if code != 1 || !strings.HasPrefix(stdout, "notice: The agent is paused") ||
			!regexp.MustCompile(`✗ run r\S+ failed \(misconfig\): `).MatchString(stderr) ||
			!strings.Contains(stderr, "✗ broken is parked: ") || !strings.Contains(stderr, "`arizukod unpark --folder broken`") {
			t.Errorf("exit %d, stdout %q, stderr %q; want exit 1, the notice, the failure and the parked inbox", code, stdout, stderr)
		}
		out, err := exec.Command(d.Bin, "inbox", "list", "--folder", "broken", "--socket", d.Socket).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "broken is parked since") || !strings.Contains(string(out), "exit 126") {
			t.Errorf("inbox list of the parked folder: %v\n%s", err, out)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		term := chatTerminal(t, d, "tty")
		term.waitFor(t, "Talking to tty as cli:")
		// A turn long enough to be seen under way: a prepared container answers a
		// reply in tens of milliseconds, before chat's first look at the run.
		term.write(t, "sleep 1s\r")
		term.waitFor(t, "tty:\x1b[0m slept 1s")
		out := term.output()
		if !strings.Contains(out, "⠋") && !strings.Contains(out, "⠙") || !regexp.MustCompile(`tty: run r\S+ (queued|running)`).MatchString(out) {
			t.Errorf("no spinner with the run id while the turn ran:\n%q", out)
		}
		// The reply ended the turn: no spinner line of the run under way follows it.
		time.Sleep(500 * time.Millisecond)
		if _, after, _ := strings.Cut(term.output(), "slept 1s"); regexp.MustCompile(`tty: run r\S+ (queued|running)`).MatchString(after) {
			t.Errorf("after the reply the spinner still shows the run under way:\n%q", after)
		}
		term.write(t, "\x04")
		if code := term.wait(t); code != 0 {
			t.Errorf("Ctrl-D: exit %d, want 0\n%q", code, term.output())
		}

		term = chatTerminal(t, d, "tty")
		term.waitFor(t, "Talking to tty")
		term.write(t, "sleep 10m\r")
		run := waitRunning(t, d, "tty")
		term.write(t, "\x03")
		if code := term.wait(t); code != 130 {
			t.Errorf("Ctrl-C: exit %d, want 130\n%q", code, term.output())
		}
		if !strings.Contains(term.output(), "killed run "+run.ID) {
			t.Errorf("Ctrl-C did not say it kills run %s:\n%q", run.ID, term.output())
		}
		assertNothingLeft(t, d, st, "tty", run.ID)

		// Ctrl-C right after the line: whether the message went out or not, nothing runs on.
		term = chatTerminal(t, d, "tty")
		term.waitFor(t, "Talking to tty")
		term.write(t, "sleep 10m\r\x03")
		if code := term.wait(t); code != 130 {
			t.Errorf("Ctrl-C right after the line: exit %d, want 130\n%q", code, term.output())
		}
		assertNothingLeft(t, d, st, "tty", "")
	})

	t.Run("pipe-interrupt", func(t *testing.T) {
		cmd := exec.Command(d.Bin, "chat", "--folder", "main", "--socket", d.Socket)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		io.WriteString(stdin, "sleep 10m\n")
		run := waitRunning(t, d, "main")
		cmd.Process.Signal(os.Interrupt)
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 130 || !strings.Contains(stderr.String(), "killed run "+run.ID) {
			t.Errorf("SIGINT: %v, stderr %q; want exit 130 after it said it killed run %s", err, stderr.String(), run.ID)
		}
		assertNothingLeft(t, d, st, "main", run.ID)
	})
}

// chatPipe runs `arizukod chat` with input on a pipe and returns its output and exit code.
func chatPipe(t *testing.T, d *daemontest.Daemon, folder, input string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(d.Bin, "chat", "--folder", folder, "--socket", d.Socket)
	cmd.Stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("chat %q: %v", input, err)
	}
	return out.String(), errOut.String(), code
}

// terminal is `arizukod chat` on a pseudo-terminal of its own, its controlling terminal, as
// in an interactive shell: Ctrl-C there is the terminal's SIGINT.
type terminal struct {
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
}

func chatTerminal(t *testing.T, d *daemontest.Daemon, folder string) *terminal {
	t.Helper()
	return startTerminal(t, d.Bin, d.Socket, folder)
}

// startTerminal starts `bin chat --folder folder --socket socket` on a pseudo-terminal.
func startTerminal(t *testing.T, bin, socket, folder string) *terminal {
	t.Helper()
	cmd := exec.Command(bin, "chat", "--folder", folder, "--socket", socket)
	cmd.Env = append(os.Environ(), "TERM=xterm")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
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
	return term
}

func (term *terminal) output() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.buf.String()
}

func (term *terminal) write(t *testing.T, s string) {
	t.Helper()
	if _, err := term.tty.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits until the terminal showed want.
func (term *terminal) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(term.output(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q:\n%q", want, term.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wait waits for chat to exit and returns its exit status.
func (term *terminal) wait(t *testing.T) int {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- term.cmd.Wait() }()
	select {
	case err := <-exited:
		<-term.done
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Fatalf("chat died of %v:\n%q", ws.Signal(), term.output())
			}
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(2 * time.Minute):
		t.Fatalf("chat did not exit:\n%q", term.output())
		return -1
	}
}

// waitRunning waits for the folder's run to run in a container.
func waitRunning(t *testing.T, d *daemontest.Daemon, folder string) apiwire.Run {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if runs := d.Runs(t, "state=running&folder="+folder); len(runs) == 1 && runs[0].Container != "" {
			return runs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run of %s ran: %+v", folder, d.Runs(t, "folder="+folder))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// assertNothingLeft checks that after chat exited the run it killed (if any) ended killed, no run of
// the folder is queued or running, its inbox has nothing pending, and the engine holds no
// container of the daemon's.
func assertNothingLeft(t *testing.T, d *daemontest.Daemon, st *store.Store, folder, killed string) {
	t.Helper()
	if killed != "" {
		if r := d.GetRun(t, killed); r.State != "killed" {
			t.Errorf("run %s after Ctrl-C: %s, want killed", killed, r.State)
		}
	}
	for _, state := range []string{"queued", "running"} {
		if runs := d.Runs(t, "state="+state+"&folder="+folder); len(runs) > 0 {
			t.Errorf("%s runs of %s left: %+v", state, folder, runs)
		}
	}
	if pending, err := st.PendingInbox(t.Context(), folder, 0); err != nil || len(pending) > 0 {
		t.Errorf("inbox of %s still pending: %+v %v", folder, pending, err)
	}
	if left := d.SettledLeftovers(t); len(left) > 0 {
		t.Errorf("containers left: %+v", left)
	}
}
