package queue_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/fakeengine"
	"github.com/arizuko/arizukod/queue"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// engineFixture is a queue with the real runner on the fake engine, over a real store and
// the real turn lifecycle: the transitions that depend on what the runner makes of an
// engine (no input, an engine gone with a container running, adoption, leftovers).
type engineFixture struct {
	t      *testing.T
	st     *store.Store
	eng    *fakeengine.Engine
	layout groupfolder.Layout
	q      *queue.Queue
	cancel context.CancelFunc
	done   chan struct{}
}

// wrapUp is what the fake agent answers when it is told to wrap up.
var wrapUp = fakeengine.Answer(contract.Output{Status: contract.StatusOK, Result: "wrapped up"})

func newEngineFixture(t *testing.T, dir string, st *store.Store, eng *fakeengine.Engine) *engineFixture {
	t.Helper()
	layout, err := groupfolder.NewLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := runner.New(runner.Config{Engine: eng, Info: engine.Info{Name: "fake"}, Layout: layout, Image: "img",
		Instance: "queue-test", Timeout: time.Hour, StopGrace: time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	up := func(ctx context.Context) bool { _, err := eng.Info(ctx); return err == nil }
	q, err := queue.New(queue.Config{
		Store: st, Runner: r, Turns: &turn.Builder{Layout: layout, Store: st, Logger: log},
		EngineUp: func() bool { return up(context.Background()) }, CheckEngine: up, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fx := &engineFixture{t: t, st: st, eng: eng, layout: layout, q: q, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(fx.done); q.Run(ctx) }()
	t.Cleanup(func() { fx.stop(); r.Close() })
	return fx
}

func openStore(t *testing.T, dir string, folders ...string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(dir, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, f := range folders {
		if _, err := st.UpsertGroup(context.Background(), store.Group{Folder: f}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func (fx *engineFixture) stop() {
	fx.cancel()
	<-fx.done
}

func (fx *engineFixture) submit(folder string) string {
	fx.t.Helper()
	f := &fixture{t: fx.t, st: fx.st, q: fx.q}
	return f.submit(folder, "hi")
}

// eventually waits until cond holds, checking it every few milliseconds.
func (fx *engineFixture) eventually(what string, cond func() bool) {
	fx.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			fx.t.Fatalf("after 20 s: %s", what)
		}
	}
}

func (fx *engineFixture) run(id string) *store.Run {
	fx.t.Helper()
	r, err := fx.st.GetRun(context.Background(), id)
	if err != nil {
		fx.t.Fatal(err)
	}
	return r
}

// tellToWrapUp writes the runner's wrap-up sentinel into the group's IPC input directory,
// as the soft deadline does: a fake agent with OnClose answers and exits.
func (fx *engineFixture) tellToWrapUp(f groupfolder.Folder) {
	fx.t.Helper()
	dir, err := fx.layout.IPCInputDir(f)
	if err != nil {
		fx.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, runner.CloseSentinel), nil, 0o600); err != nil {
		fx.t.Fatal(err)
	}
}

// TestEngineTurn: on the fake engine, a queued run's container gets the turn's input line
// and its answer is recorded; the container is removed.
func TestEngineTurn(t *testing.T) {
	dir := t.TempDir()
	eng := fakeengine.New(fakeengine.Script{Stdout: fakeengine.Answer(contract.Output{Status: contract.StatusOK, Result: "hello back"})})
	fx := newEngineFixture(t, dir, openStore(t, dir, "main"), eng)
	id := fx.submit("main")
	fx.eventually("the run ended", func() bool { return fx.run(id).State.Final() })
	r := fx.run(id)
	if r.State != store.RunExited || r.Result != "hello back" || r.InputSentAt == 0 || r.Container == "" {
		t.Fatalf("ended %+v", r)
	}
	var in contract.Input
	if err := json.Unmarshal([]byte(eng.Stdin(r.Container)), &in); err != nil || len(in.Messages) != 1 || in.Messages[0].Content != "hi" {
		t.Errorf("the container's stdin: %q, want the turn's input line", eng.Stdin(r.Container))
	}
	fx.eventually("the container removed", func() bool { return !eng.Exists(r.Container) })
}

// TestEngineNoInput: a container that never read its input line makes the run run
// again, in a new container, as attempt 2.
func TestEngineNoInput(t *testing.T) {
	dir := t.TempDir()
	eng := fakeengine.New(fakeengine.Script{})
	var n atomic.Int32
	eng.SetScript(func(engine.Spec) fakeengine.Script {
		if n.Add(1) == 1 {
			return fakeengine.Script{Stdin: fakeengine.StdinBroken, ExitCode: 1}
		}
		return fakeengine.Script{Stdout: fakeengine.Answer(contract.Output{Status: contract.StatusOK, Result: "second"})}
	})
	fx := newEngineFixture(t, dir, openStore(t, dir, "main"), eng)
	id := fx.submit("main")
	fx.eventually("the run ended", func() bool { return fx.run(id).State.Final() })
	if r := fx.run(id); r.State != store.RunExited || r.Attempt != 2 || r.Result != "second" || n.Load() != 2 {
		t.Fatalf("ended %+v after %d containers, want attempt 2 answered by the second", r, n.Load())
	}
}

// TestEngineGoneAndBack: an engine that goes away while a container runs leaves the run
// running; once it answers again the queue adopts the container and records its answer.
// The queue's waits for the engine to come back pass on a synctest bubble's fake clock.
func TestEngineGoneAndBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		eng := fakeengine.New(fakeengine.Script{Hang: true, OnClose: wrapUp})
		fx := newEngineFixture(t, dir, openStore(t, dir, "main"), eng)
		id := fx.submit("main")
		fx.eventually("the agent got its input", func() bool { return fx.run(id).InputSentAt != 0 })
		eng.SetDown(true)
		fx.eventually("the run orphaned", func() bool { return fx.q.Running() == 0 })
		if r := fx.run(id); r.State != store.RunRunning {
			t.Fatalf("with the engine away: %+v, want still running", r)
		}
		eng.SetDown(false)
		fx.q.Wake()
		fx.eventually("the container adopted", func() bool { return fx.q.Running() == 1 })
		fx.tellToWrapUp("main")
		fx.eventually("the run ended", func() bool { return fx.run(id).State.Final() })
		if r := fx.run(id); r.State != store.RunExited || r.Result != "wrapped up" {
			t.Fatalf("ended %+v", r)
		}
	})
}

// TestEngineDetachAdopt: a queue that stops leaves its container running; the next queue
// over the same store and engine removes the instance's leftover containers but that one,
// adopts it, and records its answer.
func TestEngineDetachAdopt(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir, "main")
	eng := fakeengine.New(fakeengine.Script{Hang: true, OnClose: wrapUp})
	first := newEngineFixture(t, dir, st, eng)
	id := first.submit("main")
	first.eventually("the agent got its input", func() bool { return first.run(id).InputSentAt != 0 })
	first.stop()
	r := first.run(id)
	if r.State != store.RunRunning || !eng.Exists(r.Container) {
		t.Fatalf("after the queue stopped: %+v (container there: %v)", r, eng.Exists(r.Container))
	}
	stray, err := eng.Create(context.Background(), engine.Spec{Name: "arizuko-main-stale", Image: "img",
		Labels: map[string]string{engine.LabelInstance: "queue-test"}})
	if err != nil {
		t.Fatal(err)
	}

	next := newEngineFixture(t, dir, st, eng)
	next.eventually("the container adopted", func() bool { return next.q.Running() == 1 })
	if eng.Exists("arizuko-main-stale") || !eng.Exists(r.Container) {
		t.Errorf("after the start: leftover %s there: %v, adopted %s there: %v; want only the adopted one",
			stray, eng.Exists("arizuko-main-stale"), r.Container, eng.Exists(r.Container))
	}
	next.tellToWrapUp("main")
	next.eventually("the run ended", func() bool { return next.run(id).State.Final() })
	if r := next.run(id); r.State != store.RunExited || r.Result != "wrapped up" {
		t.Fatalf("adopted run ended %+v", r)
	}
}
