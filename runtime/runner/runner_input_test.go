package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/runtime/engine"
)

// scriptedEngine is an engine.Engine whose one container behaves as a test scripts it: what its
// stdin does with the input, what it prints, how it exits. The real engines are in
// runner_e2e_test.go; this one makes the moments between start and stdin exact.
type scriptedEngine struct {
	// stdin: "ok" takes the input, "epipe" fails the write at once, "block" blocks it
	// until the attachment is closed (a container gone without reading).
	stdin  string
	stdout string
	exit   int
	state  engine.State // what Inspect says before the container ran (Adopt)
	// runs makes the container run until it is stopped.
	runs    bool
	stopped chan struct{}

	mu      sync.Mutex
	closed  chan struct{}
	got     bytes.Buffer
	removed bool
}

func (e *scriptedEngine) Info(context.Context) (engine.Info, error) {
	return engine.Info{Name: "scripted"}, nil
}
func (e *scriptedEngine) ImageExists(context.Context, string) (bool, error) { return true, nil }
func (e *scriptedEngine) ImportImage(context.Context, string, io.Reader, []string) error {
	return nil
}
func (e *scriptedEngine) Create(context.Context, engine.Spec) (string, error) {
	return "c0ffee0000000000", nil
}
func (e *scriptedEngine) Start(context.Context, string) error          { return nil }
func (e *scriptedEngine) Signal(context.Context, string, string) error { return nil }
func (e *scriptedEngine) Stop(context.Context, string, time.Duration) error {
	close(e.stopped)
	return nil
}
func (e *scriptedEngine) Remove(context.Context, string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.removed = true
	return nil
}
func (e *scriptedEngine) List(context.Context, map[string]string) ([]engine.Container, error) {
	return nil, nil
}
func (e *scriptedEngine) Wait(context.Context, string) (engine.State, error) {
	if e.runs {
		<-e.stopped
	}
	return engine.State{ExitCode: e.exit, Status: "exited", StartedAt: time.Now()}, nil
}
func (e *scriptedEngine) Inspect(context.Context, string) (engine.State, error) {
	if e.state != (engine.State{}) {
		return e.state, nil
	}
	return engine.State{ExitCode: e.exit, Status: "exited", StartedAt: time.Now()}, nil
}
func (e *scriptedEngine) Logs(_ context.Context, _ string, stdout, _ io.Writer) error {
	_, err := io.WriteString(stdout, e.stdout)
	return err
}

func (e *scriptedEngine) Attach(context.Context, string) (*engine.Attachment, error) {
	e.closed = make(chan struct{})
	var once sync.Once
	copyOut := func(stdout, _ io.Writer) error {
		if e.runs {
			<-e.stopped
		}
		_, err := io.WriteString(stdout, e.stdout)
		return err
	}
	return engine.NewAttachment(scriptedStdin{e}, copyOut, func() error { once.Do(func() { close(e.closed) }); return nil }), nil
}

type scriptedStdin struct{ e *scriptedEngine }

func (s scriptedStdin) Write(p []byte) (int, error) {
	switch s.e.stdin {
	case "epipe":
		return 0, syscall.EPIPE
	case "block":
		<-s.e.closed
		return 0, errors.New("use of closed network connection")
	}
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return s.e.got.Write(p)
}

func (s scriptedStdin) Close() error { return nil }

func answer(status contract.Status, text string) string {
	return string(contract.WriteOutput(contract.Output{Status: status, Result: text, Error: text}))
}

// TestInputNeverReached: a turn whose input line did not reach the container whole, and
// whose agent gave no ok or error answer, ends FailNoInput (the queue runs it again); an
// answer, a misconfiguration or a kill keep their own outcome; a delivered input is
// reported through OnInput before the turn ends.
func TestInputNeverReached(t *testing.T) {
	eof := answer(contract.StatusFatal, "read stdin: EOF")
	cases := []struct {
		name        string
		stdin, out  string
		exit        int
		kill        bool
		wantFailure Failure
		wantStatus  contract.Status
		wantInput   bool
	}{
		{"write fails, agent says EOF", "epipe", eof, 0, false, FailNoInput, contract.StatusFatal, false},
		{"write fails, agent silent", "epipe", "", 1, false, FailNoInput, contract.StatusFatal, false},
		{"write blocked until the container is gone", "block", "", 0, false, FailNoInput, contract.StatusFatal, false},
		{"write fails, agent answers ok anyway", "epipe", answer(contract.StatusOK, "fine"), 0, false, FailNone, contract.StatusOK, false},
		{"write fails, agent answers error", "epipe", answer(contract.StatusError, "bad"), 0, false, FailNone, contract.StatusError, false},
		{"write fails, entrypoint missing", "epipe", "", 127, false, FailMisconfig, contract.StatusFatal, false},
		{"write fails, killed", "epipe", "", 137, true, FailKilled, contract.StatusFatal, false},
		{"input delivered, agent fatal", "ok", answer(contract.StatusFatal, "gave up"), 0, false, FailNone, contract.StatusFatal, true},
		{"input delivered, agent silent", "ok", "", 1, false, FailNoOutput, contract.StatusFatal, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &scriptedEngine{stdin: c.stdin, stdout: c.out, exit: c.exit, runs: c.kill, stopped: make(chan struct{})}
			r := scriptedRunner(t, e)
			var sent bool
			ctx, cancel := context.WithCancel(context.Background())
			if c.kill {
				cancel()
			}
			defer cancel()
			res, err := r.Run(ctx, Turn{RunID: "r1", Folder: "main", OnInput: func() { sent = true },
				Input: contract.Input{Messages: []contract.Message{{Role: "user", Content: "hi"}}}})
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			if res.Failure != c.wantFailure || res.Output.Status != c.wantStatus {
				t.Fatalf("failure %q status %q (%q), want %q %q", res.Failure, res.Output.Status, res.Output.Error, c.wantFailure, c.wantStatus)
			}
			if sent != c.wantInput {
				t.Errorf("OnInput called: %v, want %v", sent, c.wantInput)
			}
			if c.wantInput && !strings.Contains(e.got.String(), `"content":"hi"`) {
				t.Errorf("the container got %q", e.got.String())
			}
			if res.Failure == FailNoInput && !strings.Contains(res.Output.Error, "never reached the agent") {
				t.Errorf("error %q does not say why", res.Output.Error)
			}
			if !e.removed {
				t.Error("the container was not removed")
			}
		})
	}
}

// TestAdoptInputNeverReached: an adopted container that never started, or whose daemon
// never recorded its input as sent and which gave no ok or error answer, ends FailNoInput;
// with the input recorded, its answer stands.
func TestAdoptInputNeverReached(t *testing.T) {
	eof := answer(contract.StatusFatal, "read stdin: EOF")
	cases := []struct {
		name        string
		state       engine.State
		out         string
		inputSent   bool
		wantFailure Failure
		wantStatus  contract.Status
	}{
		{"never started", engine.State{Status: "created"}, "", false, FailNoInput, contract.StatusFatal},
		{"never started, input recorded", engine.State{Status: "created"}, "", true, FailNoInput, contract.StatusFatal},
		{"EOF, input not recorded", engine.State{}, eof, false, FailNoInput, contract.StatusFatal},
		{"EOF, input recorded", engine.State{}, eof, true, FailNone, contract.StatusFatal},
		{"ok, input not recorded", engine.State{}, answer(contract.StatusOK, "done"), false, FailNone, contract.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &scriptedEngine{stdout: c.out, state: c.state, stopped: make(chan struct{})}
			r := scriptedRunner(t, e)
			res, err := r.Adopt(context.Background(), Turn{RunID: "r1", Folder: "main", InputSent: c.inputSent}, "arizuko-main-1", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if res.Failure != c.wantFailure || res.Output.Status != c.wantStatus {
				t.Fatalf("failure %q status %q (%q), want %q %q", res.Failure, res.Output.Status, res.Output.Error, c.wantFailure, c.wantStatus)
			}
			if !e.removed {
				t.Error("the container was not removed")
			}
		})
	}
}

func scriptedRunner(t *testing.T, e engine.Engine) *Runner {
	t.Helper()
	layout, err := groupfolder.NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := layout.Ensure("main", os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Engine: e, Layout: layout, Image: "img", Instance: "test", StopGrace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
