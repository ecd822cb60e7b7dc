package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arizuko/arizukod/store"
)

// fakeClock is a Clock whose time moves only by Advance. It serves one
// sleeper, the scheduler: a call to After replaces the channel of the one
// before (which Run no longer listens on), and signals sleeping, so a test
// knows the scheduler finished a check and waits.
type fakeClock struct {
	mu       sync.Mutex
	now      time.Time
	at       time.Time // when c fires
	c        chan time.Time
	sleeping chan struct{}
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{now: now, sleeping: make(chan struct{}, 16)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	f.at, f.c = f.now.Add(d), make(chan time.Time, 1)
	c := f.c
	f.mu.Unlock()
	f.sleeping <- struct{}{}
	return c
}

// Advance moves the time by d and reports whether that woke the sleeper.
func (f *fakeClock) Advance(d time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	if f.c == nil || f.now.Before(f.at) {
		return false
	}
	f.c <- f.now
	f.c = nil
	return true
}

const poll = time.Second

// harness runs a Scheduler over a real store on a fake clock.
type harness struct {
	t      *testing.T
	clk    *fakeClock
	st     *store.Store
	sched  *Scheduler
	wakes  atomic.Int32
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func openStore(t *testing.T, path string, clk *fakeClock) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path, store.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// start runs a Scheduler on st and waits for its first check.
func start(t *testing.T, clk *fakeClock, st Store, s *store.Store) *harness {
	t.Helper()
	h := &harness{t: t, clk: clk, st: s, done: make(chan error, 1)}
	h.sched = New(Config{Store: st, Clock: clk, Location: mustLoad(t, "Europe/Berlin"),
		Wake: func() { h.wakes.Add(1) }, Logger: testLogger(t), Poll: poll})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.sched.Run(ctx) }()
	t.Cleanup(h.stop)
	h.waitCheck()
	return h
}

// waitCheck waits until the scheduler finished a check and sleeps again.
func (h *harness) waitCheck() {
	h.t.Helper()
	select {
	case <-h.clk.sleeping:
	case <-time.After(10 * time.Second):
		h.t.Fatal("the scheduler did not check")
	}
}

// step advances the clock by d and waits for the check that wakes.
func (h *harness) step(d time.Duration) {
	h.t.Helper()
	if h.clk.Advance(d) {
		h.waitCheck()
	}
}

// steps advances the clock n times by d.
func (h *harness) steps(n int, d time.Duration) {
	h.t.Helper()
	for range n {
		h.step(d)
	}
}

// stop stops the scheduler; a second call does nothing.
func (h *harness) stop() {
	h.once.Do(func() {
		h.cancel()
		select {
		case err := <-h.done:
			if err != nil {
				h.t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			h.t.Fatal("Run did not return")
		}
	})
}

func (h *harness) task(id string) *store.Task {
	h.t.Helper()
	tk, err := h.st.GetTask(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return tk
}

// runs returns the runs of a task, oldest first.
func runsOf(t *testing.T, st *store.Store, id string) []store.Run {
	t.Helper()
	rs, err := st.ListRuns(context.Background(), store.RunFilter{TaskID: id})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return rs
}

func createTask(t *testing.T, st *store.Store, tk store.Task) {
	t.Helper()
	if tk.Folder == "" {
		tk.Folder = "main"
	}
	if tk.Prompt == "" {
		tk.Prompt = "report"
	}
	if _, err := st.CreateTask(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
}

// firstRun is NextRun for a task made at now, as the MCP tool computes it.
func firstRun(t *testing.T, kind store.ScheduleKind, expr string, now time.Time) int64 {
	t.Helper()
	next, err := NextRun(string(kind), expr, now, mustLoad(t, "Europe/Berlin"))
	if err != nil {
		t.Fatal(err)
	}
	return next
}

func ms(t time.Time) int64 { return t.UnixMilli() }

var t0 = time.Date(2024, 5, 1, 11, 59, 50, 0, time.FixedZone("CEST", 2*3600))

func TestFiresAtItsTime(t *testing.T) {
	clk := newFakeClock(t0)
	st := openStore(t, filepath.Join(t.TempDir(), "a.db"), clk)
	createTask(t, st, store.Task{ID: "t_noon", Folder: "main/team", Prompt: `say "hi"`, ScheduleKind: store.ScheduleCron,
		ScheduleExpr: "0 12 * * *", NextRunAt: firstRun(t, store.ScheduleCron, "0 12 * * *", t0)})
	h := start(t, clk, st, st)

	h.steps(9, time.Second)
	if rs := runsOf(t, st, "t_noon"); len(rs) != 0 || h.wakes.Load() != 0 {
		t.Fatalf("at %s: %d runs, %d wakes; want none before 12:00", clk.Now(), len(rs), h.wakes.Load())
	}
	h.step(time.Second)
	rs := runsOf(t, st, "t_noon")
	if len(rs) != 1 || h.wakes.Load() != 1 {
		t.Fatalf("at 12:00: %d runs, %d wakes; want 1, 1", len(rs), h.wakes.Load())
	}
	noon := t0.Add(10 * time.Second)
	r := rs[0]
	const input = `{"messages":[{"role":"user","content":"say \"hi\""}],"senderJid":"scheduler-isolated:t_noon","sessionId":""}`
	if r.Kind != store.KindTask || r.TaskID != "t_noon" || r.Folder != "main/team" || r.State != store.RunQueued ||
		r.CreatedAt != ms(noon) || string(r.Input) != input {
		t.Errorf("run = %+v, input %s", r, r.Input)
	}
	tk := h.task("t_noon")
	if tk.State != store.TaskActive || tk.LastRunAt != ms(noon) || tk.LastRunID != r.ID || tk.NextRunAt != ms(noon.AddDate(0, 0, 1)) {
		t.Errorf("task after firing: %+v", tk)
	}
	h.steps(30, time.Second)
	if rs := runsOf(t, st, "t_noon"); len(rs) != 1 {
		t.Errorf("%d runs after 12:00:30, want 1", len(rs))
	}
}

func TestIntervalFiresEachInterval(t *testing.T) {
	clk := newFakeClock(t0)
	st := openStore(t, filepath.Join(t.TempDir(), "a.db"), clk)
	createTask(t, st, store.Task{ID: "t_every", ScheduleKind: store.ScheduleInterval, ScheduleExpr: "10s",
		NextRunAt: firstRun(t, store.ScheduleInterval, "10s", t0)})
	h := start(t, clk, st, st)
	h.steps(35, time.Second)
	rs := runsOf(t, st, "t_every")
	var got []time.Duration
	for _, r := range rs {
		got = append(got, time.UnixMilli(r.CreatedAt).Sub(t0))
	}
	if len(got) != 3 || got[0] != 10*time.Second || got[1] != 20*time.Second || got[2] != 30*time.Second {
		t.Errorf("runs at %v after start, want [10s 20s 30s]", got)
	}
	if tk := h.task("t_every"); tk.NextRunAt != ms(t0.Add(40*time.Second)) {
		t.Errorf("next run at +%v, want +40s", time.UnixMilli(tk.NextRunAt).Sub(t0))
	}
}

func TestOnceFiresOnceAndCompletes(t *testing.T) {
	clk := newFakeClock(t0)
	st := openStore(t, filepath.Join(t.TempDir(), "a.db"), clk)
	at := t0.Add(5 * time.Second).Format(time.RFC3339)
	createTask(t, st, store.Task{ID: "t_once", ScheduleKind: store.ScheduleOnce, ScheduleExpr: at,
		NextRunAt: firstRun(t, store.ScheduleOnce, at, t0)})
	h := start(t, clk, st, st)
	h.steps(4, time.Second)
	if rs := runsOf(t, st, "t_once"); len(rs) != 0 {
		t.Fatalf("%d runs before its time", len(rs))
	}
	h.steps(20, time.Second)
	if rs := runsOf(t, st, "t_once"); len(rs) != 1 || rs[0].CreatedAt != ms(t0.Add(5*time.Second)) {
		t.Errorf("runs = %+v, want one at +5s", rs)
	}
	if tk := h.task("t_once"); tk.State != store.TaskCompleted || tk.NextRunAt != 0 {
		t.Errorf("task = %+v, want completed without a next run", tk)
	}
}

func TestPausedDoesNotFire(t *testing.T) {
	clk := newFakeClock(t0)
	st := openStore(t, filepath.Join(t.TempDir(), "a.db"), clk)
	createTask(t, st, store.Task{ID: "t_paused", ScheduleKind: store.ScheduleInterval, ScheduleExpr: "10s",
		State: store.TaskPaused, NextRunAt: ms(t0.Add(10 * time.Second))})
	h := start(t, clk, st, st)
	h.steps(60, time.Second)
	if rs := runsOf(t, st, "t_paused"); len(rs) != 0 {
		t.Fatalf("a paused task ran %d times", len(rs))
	}
	// Resumed, its due time long past, it fires once, at the next check,
	// and keeps its phase.
	active := store.TaskActive
	if _, err := st.UpdateTask(context.Background(), "t_paused", store.TaskPatch{State: &active}); err != nil {
		t.Fatal(err)
	}
	h.steps(1, time.Second)
	if rs := runsOf(t, st, "t_paused"); len(rs) != 1 || rs[0].CreatedAt != ms(t0.Add(61*time.Second)) {
		t.Errorf("after resume: runs %+v, want one at +61s", rs)
	}
	if tk := h.task("t_paused"); tk.NextRunAt != ms(t0.Add(70*time.Second)) {
		t.Errorf("next run at +%v, want +70s", time.UnixMilli(tk.NextRunAt).Sub(t0))
	}
}

// TestCatchUp: a daemon down for a day runs each task once when it starts,
// then follows the schedule from now.
func TestCatchUp(t *testing.T) {
	for _, tt := range []struct {
		name       string
		kind       store.ScheduleKind
		expr       string
		down       time.Duration
		wantNextAt time.Time
	}{
		{"hourly cron", store.ScheduleCron, "0 * * * *", 24*time.Hour + 20*time.Minute, time.Date(2024, 5, 2, 13, 0, 0, 0, t0.Location())},
		{"interval keeps its phase", store.ScheduleInterval, "1h", 5*time.Hour + 30*time.Minute, t0.Add(6 * time.Hour)},
		{"once fires late", store.ScheduleOnce, t0.Add(time.Minute).Format(time.RFC3339), 48 * time.Hour, time.Time{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock(t0)
			st := openStore(t, filepath.Join(t.TempDir(), "a.db"), clk)
			createTask(t, st, store.Task{ID: "t_late", ScheduleKind: tt.kind, ScheduleExpr: tt.expr,
				NextRunAt: firstRun(t, tt.kind, tt.expr, t0)})
			clk.Advance(tt.down)
			h := start(t, clk, st, st)
			h.steps(30, time.Second)
			rs := runsOf(t, st, "t_late")
			if len(rs) != 1 || rs[0].CreatedAt != ms(t0.Add(tt.down)) {
				t.Fatalf("%d runs, want 1 at start", len(rs))
			}
			tk := h.task("t_late")
			if tt.wantNextAt.IsZero() {
				if tk.State != store.TaskCompleted {
					t.Errorf("task %+v, want completed", tk)
				}
				return
			}
			if tk.NextRunAt != ms(tt.wantNextAt) {
				t.Errorf("next run at %s, want %s", time.UnixMilli(tk.NextRunAt).In(t0.Location()), tt.wantNextAt)
			}
			h.step(time.UnixMilli(tk.NextRunAt).Sub(clk.Now()))
			if rs := runsOf(t, st, "t_late"); len(rs) != 2 || rs[1].CreatedAt != ms(tt.wantNextAt) {
				t.Errorf("%d runs, want a second at %s", len(rs), tt.wantNextAt)
			}
		})
	}
}

// TestAcrossDST steps half-hourly through Berlin's DST changes: a daily task
// fires once a day, an hourly one once per real hour.
func TestAcrossDST(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	for _, tt := range []struct {
		name          string
		from          time.Time
		daily, hourly int
		dailyAt       []string
	}{
		{"spring forward", time.Date(2024, 3, 30, 12, 0, 0, 0, berlin), 2, 47,
			[]string{"2024-03-31T03:30:00+02:00", "2024-04-01T02:30:00+02:00"}},
		{"fall back", time.Date(2024, 10, 26, 12, 0, 0, 0, berlin), 2, 49,
			[]string{"2024-10-27T02:30:00+02:00", "2024-10-28T02:30:00+01:00"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock(tt.from)
			st := openStore(t, filepath.Join(t.TempDir(), "a.db"), clk)
			for id, expr := range map[string]string{"t_daily": "30 2 * * *", "t_hourly": "30 * * * *"} {
				createTask(t, st, store.Task{ID: id, ScheduleKind: store.ScheduleCron, ScheduleExpr: expr,
					NextRunAt: firstRun(t, store.ScheduleCron, expr, tt.from)})
			}
			h := start(t, clk, st, st)
			end := time.Date(tt.from.Year(), tt.from.Month(), tt.from.Day()+2, 12, 0, 0, 0, berlin)
			for clk.Now().Before(end) {
				h.step(30 * time.Minute)
			}
			daily, hourly := runsOf(t, st, "t_daily"), runsOf(t, st, "t_hourly")
			var at []string
			for _, r := range daily {
				at = append(at, time.UnixMilli(r.CreatedAt).In(berlin).Format(time.RFC3339))
			}
			if len(daily) != tt.daily || len(hourly) != tt.hourly || len(at) != 2 || at[0] != tt.dailyAt[0] || at[1] != tt.dailyAt[1] {
				t.Errorf("daily ran at %v, hourly %d times; want %v, %d", at, len(hourly), tt.dailyAt, tt.hourly)
			}
		})
	}
}

// TestUnreadableSchedule: a task stored with a schedule NextRun refuses
// fires a last time and completes, not blocking the other tasks.
func TestUnreadableSchedule(t *testing.T) {
	clk := newFakeClock(t0)
	st := openStore(t, filepath.Join(t.TempDir(), "a.db"), clk)
	createTask(t, st, store.Task{ID: "t_bad", ScheduleKind: store.ScheduleCron, ScheduleExpr: "0 0 9 * * *", NextRunAt: ms(t0.Add(time.Second))})
	createTask(t, st, store.Task{ID: "t_good", ScheduleKind: store.ScheduleInterval, ScheduleExpr: "10s", NextRunAt: ms(t0.Add(time.Second))})
	h := start(t, clk, st, st)
	h.steps(5, time.Second)
	if bad, good := runsOf(t, st, "t_bad"), runsOf(t, st, "t_good"); len(bad) != 1 || len(good) != 1 {
		t.Errorf("runs: bad %d, good %d; want 1, 1", len(bad), len(good))
	}
	if tk := h.task("t_bad"); tk.State != store.TaskCompleted {
		t.Errorf("bad task %+v, want completed", tk)
	}
}

// brokenRuns is a store whose claims fail after the task's run was built:
// the claim's transaction rolls back.
type brokenRuns struct{ *store.Store }

func (b brokenRuns) ClaimDueTasks(ctx context.Context, now int64, computeNext func(store.Task) (int64, bool),
	newRun func(store.Task) store.Run,
) ([]store.TaskClaim, error) {
	return b.Store.ClaimDueTasks(ctx, now, computeNext, func(t store.Task) store.Run {
		r := newRun(t)
		r.Input = []byte("{")
		return r
	})
}

// TestRestart: a daemon restarting (the store closed and opened again) never
// fires a claimed slot again.
func TestRestart(t *testing.T) {
	clk := newFakeClock(t0)
	path := filepath.Join(t.TempDir(), "a.db")
	st := openStore(t, path, clk)
	createTask(t, st, store.Task{ID: "t_claimed", ScheduleKind: store.ScheduleInterval, ScheduleExpr: "1h", NextRunAt: ms(t0.Add(time.Second))})
	h := start(t, clk, st, st)
	h.step(time.Second)
	h.stop()
	claimed := runsOf(t, st, "t_claimed")
	if len(claimed) != 1 {
		t.Fatalf("%d runs of t_claimed, want 1", len(claimed))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStore(t, path, clk)
	h = start(t, clk, st, st)
	h.steps(3, time.Second)
	if rs := runsOf(t, st, "t_claimed"); len(rs) != 1 || rs[0].ID != claimed[0].ID || h.wakes.Load() != 0 {
		t.Errorf("after restart: %d runs of t_claimed, %d wakes; want the one from before", len(rs), h.wakes.Load())
	}
	if tk := h.task("t_claimed"); tk.NextRunAt != ms(t0.Add(time.Second+time.Hour)) || tk.LastRunID != claimed[0].ID {
		t.Errorf("task after restart: %+v", tk)
	}
}

// TestFailedClaimLosesNothing: claims that fail (here: in the middle of the
// transaction) leave the task due; the next daemon fires it exactly once.
func TestFailedClaimLosesNothing(t *testing.T) {
	clk := newFakeClock(t0)
	path := filepath.Join(t.TempDir(), "a.db")
	st := openStore(t, path, clk)
	createTask(t, st, store.Task{ID: "t_due", ScheduleKind: store.ScheduleInterval, ScheduleExpr: "1h", NextRunAt: ms(t0.Add(time.Second))})
	h := start(t, clk, brokenRuns{st}, st)
	h.steps(5, time.Second)
	h.stop()
	if rs := runsOf(t, st, "t_due"); len(rs) != 0 || h.wakes.Load() != 0 {
		t.Fatalf("failed claims queued %d runs", len(rs))
	}
	if tk := h.task("t_due"); tk.NextRunAt != ms(t0.Add(time.Second)) || tk.LastRunAt != 0 {
		t.Fatalf("failed claims moved the task: %+v", tk)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStore(t, path, clk)
	h = start(t, clk, st, st)
	h.steps(5, time.Second)
	if rs := runsOf(t, st, "t_due"); len(rs) != 1 || rs[0].CreatedAt != ms(t0.Add(5*time.Second)) {
		t.Errorf("after restart: %d runs, want 1 at the restart", len(rs))
	}
}

func TestRunWithoutStore(t *testing.T) {
	if err := New(Config{}).Run(context.Background()); !errors.Is(err, ErrNoStore) {
		t.Errorf("Run = %v, want ErrNoStore", err)
	}
}

// TestRealClock fires an interval task with the system clock and a real store: its first
// slot, a moment ahead, on time, and the next slot set 10s after it. The other tests drive
// the scheduler with a fake clock.
func TestRealClock(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	due := time.Now().Add(300 * time.Millisecond)
	createTask(t, st, store.Task{ID: "t_real", ScheduleKind: store.ScheduleInterval, ScheduleExpr: "10s", NextRunAt: due.UnixMilli()})
	woke := make(chan time.Time, 4)
	s := New(Config{Store: st, Wake: func() { woke <- time.Now() }, Logger: testLogger(t), Poll: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	select {
	case at := <-woke:
		if at.Before(due) || at.Sub(due) > time.Second {
			t.Errorf("fired at %s, due %s", at.Format(time.StampMilli), due.Format(time.StampMilli))
		}
	case <-time.After(time.Until(due) + 5*time.Second):
		t.Fatalf("nothing by %s", time.Now().Format(time.StampMilli))
	}
	if rs := runsOf(t, st, "t_real"); len(rs) != 1 {
		t.Errorf("%d runs, want 1", len(rs))
	}
	tk, err := st.GetTask(context.Background(), "t_real")
	if err != nil {
		t.Fatal(err)
	}
	if next := time.UnixMilli(tk.NextRunAt); next.Sub(time.UnixMilli(due.UnixMilli())) != 10*time.Second {
		t.Errorf("next run at %s, want 10s after %s", next.Format(time.StampMilli), due.Format(time.StampMilli))
	}
}
