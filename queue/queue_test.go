package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/queue"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// scripted is a runner whose containers do what the test says: each Run or Adopt is
// handed to the test as a container, which ends when the test ends it, when the run is
// killed (ctx) or when the queue detaches (Turn.Detach). It stands in for the runner and
// the engine both: these tests are about the queue's transitions, with a real store and
// the real turn lifecycle around it.
type scripted struct {
	started chan *container
	mu      sync.Mutex
	// leftovers are the containers the engine lists; removed what RemoveLeftovers removed.
	leftovers []engine.Container
	removed   []string
	steered   []string
}

// container is one Run or Adopt in progress.
type container struct {
	turn    runner.Turn
	adopted string // the adopted container's name; "" for a Run
	end     chan runner.Result
}

func newScripted() *scripted { return &scripted{started: make(chan *container, 16)} }

func (s *scripted) Run(ctx context.Context, t runner.Turn) (runner.Result, error) {
	return s.wait(ctx, &container{turn: t, end: make(chan runner.Result, 1)})
}

func (s *scripted) Adopt(ctx context.Context, t runner.Turn, name string, _ time.Time) (runner.Result, error) {
	return s.wait(ctx, &container{turn: t, adopted: name, end: make(chan runner.Result, 1)})
}

func (s *scripted) wait(ctx context.Context, c *container) (runner.Result, error) {
	s.started <- c
	select {
	case res := <-c.end:
		return res, nil
	case <-ctx.Done():
		return runner.Result{RunID: c.turn.RunID, Container: c.name(), Failure: runner.FailKilled,
			Output: contract.Output{Status: contract.StatusFatal, Error: "killed"}}, nil
	case <-c.turn.Detach:
		return runner.Result{RunID: c.turn.RunID, Container: c.name(), Failure: runner.FailDetached}, nil
	}
}

func (c *container) name() string {
	if c.adopted != "" {
		return c.adopted
	}
	return "arizuko-" + c.turn.RunID
}

// create makes the container exist: the queue learns its name and id, and that the
// agent got its input.
func (c *container) create() {
	c.turn.OnCreated(c.name(), "id-"+c.turn.RunID)
	c.turn.OnInput()
}

// exit ends the container with the agent's answer.
func (c *container) exit(status contract.Status, text string) {
	out := contract.Output{Status: status, Result: text}
	if status != contract.StatusOK {
		out = contract.Output{Status: status, Error: text}
	}
	c.end <- runner.Result{RunID: c.turn.RunID, Container: c.name(), Output: out}
}

// fail ends the turn with a runner failure.
func (c *container) fail(f runner.Failure, container string) {
	c.end <- runner.Result{RunID: c.turn.RunID, Container: container, Failure: f,
		Output: contract.Output{Status: contract.StatusFatal, Error: string(f)}}
}

func (s *scripted) Steer(_ context.Context, _ groupfolder.Folder, id string, _ []contract.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steered = append(s.steered, id)
	return nil
}

func (s *scripted) RemoveLeftovers(_ context.Context, keep func(engine.Container) bool) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var removed []string
	for _, c := range s.leftovers {
		if !keep(c) {
			removed = append(removed, c.Name)
		}
	}
	s.removed = append(s.removed, removed...)
	return removed, nil
}

func (s *scripted) RetryRemovals(context.Context) {}

func (s *scripted) Prepare(context.Context, runner.Turn) error { return nil }

// fixture is a queue over a real store and the real turn lifecycle, with the scripted runner.
type fixture struct {
	t      *testing.T
	st     *store.Store
	r      *scripted
	q      *queue.Queue
	engine *engineSwitch
	cancel context.CancelFunc
	done   chan struct{}
}

// engineSwitch is the engine's availability as the queue sees it.
type engineSwitch struct {
	mu sync.Mutex
	up bool
}

func (e *engineSwitch) Up() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.up
}

func (e *engineSwitch) set(up bool) {
	e.mu.Lock()
	e.up = up
	e.mu.Unlock()
}

type options struct {
	maxRunning int
	retryMax   int
	// before runs on the store before the queue starts: what a previous daemon left.
	before func(st *store.Store)
	// leftovers are the containers of this instance the engine lists at the start.
	leftovers []engine.Container
}

func newFixture(t *testing.T, o options, folders ...string) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, f := range folders {
		if _, err := st.UpsertGroup(ctx, store.Group{Folder: f}); err != nil {
			t.Fatal(err)
		}
	}
	if o.before != nil {
		o.before(st)
	}
	layout, err := groupfolder.NewLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := newScripted()
	r.leftovers = o.leftovers
	eng := &engineSwitch{up: true}
	q, err := queue.New(queue.Config{
		Store: st, Runner: r, Turns: &turn.Builder{Layout: layout, Store: st, Logger: log},
		EngineUp: eng.Up, MaxRunning: o.maxRunning, RetryMax: o.retryMax, RetryBackoff: time.Millisecond,
		Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithCancel(ctx)
	fx := &fixture{t: t, st: st, r: r, q: q, engine: eng, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(fx.done); q.Run(qctx) }()
	t.Cleanup(fx.stop)
	return fx
}

// stop stops the queue and waits for it: its turns are detached.
func (fx *fixture) stop() {
	fx.cancel()
	<-fx.done
}

// submit queues a run of folder, as POST /v1/runs does.
func (fx *fixture) submit(folder, text string) string {
	fx.t.Helper()
	in, _ := json.Marshal(queue.RunInput{Messages: []contract.Message{{Role: "user", Content: text}}})
	r, err := fx.st.CreateRun(context.Background(), store.Run{Folder: folder, Input: in})
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.q.Wake()
	return r.ID
}

// inbox appends a message to folder's inbox, as POST /v1/groups/{folder}/messages does.
func (fx *fixture) inbox(folder, text string) int64 {
	fx.t.Helper()
	ids, err := fx.st.AppendInbox(context.Background(), folder, store.InboxMessage{Role: "user", Content: text, Source: store.SourceAPI})
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.q.Wake()
	return ids[0]
}

// next is the next container the queue runs or adopts.
func (fx *fixture) next() *container {
	fx.t.Helper()
	select {
	case c := <-fx.r.started:
		return c
	case <-time.After(20 * time.Second):
		fx.t.Fatal("no container started in 20 s")
		return nil
	}
}

// none says that no container starts while the queue makes a full pass: a message to
// witness, appended after what is waiting, gets its container first (every pass looks at
// every folder and starts what may start, oldest first), and is ended.
func (fx *fixture) none(witness string) {
	fx.t.Helper()
	fx.inbox(witness, "witness")
	c := fx.next()
	if c.turn.Folder != groupfolder.Folder(witness) {
		fx.t.Fatalf("a container of %s (run %s) started while nothing should", c.turn.Folder, c.turn.RunID)
	}
	c.create()
	c.exit(contract.StatusOK, "seen")
	fx.waitCursor(witness, func(c store.Cursor) bool { return c.LastDoneID > 0 && c.Retries == 0 })
}

// wait waits until the run satisfies done, woken by every run's end.
func (fx *fixture) wait(id string, done func(*store.Run) bool) *store.Run {
	fx.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		changed := fx.q.Changed()
		r, err := fx.st.GetRun(context.Background(), id)
		if err != nil {
			fx.t.Fatal(err)
		}
		if done(r) {
			return r
		}
		select {
		case <-changed:
		case <-deadline:
			fx.t.Fatalf("run %s after 20 s: %+v", id, r)
		}
	}
}

func final(r *store.Run) bool { return r.State.Final() }

// waitCursor waits until folder's cursor satisfies done, woken by every run's end.
func (fx *fixture) waitCursor(folder string, done func(store.Cursor) bool) store.Cursor {
	fx.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		changed := fx.q.Changed()
		c, err := fx.st.GetCursor(context.Background(), folder)
		if err != nil {
			fx.t.Fatal(err)
		}
		if done(c) {
			return c
		}
		select {
		case <-changed:
		case <-deadline:
			fx.t.Fatalf("cursor of %s after 20 s: %+v", folder, c)
		}
	}
}

func (fx *fixture) runsOf(folder string) []store.Run {
	fx.t.Helper()
	rs, err := fx.st.ListRuns(context.Background(), store.RunFilter{Folder: folder})
	if err != nil {
		fx.t.Fatal(err)
	}
	return rs
}

// TestDispatch: a queued run gets a container with its messages, and its end is recorded
// with the agent's answer and the container's name.
func TestDispatch(t *testing.T) {
	fx := newFixture(t, options{}, "main")
	id := fx.submit("main", "hello")
	c := fx.next()
	if c.turn.RunID != id || c.turn.Folder != "main" || len(c.turn.Input.Messages) != 1 || c.turn.Input.Messages[0].Content != "hello" {
		t.Fatalf("turn %+v, want run %s of main saying hello", c.turn, id)
	}
	c.create()
	if r := fx.wait(id, func(r *store.Run) bool { return r.Container != "" }); r.State != store.RunRunning || r.InputSentAt == 0 {
		t.Errorf("after create: %+v, want running with its container and input recorded", r)
	}
	c.exit(contract.StatusOK, "hi")
	r := fx.wait(id, final)
	if r.State != store.RunExited || r.Status != store.StatusOK || r.Result != "hi" || r.Container != c.name() {
		t.Errorf("ended %+v", r)
	}
}

// TestOnePerFolder: a folder's second run waits for its first; another folder's does not.
func TestOnePerFolder(t *testing.T) {
	fx := newFixture(t, options{}, "main", "other", "witness")
	first := fx.submit("main", "one")
	second := fx.submit("main", "two")
	c1 := fx.next()
	if c1.turn.RunID != first {
		t.Fatalf("started %s first, want %s", c1.turn.RunID, first)
	}
	c1.create()
	fx.none("witness")
	if r := fx.wait(second, func(*store.Run) bool { return true }); r.State != store.RunQueued {
		t.Fatalf("the folder's second run while its first runs: %s", r.State)
	}
	other := fx.submit("other", "three")
	if c := fx.next(); c.turn.RunID != other {
		t.Fatalf("started %s, want other's %s", c.turn.RunID, other)
	} else {
		c.create()
		c.exit(contract.StatusOK, "")
	}
	c1.exit(contract.StatusOK, "")
	c2 := fx.next()
	if c2.turn.RunID != second {
		t.Fatalf("started %s after the first ended, want %s", c2.turn.RunID, second)
	}
	c2.create()
	c2.exit(contract.StatusOK, "")
	fx.wait(second, final)
}

// TestGlobalCap: no more than max_running containers at once, whatever the folders.
func TestGlobalCap(t *testing.T) {
	fx := newFixture(t, options{maxRunning: 2}, "a", "b", "c")
	ids := []string{fx.submit("a", "x"), fx.submit("b", "x"), fx.submit("c", "x")}
	c1, c2 := fx.next(), fx.next()
	c1.create()
	c2.create()
	if n, err := fx.st.CountRuns(context.Background()); err != nil || n.Running != 2 || n.Queued != 1 {
		t.Fatalf("counts at the cap: %+v %v", n, err)
	}
	c1.exit(contract.StatusOK, "")
	c3 := fx.next()
	if c3.turn.RunID != ids[2] {
		t.Fatalf("after one ended, started %s, want %s", c3.turn.RunID, ids[2])
	}
	c3.create()
	c3.exit(contract.StatusOK, "")
	c2.exit(contract.StatusOK, "")
	for _, id := range ids {
		fx.wait(id, final)
	}
}

// TestRetryParkUnpark: a fatal inbox turn rolls the cursor back and runs again after the
// backoff; after retry_max retries the folder is parked and makes no run; unparked, the
// messages get their turn again and the cursor advances.
func TestRetryParkUnpark(t *testing.T) {
	fx := newFixture(t, options{retryMax: 1}, "main", "witness")
	msg := fx.inbox("main", "boom")
	for attempt := 1; attempt <= 2; attempt++ {
		c := fx.next()
		c.create()
		c.exit(contract.StatusFatal, fmt.Sprint("boom ", attempt))
	}
	cur := fx.waitCursor("main", store.Cursor.Parked)
	runs := fx.runsOf("main")
	if len(runs) != 2 || cur.LastDoneID >= msg {
		t.Fatalf("parked after %d runs, cursor %+v; want 2 runs (the first and one retry), the message not done", len(runs), cur)
	}
	for _, r := range runs {
		if r.State != store.RunError || r.InboxFirst != msg {
			t.Errorf("attempt %d: %+v", r.Attempt, r)
		}
	}
	fx.inbox("main", "more")
	fx.none("witness")
	if n := len(fx.runsOf("main")); n != 2 {
		t.Fatalf("a parked folder made a run: %d runs", n)
	}
	if _, err := fx.st.Unpark(context.Background(), "main"); err != nil {
		t.Fatal(err)
	}
	fx.q.Wake()
	c := fx.next()
	if len(c.turn.Input.Messages) != 2 {
		t.Fatalf("after unpark the turn has %d messages, want both pending", len(c.turn.Input.Messages))
	}
	c.create()
	c.exit(contract.StatusOK, "recovered")
	fx.waitCursor("main", func(c store.Cursor) bool { return c.LastDoneID > msg && !c.Parked() && c.Retries == 0 })
}

// TestMisconfigParks: a terminal failure parks the folder at once, without retries.
func TestMisconfigParks(t *testing.T) {
	fx := newFixture(t, options{retryMax: 3}, "main")
	fx.inbox("main", "x")
	c := fx.next()
	c.create()
	c.end <- runner.Result{RunID: c.turn.RunID, Container: c.name(), Failure: runner.FailMisconfig, Terminal: true, ExitCode: 126,
		Output: contract.Output{Status: contract.StatusFatal, Error: "exit 126"}}
	cur := fx.waitCursor("main", store.Cursor.Parked)
	if runs := fx.runsOf("main"); len(runs) != 1 || cur.Retries != 0 || runs[0].Failure != store.FailureMisconfig || !runs[0].Terminal {
		t.Fatalf("runs %+v, cursor %+v; want one terminal misconfig, no retry", runs, cur)
	}
}

// TestNoInputRequeue: a turn whose agent never got its input runs again from the start,
// as a new attempt of the same run.
func TestNoInputRequeue(t *testing.T) {
	fx := newFixture(t, options{}, "main")
	id := fx.submit("main", "x")
	c := fx.next()
	c.fail(runner.FailNoInput, c.name())
	again := fx.next()
	if again.turn.RunID != id {
		t.Fatalf("started %s, want %s again", again.turn.RunID, id)
	}
	again.create()
	again.exit(contract.StatusOK, "second time")
	if r := fx.wait(id, final); r.Attempt != 2 || r.Result != "second time" {
		t.Errorf("ended %+v, want attempt 2 with the answer", r)
	}
}

// TestKill: killing a running run stops its container; it ends killed.
func TestKill(t *testing.T) {
	fx := newFixture(t, options{}, "main")
	id := fx.submit("main", "hang")
	fx.next().create()
	fx.wait(id, func(r *store.Run) bool { return r.Container != "" })
	if _, err := fx.st.RequestKill(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if !fx.q.Kill(id) {
		t.Fatal("Kill: the run was not in flight")
	}
	if r := fx.wait(id, final); r.State != store.RunKilled {
		t.Errorf("ended %+v, want killed", r)
	}
}

// TestDetachAndAdopt: a queue that stops leaves its running turn running; the next one
// adopts its container (keeping it, while removing this instance's other leftovers),
// takes steering once the turn's services are back, and records its end.
func TestDetachAndAdopt(t *testing.T) {
	fx := newFixture(t, options{}, "main")
	id := fx.submit("main", "long")
	c := fx.next()
	c.create()
	fx.wait(id, func(r *store.Run) bool { return r.Container != "" })
	fx.stop()
	r, err := fx.st.GetRun(context.Background(), id)
	if err != nil || r.State != store.RunRunning {
		t.Fatalf("after the queue stopped: %+v %v, want the run still running", r, err)
	}

	next := newFixture(t, options{
		before:    func(st *store.Store) { copyRun(t, fx.st, st, id) },
		leftovers: []engine.Container{{Name: c.name()}, {Name: "arizuko-main-stale"}},
	}, "main")
	adopted := next.next()
	if adopted.adopted != c.name() || adopted.turn.RunID != id {
		t.Fatalf("adopted %q for %s, want %s for %s", adopted.adopted, adopted.turn.RunID, c.name(), id)
	}
	next.r.mu.Lock()
	removed := next.r.removed
	next.r.mu.Unlock()
	if len(removed) != 1 || removed[0] != "arizuko-main-stale" {
		t.Errorf("removed %v, want only the stale leftover", removed)
	}
	if err := next.q.Steer(context.Background(), id, []contract.Message{{Content: "more"}}); err != nil {
		t.Errorf("steer of the adopted run: %v", err)
	}
	adopted.exit(contract.StatusOK, "adopted answer")
	if r := next.wait(id, final); r.Result != "adopted answer" || r.State != store.RunExited {
		t.Errorf("adopted run ended %+v", r)
	}
}

// copyRun puts the run of one store into another as the previous daemon left it, so that
// a second queue starts over the state the first left.
func copyRun(t *testing.T, from, to *store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	r, err := from.GetRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := to.CreateRun(ctx, store.Run{ID: r.ID, Folder: r.Folder, Input: r.Input}); err != nil {
		t.Fatal(err)
	}
	if _, err := to.StartNext(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if err := to.SetContainer(ctx, id, r.Container); err != nil {
		t.Fatal(err)
	}
	if err := to.MarkInputSent(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// TestOrphan: a run whose container exists when the engine goes away stays running, and
// its container is adopted once the engine answers again.
func TestOrphan(t *testing.T) {
	fx := newFixture(t, options{}, "main")
	id := fx.submit("main", "x")
	c := fx.next()
	c.create()
	fx.wait(id, func(r *store.Run) bool { return r.Container != "" })
	fx.engine.set(false)
	c.fail(runner.FailEngine, c.name())
	fx.wait(id, func(*store.Run) bool { return fx.q.Running() == 0 })
	if r, _ := fx.st.GetRun(context.Background(), id); r.State != store.RunRunning {
		t.Fatalf("orphaned run: %+v, want it still running", r)
	}
	fx.engine.set(true)
	fx.q.Wake()
	adopted := fx.next()
	if adopted.adopted != c.name() {
		t.Fatalf("after the engine came back: adopted %q, want %q", adopted.adopted, c.name())
	}
	adopted.exit(contract.StatusOK, "survived")
	if r := fx.wait(id, final); r.Result != "survived" {
		t.Errorf("orphan ended %+v", r)
	}
}

// TestEngineAwayRequeues: a run that failed for the engine before its container existed
// is put back, and runs once the engine answers.
func TestEngineAwayRequeues(t *testing.T) {
	fx := newFixture(t, options{}, "main")
	id := fx.submit("main", "x")
	c := fx.next()
	fx.engine.set(false)
	c.fail(runner.FailEngine, "")
	if r := fx.wait(id, func(r *store.Run) bool { return r.State == store.RunQueued }); r.Attempt != 2 || r.Container != "" {
		t.Fatalf("requeued %+v, want attempt 2 without a container", r)
	}
	fx.engine.set(true)
	fx.q.Wake()
	again := fx.next()
	again.create()
	again.exit(contract.StatusOK, "")
	if r := fx.wait(id, final); r.State != store.RunExited || r.Attempt != 2 {
		t.Errorf("ended %+v, want exited at attempt 2", r)
	}
}

// TestAdoptOnStart: runs a previous daemon left are adopted by their containers; one
// without a container runs again from the start.
func TestAdoptOnStart(t *testing.T) {
	var noContainer string
	fx := newFixture(t, options{before: func(st *store.Store) {
		ctx := context.Background()
		in, _ := json.Marshal(queue.RunInput{Messages: []contract.Message{{Content: "x"}}})
		r, err := st.CreateRun(ctx, store.Run{Folder: "main", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.StartNext(ctx, 5); err != nil {
			t.Fatal(err)
		}
		noContainer = r.ID
	}}, "main")
	c := fx.next()
	if c.adopted != "" || c.turn.RunID != noContainer {
		t.Fatalf("started %+v, want %s run again", c, noContainer)
	}
	c.create()
	c.exit(contract.StatusOK, "")
	if r := fx.wait(noContainer, final); r.Attempt != 2 {
		t.Errorf("ended %+v, want attempt 2", r)
	}
}
