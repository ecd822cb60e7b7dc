package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/fakeengine"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
)

// fakeRunner is a runner over e with a data directory whose group main exists.
func fakeRunner(t *testing.T, e engine.Engine, timeout time.Duration) (*runner.Runner, groupfolder.Layout) {
	t.Helper()
	layout, err := groupfolder.NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := layout.Ensure("main", os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{Engine: e, Info: engine.Info{Name: "fake"}, Layout: layout, Image: "img", Instance: "test",
		Timeout: timeout, StopGrace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, layout
}

func turnOf(runID string) runner.Turn {
	return runner.Turn{RunID: runID, Folder: "main", Input: contract.Input{Messages: []contract.Message{{Role: "user", Content: "hi"}}}}
}

func answer(status contract.Status, text string) string {
	return fakeengine.Answer(contract.Output{Status: status, Result: text, Error: text})
}

// TestClassifyFake: every way a turn ends, on the fake engine: the failure, whether a
// retry may fix it, the status, and that the container is gone after.
func TestClassifyFake(t *testing.T) {
	ok := answer(contract.StatusOK, "done")
	for _, tc := range []struct {
		name     string
		script   fakeengine.Script
		images   []string // nil: every image exists
		down     bool
		kill     bool
		failure  runner.Failure
		terminal bool
		status   contract.Status
		want     string // a part of the error
	}{
		{"ok", fakeengine.Script{Stdout: ok}, nil, false, false, runner.FailNone, false, contract.StatusOK, ""},
		{"error answer", fakeengine.Script{Stdout: answer(contract.StatusError, "no")}, nil, false, false, runner.FailNone, false, contract.StatusError, "no"},
		{"oom", fakeengine.Script{OOM: true}, nil, false, false, runner.FailOOM, false, contract.StatusFatal, "out of memory"},
		{"SIGKILL not ours", fakeengine.Script{ExitCode: 137}, nil, false, false, runner.FailOOM, false, contract.StatusFatal, "SIGKILL"},
		{"entrypoint missing", fakeengine.Script{ExitCode: 127}, nil, false, false, runner.FailMisconfig, true, contract.StatusFatal, "exited 127"},
		{"no output", fakeengine.Script{ExitCode: 1, Stdout: "hello\n"}, nil, false, false, runner.FailNoOutput, false, contract.StatusFatal, "exit 1"},
		{"bad output", fakeengine.Script{Stdout: contract.StartMarker + "\n{not json\n" + contract.EndMarker + "\n"}, nil, false, false, runner.FailBadOutput, false, contract.StatusFatal, ""},
		{"create refused", fakeengine.Script{CreateErr: errors.New("bad mount")}, nil, false, false, runner.FailMisconfig, true, contract.StatusFatal, "bad mount"},
		{"image missing", fakeengine.Script{}, []string{"other"}, false, false, runner.FailMisconfig, true, contract.StatusFatal, "runs never pull"},
		{"start fails", fakeengine.Script{StartErr: errors.New("no such file")}, nil, false, false, runner.FailMisconfig, true, contract.StatusFatal, "no such file"},
		{"engine down", fakeengine.Script{}, nil, true, false, runner.FailEngine, false, contract.StatusFatal, "connection refused"},
		{"killed", fakeengine.Script{Hang: true}, nil, false, true, runner.FailKilled, false, contract.StatusFatal, "killed"},
		{"input never read", fakeengine.Script{Stdin: fakeengine.StdinBroken, ExitCode: 1}, nil, false, false, runner.FailNoInput, false, contract.StatusFatal, "never reached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := fakeengine.New(tc.script)
			if tc.images != nil {
				e.SetImages(tc.images...)
			}
			e.SetDown(tc.down)
			r, _ := fakeRunner(t, e, time.Hour)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tu := turnOf("r1")
			if tc.kill {
				tu.OnInput = cancel
			}
			res, err := r.Run(ctx, tu)
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			if res.Failure != tc.failure || res.Terminal != tc.terminal || res.Output.Status != tc.status {
				t.Fatalf("failure %q terminal %v status %q (%s), want %q %v %q", res.Failure, res.Terminal, res.Output.Status, res.Output.Error, tc.failure, tc.terminal, tc.status)
			}
			if !strings.Contains(res.Output.Error, tc.want) {
				t.Errorf("error %q does not say %q", res.Output.Error, tc.want)
			}
			e.SetDown(false)
			if e.Exists(res.Container) {
				t.Errorf("container %s left behind", res.Container)
			}
			if res.LogFile == "" {
				t.Error("no run log")
			}
		})
	}
}

// TestDeadlinesFake: at the soft deadline the runner writes _close and an agent that
// answers then ends ok; one that does not is stopped at the hard deadline (SIGTERM, then
// SIGKILL when it ignores it) and ends FailTimeout, keeping an answer it gave before. Each
// case runs in a synctest bubble, whose fake clock the 2 s deadlines pass on at once.
func TestDeadlinesFake(t *testing.T) {
	ok := answer(contract.StatusOK, "summary")
	for _, tc := range []struct {
		name    string
		script  fakeengine.Script
		failure runner.Failure
		status  contract.Status
		signals []string
	}{
		{"answers at _close", fakeengine.Script{Hang: true, OnClose: ok}, runner.FailNone, contract.StatusOK, nil},
		{"silent until stopped", fakeengine.Script{Hang: true}, runner.FailTimeout, contract.StatusFatal, []string{"SIGTERM"}},
		{"ignores SIGTERM", fakeengine.Script{Hang: true, IgnoreTerm: true}, runner.FailTimeout, contract.StatusFatal, []string{"SIGTERM", "SIGKILL"}},
		{"answered, then hung", fakeengine.Script{Hang: true, Stdout: ok}, runner.FailTimeout, contract.StatusOK, []string{"SIGTERM"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := fakeengine.New(tc.script)
				r, layout := fakeRunner(t, e, 2*time.Second)
				var name string
				tu := turnOf("r1")
				tu.OnCreated = func(n, _ string) { name = n }
				res, err := r.Run(context.Background(), tu)
				if err != nil {
					t.Fatal(err)
				}
				if res.Failure != tc.failure || res.Output.Status != tc.status {
					t.Fatalf("failure %q status %q (%s), want %q %q", res.Failure, res.Output.Status, res.Output.Error, tc.failure, tc.status)
				}
				if got := e.Signals(name); !slices.Equal(got, tc.signals) {
					t.Errorf("signals %v, want %v", got, tc.signals)
				}
				dir, err := layout.IPCInputDir("main")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(dir, runner.CloseSentinel)); err != nil {
					t.Errorf("no %s at the soft deadline: %v", runner.CloseSentinel, err)
				}
				if tc.failure == runner.FailTimeout && !strings.Contains(string(mustRead(t, res.LogFile)), "hard deadline") {
					t.Errorf("the run log does not say the hard deadline stopped it")
				}
			})
		})
	}
}

// TestDetachAdoptFake: a detached turn leaves its container running; a new runner adopts
// it, supervises it to its deadline (on a synctest bubble's fake clock) and collects its
// answer from the engine's log.
func TestDetachAdoptFake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := fakeengine.New(fakeengine.Script{Hang: true, OnClose: answer(contract.StatusOK, "after restart")})
		r, layout := fakeRunner(t, e, 2*time.Second)
		detach := make(chan struct{})
		tu := turnOf("r1")
		tu.Detach = detach
		var id string
		tu.OnCreated = func(_, cid string) { id = cid }
		tu.OnInput = func() { close(detach) }
		started := time.Now()
		res, err := r.Run(context.Background(), tu)
		if err != nil || res.Failure != runner.FailDetached {
			t.Fatalf("run: %q, %v; want detached", res.Failure, err)
		}
		if !e.Exists(id) {
			t.Fatal("the detached container is gone")
		}
		// The next daemon's runner, on the same data directory.
		r2, err := runner.New(runner.Config{Engine: e, Layout: layout, Image: "img", Instance: "test", Timeout: 2 * time.Second, StopGrace: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		res, err = r2.Adopt(context.Background(), runner.Turn{RunID: "r1", Folder: "main", InputSent: true}, id, started)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failure != runner.FailNone || res.Output.Result != "after restart" || e.Exists(id) {
			t.Errorf("adopted: failure %q result %q, container left: %v", res.Failure, res.Output.Result, e.Exists(id))
		}
		res, err = r2.Adopt(context.Background(), runner.Turn{RunID: "r2", Folder: "main"}, "gone", time.Now())
		if err != nil || res.Failure != runner.FailLost {
			t.Errorf("adopting a vanished container: %q, %v; want lost", res.Failure, err)
		}
	})
}

// TestLeftoversFake: RemoveLeftovers removes this instance's containers that keep does
// not claim, and nothing of another instance.
func TestLeftoversFake(t *testing.T) {
	ctx := context.Background()
	e := fakeengine.New(fakeengine.Script{Hang: true})
	for _, c := range []struct{ name, instance string }{{"mine-1", "test"}, {"mine-kept", "test"}, {"theirs", "other"}} {
		id, err := e.Create(ctx, engine.Spec{Name: c.name, Image: "img", Labels: map[string]string{engine.LabelInstance: c.instance}})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := fakeRunner(t, e, time.Hour)
	removed, err := r.RemoveLeftovers(ctx, func(c engine.Container) bool { return c.Name == "mine-kept" })
	if err != nil || !slices.Equal(removed, []string{"mine-1"}) {
		t.Fatalf("removed %v, %v; want mine-1", removed, err)
	}
	if !e.Exists("mine-kept") || !e.Exists("theirs") || e.Exists("mine-1") {
		t.Errorf("kept %v, theirs %v, mine-1 %v", e.Exists("mine-kept"), e.Exists("theirs"), e.Exists("mine-1"))
	}
}

// TestSteerFake: a running container gets the messages and SIGUSR1; one that ended or is
// gone refuses them, and the messages are taken back.
func TestSteerFake(t *testing.T) {
	ctx := context.Background()
	e := fakeengine.New(fakeengine.Script{Hang: true})
	r, layout := fakeRunner(t, e, time.Hour)
	dir, err := layout.IPCInputDir("main")
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.Create(ctx, engine.Spec{Name: "c", Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []contract.Message{{Role: "user", Content: "more"}}
	if err := r.Steer(ctx, "main", id, msgs); !errors.Is(err, runner.ErrNotRunning) {
		t.Errorf("steer before start: %v, want ErrNotRunning", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused messages left in %s: %v", dir, entries)
	}
	if err := e.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := r.Steer(ctx, "main", id, msgs); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || !slices.Equal(e.Signals("c"), []string{"SIGUSR1"}) {
		t.Errorf("files %v, signals %v", entries, e.Signals("c"))
	}
	if err := r.Steer(ctx, "main", "gone", msgs); !errors.Is(err, engine.ErrNoSuchContainer) {
		t.Errorf("steer a gone container: %v, want ErrNoSuchContainer", err)
	}
	// The turn ended and its input directory went with it (the next turn clears it as it
	// begins): the failed write is the state machine's "not running", not an error.
	if err := e.Signal(ctx, id, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	// The signal ends the container in its own time: the turn has ended once Wait returns.
	if _, err := e.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := r.Steer(ctx, "main", id, msgs); !errors.Is(err, runner.ErrNotRunning) {
		t.Errorf("steer an ended turn whose input went: %v, want ErrNotRunning", err)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNamesUniqueFake: turns of one folder that begin in the same millisecond still get
// containers and run logs of their own names (the engine refuses a name in use).
func TestNamesUniqueFake(t *testing.T) {
	e := fakeengine.New(fakeengine.Script{Stdout: answer(contract.StatusOK, "done")})
	r, _ := fakeRunner(t, e, time.Minute)
	const n = 30
	results := make([]runner.Result, n)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Run(context.Background(), turnOf(fmt.Sprintf("r%d", i)))
			if err != nil {
				t.Errorf("turn %d: %v", i, err)
			}
			results[i] = res
		}()
	}
	wg.Wait()
	names, logs := map[string]bool{}, map[string]bool{}
	for i, res := range results {
		if res.Failure != runner.FailNone || res.LogFile == "" {
			t.Errorf("turn %d: failure %q, log %q: %s", i, res.Failure, res.LogFile, res.Output.Error)
		}
		names[res.Container], logs[res.LogFile] = true, true
	}
	if len(names) != n || len(logs) != n {
		t.Errorf("%d turns got %d container names and %d run logs", n, len(names), len(logs))
	}
}

// TestNameTakenFake: another process on the engine (a second daemon, another checkout's
// tests) made a container with the name this turn's would have, in the same millisecond:
// the turn takes the next name instead of failing.
func TestNameTakenFake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := fakeengine.New(fakeengine.Script{Stdout: answer(contract.StatusOK, "done")})
		r, _ := fakeRunner(t, e, time.Minute)
		taken := runner.ContainerName("main", "", time.Now())
		if _, err := e.Create(context.Background(), engine.Spec{Name: taken, Image: "img"}); err != nil {
			t.Fatal(err)
		}
		res, err := r.Run(context.Background(), turnOf("r1"))
		if err != nil || res.Failure != runner.FailNone || res.Output.Result != "done" {
			t.Fatalf("run: %+v, %v; want an answer in a container of another name", res, err)
		}
		if want := runner.ContainerName("main", "", time.Now().Add(time.Millisecond)); res.Container != want {
			t.Errorf("container %s, want %s (the next millisecond's name)", res.Container, want)
		}
	})
}
