package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func mustCreateRun(t *testing.T, s *Store, r Run) *Run {
	t.Helper()
	got, err := s.CreateRun(context.Background(), r)
	if err != nil {
		t.Fatalf("CreateRun(%+v): %v", r, err)
	}
	return got
}

func TestCreateRun(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	r := mustCreateRun(t, s, Run{Folder: "main", Input: json.RawMessage(`{"messages":[{"role":"user","content":"hi"}]}`), TimeoutMS: 60000})
	if !regexp.MustCompile(`^r_[0-9a-f]{16}$`).MatchString(r.ID) {
		t.Errorf("generated id %q, want r_ and 16 hex digits", r.ID)
	}
	if r.State != RunQueued || r.Kind != KindTurn || r.Attempt != 1 || r.CreatedAt != c.MS() || r.Seq != 1 {
		t.Errorf("defaults: %+v", r)
	}
	if r.StartedAt != 0 || r.EndedAt != 0 || r.ExitCode != nil || r.InboxFirst != 0 {
		t.Errorf("unset fields set: %+v", r)
	}
	got, err := s.GetRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Input) != `{"messages":[{"role":"user","content":"hi"}]}` || got.TimeoutMS != 60000 {
		t.Errorf("round trip: %+v", got)
	}
	task := mustCreateRun(t, s, Run{ID: "mine", Folder: "main/x", Kind: KindTask, TaskID: "t_1"})
	if task.ID != "mine" || task.TaskID != "t_1" || task.Seq != 2 || string(task.Input) != "{}" {
		t.Errorf("task run: %+v", task)
	}
	if _, err := s.CreateRun(ctx, Run{ID: "mine", Folder: "main"}); !errors.Is(err, ErrConflict) {
		t.Errorf("duplicate id: err = %v, want ErrConflict", err)
	}
	if _, err := s.GetRun(ctx, "r_nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRun(unknown) = %v, want ErrNotFound", err)
	}
}

func TestCreateRunInvalid(t *testing.T) {
	s := openTest(t)
	tests := []struct {
		name  string
		run   Run
		field string
	}{
		{"no folder", Run{}, "folder"},
		{"bad kind", Run{Folder: "main", Kind: "batch"}, "kind"},
		{"task without task id", Run{Folder: "main", Kind: KindTask}, "task_id"},
		{"turn with task id", Run{Folder: "main", TaskID: "t_1"}, "task_id"},
		{"bad input", Run{Folder: "main", Input: json.RawMessage(`{"messages":`)}, "input"},
		{"negative timeout", Run{Folder: "main", TimeoutMS: -1}, "timeout_ms"},
		{"negative attempt", Run{Folder: "main", Attempt: -1}, "attempt"},
		{"inbox range", Run{Folder: "main", InboxFirst: 1, InboxLast: 2}, "inbox range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.CreateRun(context.Background(), tt.run)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %q", err, tt.field)
			}
		})
	}
}

func TestListRuns(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a1 := mustCreateRun(t, s, Run{Folder: "a"})
	b1 := mustCreateRun(t, s, Run{Folder: "b", Kind: KindTask, TaskID: "t_b"})
	a2 := mustCreateRun(t, s, Run{Folder: "a"})
	if _, err := s.StartNext(ctx, 5); err != nil { // starts a1
		t.Fatal(err)
	}
	ids := func(rs []Run) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return fmt.Sprint(out)
	}
	tests := []struct {
		name string
		f    RunFilter
		want []string
	}{
		{"all newest first", RunFilter{}, []string{a2.ID, b1.ID, a1.ID}},
		{"folder", RunFilter{Folder: "a"}, []string{a2.ID, a1.ID}},
		{"state", RunFilter{State: RunQueued}, []string{a2.ID, b1.ID}},
		{"folder and state", RunFilter{Folder: "a", State: RunRunning}, []string{a1.ID}},
		{"task", RunFilter{TaskID: "t_b"}, []string{b1.ID}},
		{"limit", RunFilter{Limit: 2}, []string{a2.ID, b1.ID}},
		{"nothing", RunFilter{Folder: "zzz"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListRuns(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if ids(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %v, want %v", ids(got), tt.want)
			}
		})
	}
	running, err := s.ListRunning(ctx)
	if err != nil || len(running) != 1 || running[0].ID != a1.ID {
		t.Errorf("ListRunning = %v, %v; want [%s]", ids(running), err, a1.ID)
	}
	counts, err := s.CountRuns(ctx)
	if err != nil || counts != (RunCounts{Queued: 2, Running: 1}) {
		t.Errorf("CountRuns = %+v, %v; want 2 queued, 1 running", counts, err)
	}
}

func TestStartNextQueueRules(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	if r, err := s.StartNext(ctx, 2); r != nil || err != nil {
		t.Fatalf("empty queue: %v, %v; want nil, nil", r, err)
	}
	if _, err := s.StartNext(ctx, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("cap 0: err = %v, want ErrInvalid", err)
	}
	a1 := mustCreateRun(t, s, Run{Folder: "a"})
	a2 := mustCreateRun(t, s, Run{Folder: "a"})
	b1 := mustCreateRun(t, s, Run{Folder: "b"})
	c1 := mustCreateRun(t, s, Run{Folder: "c"})
	start := func(want *Run) {
		t.Helper()
		c.Advance(time.Second)
		got, err := s.StartNext(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case want == nil && got != nil:
			t.Fatalf("started %s (%s), want nothing", got.ID, got.Folder)
		case want != nil && got == nil:
			t.Fatalf("started nothing, want %s (%s)", want.ID, want.Folder)
		case want != nil && got.ID != want.ID:
			t.Fatalf("started %s (%s), want %s (%s)", got.ID, got.Folder, want.ID, want.Folder)
		case got != nil && (got.State != RunRunning || got.StartedAt != c.MS()):
			t.Fatalf("started run: %+v", got)
		}
	}
	start(a1)  // oldest
	start(b1)  // a is busy, so b
	start(nil) // cap 2 reached
	finish(t, s, a1.ID)
	start(a2) // a's next, before c (older)
	start(nil)
	finish(t, s, b1.ID)
	start(c1)
	start(nil)
}

func finish(t *testing.T, s *Store, id string) *Run {
	t.Helper()
	code := 0
	r, err := s.FinishRun(context.Background(), id, Outcome{State: RunExited, Status: StatusOK, ExitCode: &code, Result: "done"})
	if err != nil {
		t.Fatalf("FinishRun(%s): %v", id, err)
	}
	return r
}

// TestStartNextConcurrent runs a queue from many goroutines and checks that
// no folder ever has two runs running, the cap is never exceeded, each
// folder's runs start in creation order, and every run runs exactly once.
// TestStartNextWaitsForAncestors: a folder's run does not start while a run of one of its
// ancestors runs (that agent can write its folder); a folder that only shares a prefix is
// no descendant, and an ancestor may start while a descendant runs.
func TestStartNextWaitsForAncestors(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	main := mustCreateRun(t, s, Run{Folder: "main"})
	child := mustCreateRun(t, s, Run{Folder: "main/research"})
	grandchild := mustCreateRun(t, s, Run{Folder: "main/research/deep"})
	lookalike := mustCreateRun(t, s, Run{Folder: "mainly/x"})
	start := func(want *Run) {
		t.Helper()
		got, err := s.StartNext(ctx, 10)
		switch {
		case err != nil:
			t.Fatal(err)
		case want == nil && got != nil:
			t.Fatalf("started %s, want nothing", got.Folder)
		case want != nil && (got == nil || got.ID != want.ID):
			t.Fatalf("started %+v, want %s", got, want.Folder)
		}
	}
	start(main)
	start(lookalike) // not below main: "main" is no ancestor of "mainly/x"
	start(nil)       // main/research and main/research/deep wait for main
	finish(t, s, main.ID)
	start(child)
	start(nil) // main/research/deep waits for main/research
	again := mustCreateRun(t, s, Run{Folder: "main"})
	start(again) // an ancestor may start while a descendant runs
	finish(t, s, child.ID)
	start(nil) // main runs again
	finish(t, s, again.ID)
	start(grandchild)
}

func TestStartNextConcurrent(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	const (
		folders   = 6
		perFolder = 8
		globalCap = 3
		workers   = 12
	)
	var created [folders][]string
	for i := range perFolder {
		for f := range folders {
			r := mustCreateRun(t, s, Run{Folder: fmt.Sprintf("f%d", f), Input: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
			created[f] = append(created[f], r.ID)
		}
	}
	var (
		mu      sync.Mutex
		running = map[string]bool{}
		started = map[string][]string{}
		maxSeen int
		done    atomic.Int64
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for done.Load() < folders*perFolder {
				r, err := s.StartNext(ctx, globalCap)
				if err != nil {
					t.Error(err)
					return
				}
				if r == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				mu.Lock()
				if running[r.Folder] {
					t.Errorf("folder %s started %s while another run was running", r.Folder, r.ID)
				}
				running[r.Folder] = true
				started[r.Folder] = append(started[r.Folder], r.ID)
				maxSeen = max(maxSeen, len(running))
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // hold the slot, as a container would
				mu.Lock()
				delete(running, r.Folder)
				mu.Unlock()
				if _, err := s.FinishRun(ctx, r.ID, Outcome{State: RunExited, Status: StatusOK}); err != nil {
					t.Error(err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if maxSeen > globalCap {
		t.Errorf("%d runs ran at once, cap is %d", maxSeen, globalCap)
	}
	for f := range folders {
		name := fmt.Sprintf("f%d", f)
		if fmt.Sprint(started[name]) != fmt.Sprint(created[f]) {
			t.Errorf("folder %s started %v, want creation order %v", name, started[name], created[f])
		}
	}
	counts, err := s.CountRuns(ctx)
	if err != nil || counts != (RunCounts{}) {
		t.Errorf("after all: %+v, %v; want none open", counts, err)
	}
}

func TestRunTransitions(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()

	queued := mustCreateRun(t, s, Run{Folder: "q"})
	if err := s.SetContainer(ctx, queued.ID, "arizuko-q-1"); !errors.Is(err, ErrConflict) {
		t.Errorf("SetContainer on queued: %v, want ErrConflict", err)
	}
	if err := s.RequeueRun(ctx, queued.ID); !errors.Is(err, ErrConflict) {
		t.Errorf("RequeueRun on queued: %v, want ErrConflict", err)
	}
	if err := s.SetContainer(ctx, "r_none", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetContainer on unknown: %v, want ErrNotFound", err)
	}

	r, _ := s.StartNext(ctx, 5)
	if err := s.SetContainer(ctx, r.ID, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetContainer empty: %v, want ErrInvalid", err)
	}
	if err := s.SetContainer(ctx, r.ID, "arizuko-q-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.RequeueRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	r, _ = s.GetRun(ctx, r.ID)
	if r.State != RunQueued || r.Attempt != 2 || r.Container != "" || r.StartedAt != 0 {
		t.Errorf("after requeue: %+v", r)
	}
	r, _ = s.StartNext(ctx, 5)
	if r == nil || r.ID != queued.ID {
		t.Fatalf("requeued run lost its place: %+v", r)
	}
	c.Advance(3 * time.Second)
	code := 137
	done, err := s.FinishRun(ctx, r.ID, Outcome{State: RunError, Status: StatusFatal, Failure: FailureOOM,
		Terminal: true, ExitCode: &code, Error: "out of memory", NewSessionID: "sess-1"})
	if err != nil {
		t.Fatal(err)
	}
	if done.State != RunError || done.Status != StatusFatal || done.Failure != FailureOOM || !done.Terminal ||
		done.ExitCode == nil || *done.ExitCode != 137 || done.Error != "out of memory" || done.EndedAt != c.MS() ||
		done.NewSessionID != "sess-1" {
		t.Errorf("finished run: %+v", done)
	}
	if sess, _ := s.GetSession(ctx, "q"); sess != "" {
		t.Errorf("session saved without SaveSession: %q", sess)
	}
	if _, err := s.FinishRun(ctx, r.ID, Outcome{State: RunExited}); !errors.Is(err, ErrConflict) {
		t.Errorf("second FinishRun: %v, want ErrConflict", err)
	}
	if _, err := s.RequestKill(ctx, r.ID); !errors.Is(err, ErrConflict) {
		t.Errorf("kill of a finished run: %v, want ErrConflict", err)
	}

	for _, o := range []Outcome{{State: RunRunning}, {State: ""}, {State: RunExited, Status: "meh"}, {State: RunExited, Cursor: CursorUpdate{Op: CursorAdvance}}} {
		other := mustCreateRun(t, s, Run{Folder: "o"})
		if _, err := s.FinishRun(ctx, other.ID, o); !errors.Is(err, ErrInvalid) {
			t.Errorf("FinishRun(%+v) = %v, want ErrInvalid", o, err)
		}
	}
	if _, err := s.FinishRun(ctx, "r_none", Outcome{State: RunExited}); !errors.Is(err, ErrNotFound) {
		t.Errorf("FinishRun unknown: %v, want ErrNotFound", err)
	}
}

func TestFinishRunSavesSession(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	mustCreateRun(t, s, Run{Folder: "main"})
	r, _ := s.StartNext(ctx, 1)
	if _, err := s.FinishRun(ctx, r.ID, Outcome{State: RunExited, Status: StatusOK, NewSessionID: "s-2", SaveSession: true}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSession(ctx, "main"); err != nil || got != "s-2" {
		t.Errorf("GetSession = %q, %v; want s-2", got, err)
	}
}

func TestRequestKill(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	running := mustCreateRun(t, s, Run{Folder: "a"})
	queued := mustCreateRun(t, s, Run{Folder: "a"})
	s.StartNext(ctx, 5)

	k, err := s.RequestKill(ctx, queued.ID)
	if err != nil {
		t.Fatal(err)
	}
	if k.State != RunKilled || k.Failure != FailureKilled || k.EndedAt != c.MS() || k.KillRequestedAt != c.MS() {
		t.Errorf("killed queued run: %+v", k)
	}

	first := c.MS()
	k, err = s.RequestKill(ctx, running.ID)
	if err != nil {
		t.Fatal(err)
	}
	if k.State != RunRunning || k.KillRequestedAt != first {
		t.Errorf("kill of running run: %+v", k)
	}
	c.Advance(time.Second)
	k, _ = s.RequestKill(ctx, running.ID)
	if k.KillRequestedAt != first {
		t.Errorf("second kill request moved KillRequestedAt to %d, want %d", k.KillRequestedAt, first)
	}
	if err := s.RequeueRun(ctx, running.ID); !errors.Is(err, ErrConflict) {
		t.Errorf("requeue of a run being killed: %v, want ErrConflict", err)
	}
	listed, _ := s.ListRunning(ctx)
	if len(listed) != 1 || listed[0].KillRequestedAt != first {
		t.Errorf("ListRunning does not show the kill request: %+v", listed)
	}
	if _, err := s.FinishRun(ctx, running.ID, Outcome{State: RunKilled, Failure: FailureKilled}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestKill(ctx, "r_none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("kill unknown: %v, want ErrNotFound", err)
	}
}

// TestQueueInvariantsAreEnforcedByTheSchema: even a buggy caller of the
// database cannot run two runs of a folder or open two inbox runs of one.
func TestQueueInvariantsAreEnforcedByTheSchema(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustCreateRun(t, s, Run{Folder: "a"})
	b := mustCreateRun(t, s, Run{Folder: "a"})
	if _, err := s.db.ExecContext(ctx, `UPDATE runs SET state = 'running' WHERE id IN (?, ?)`, a.ID, b.ID); !isUniqueViolation(err) {
		t.Errorf("two running runs in one folder: err = %v, want a unique violation", err)
	}
	if _, err := s.CreateRun(ctx, Run{ID: a.ID, Folder: "a"}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "id exists") {
		t.Errorf("duplicate id: %v, want ErrConflict saying the id exists", err)
	}
	appendMsgs(t, s, "a", "m")
	for i := range 2 {
		r := Run{Folder: "a", InboxFirst: 1, InboxLast: 1}
		if err := checkNewRun(&r); err != nil {
			t.Fatal(err)
		}
		err := insertRun(ctx, s.db, &r, 1)
		if i == 0 && err != nil {
			t.Fatal(err)
		}
		if i == 1 && (!errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "open inbox run")) {
			t.Errorf("second open inbox run: %v, want ErrConflict", err)
		}
	}
}
