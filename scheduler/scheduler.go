package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/store"
)

// SenderPrefix starts the sender of every scheduled turn; the task id follows.
const SenderPrefix = "scheduler-isolated:"

// DefaultPoll is the Poll of a Config that sets none.
const DefaultPoll = time.Second

// ErrNoStore is Run's error for a Config without a Store.
var ErrNoStore = errors.New("scheduler: config: Store: nil")

// Store is what the scheduler needs of the store; *store.Store has it.
type Store interface {
	ClaimDueTasks(ctx context.Context, now int64,
		computeNext func(store.Task) (next int64, completed bool),
		newRun func(store.Task) store.Run,
	) ([]store.TaskClaim, error)
}

// Clock is the scheduler's time; tests give it a fake one.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// Config configures a Scheduler.
type Config struct {
	Store Store // required
	// Clock is where time comes from; nil is the system clock. The store
	// should stamp its rows from the same clock.
	Clock Clock
	// Location is the daemon's time zone, in which cron schedules are read;
	// nil is time.Local.
	Location *time.Location
	// Wake, when set, is called after runs were queued, to tell the daemon's
	// queue there is work. It must not block (queue.Queue.Wake does not).
	Wake func()
	// Logger gets a line per fired task and per failed check; nil is
	// slog.Default().
	Logger *slog.Logger
	// Poll is the longest the scheduler sleeps between two checks; 0 is
	// DefaultPoll. It polls, rather than sleeping until the next due time,
	// because tasks are created, updated and deleted behind its back (by the
	// MCP tools and the API, from other goroutines) and because the wall
	// clock may jump (suspend, NTP); a check is one short transaction over an
	// index, so a change takes effect within one Poll.
	Poll time.Duration
}

// Scheduler claims due tasks and queues their runs. Make it with New and
// start it with Run.
type Scheduler struct {
	store Store
	clock Clock
	loc   *time.Location
	wake  func()
	log   *slog.Logger
	poll  time.Duration
}

// New returns a Scheduler for cfg, filling in the defaults.
func New(cfg Config) *Scheduler {
	s := &Scheduler{
		store: cfg.Store, clock: cfg.Clock, loc: cfg.Location, wake: cfg.Wake,
		log: cfg.Logger, poll: cfg.Poll,
	}
	if s.clock == nil {
		s.clock = systemClock{}
	}
	if s.loc == nil {
		s.loc = time.Local
	}
	if s.wake == nil {
		s.wake = func() {}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.poll <= 0 {
		s.poll = DefaultPoll
	}
	return s
}

// Run checks for due tasks at once, then after every Poll,
// until ctx is done; then it returns nil. A failed check is logged and tried
// again at the next one: nothing is lost, since an unclaimed task stays due.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.store == nil {
		return ErrNoStore
	}
	for ctx.Err() == nil {
		s.check(ctx)
		select {
		case <-ctx.Done():
		case <-s.clock.After(s.poll):
		}
	}
	return nil
}

// check claims the tasks due now and queues their runs.
func (s *Scheduler) check(ctx context.Context) {
	now := s.clock.Now()
	claims, err := s.store.ClaimDueTasks(ctx, now.UnixMilli(),
		func(t store.Task) (int64, bool) { return s.following(t, now) }, newRun)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("scheduled tasks: claim", "err", err)
		}
		return
	}
	for _, c := range claims {
		attrs := []any{logging.FieldTaskID, c.Task.ID, logging.FieldFolder, c.Task.Folder, logging.FieldRunID, c.Run.ID}
		if c.Task.State == store.TaskCompleted {
			s.log.Info("scheduled task fired; completed", attrs...)
		} else {
			s.log.Info("scheduled task fired", append(attrs, "next", time.UnixMilli(c.Task.NextRunAt).In(s.loc).Format(time.RFC3339))...)
		}
	}
	if len(claims) > 0 {
		s.wake()
	}
}

// following returns a due task's next due time after now, counted from the
// slot that is due (its NextRunAt) and skipping the slots missed up to now,
// or completed for a once task. A task whose schedule cannot be read (it was
// stored around NextRun) or has no next time is completed: the store queues
// its run regardless, so it fires a last time.
func (s *Scheduler) following(t store.Task, now time.Time) (next int64, completed bool) {
	sc, err := parse(string(t.ScheduleKind), t.ScheduleExpr)
	if err != nil {
		s.log.Error("scheduled task: unreadable schedule; it fires a last time and completes",
			logging.FieldTaskID, t.ID, logging.FieldFolder, t.Folder, "err", err)
		return 0, true
	}
	slot, nowMS := t.NextRunAt, now.UnixMilli()
	switch sc.kind {
	case KindOnce:
		return 0, true
	case KindInterval:
		step := sc.every.Milliseconds()
		return slot + ((nowMS-slot)/step+1)*step, false
	}
	next, err = sc.next(time.UnixMilli(slot), s.loc)
	if err == nil && next <= nowMS {
		next, err = sc.next(now, s.loc)
	}
	if err != nil {
		s.log.Error("scheduled task: no next time; it completes",
			logging.FieldTaskID, t.ID, logging.FieldFolder, t.Folder, "err", err)
		return 0, true
	}
	return next, false
}

// taskInput is the input of a task's run, in the shape of the turn contract.
type taskInput struct {
	Messages  []contract.Message `json:"messages"`
	SenderJID string             `json:"senderJid"`
	SessionID string             `json:"sessionId"`
}

// newRun is the run a due task queues: its prompt as an isolated turn, with
// no session to continue.
func newRun(t store.Task) store.Run {
	// Marshaling strings cannot fail (invalid UTF-8 becomes U+FFFD).
	in, _ := json.Marshal(taskInput{
		Messages:  []contract.Message{{Role: "user", Content: t.Prompt}},
		SenderJID: SenderPrefix + t.ID,
	})
	return store.Run{Folder: t.Folder, Kind: store.KindTask, TaskID: t.ID, Input: in}
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
