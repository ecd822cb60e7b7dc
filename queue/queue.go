// Package queue runs the store's queued work on the runner: at most one running turn per
// folder, at most a global cap in all, each folder's runs in order. It turns pending inbox
// messages into runs, records how each run ended (with the inbox cursor and the session in
// the same transaction), retries fatal inbox runs with backoff and parks them after too many,
// waits while the engine is away, and on start adopts the runs a previous daemon left.
//
// It owns no state but the set of runs in flight; everything durable is in the store. It
// must not serve HTTP or build containers itself: the API calls it, it calls the runner.
package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// Store is what the queue needs of the store.
type Store interface {
	StartNext(ctx context.Context, globalCap int) (*store.Run, error)
	SetContainer(ctx context.Context, id, container string) error
	MarkInputSent(ctx context.Context, id string) error
	SetPhases(ctx context.Context, id string, p store.Phases) error
	RequeueRun(ctx context.Context, id string) error
	FinishRun(ctx context.Context, id string, o store.Outcome) (*store.Run, error)
	GetRun(ctx context.Context, id string) (*store.Run, error)
	ListRunning(ctx context.Context) ([]store.Run, error)
	CountRuns(ctx context.Context) (store.RunCounts, error)
	ListCursors(ctx context.Context) ([]store.Cursor, error)
	PendingFolders(ctx context.Context) ([]string, error)
	CreateInboxRun(ctx context.Context, folder string, limit int, build func([]store.InboxMessage) (store.Run, error)) (*store.Run, error)
	RecentFolders(ctx context.Context, limit int) ([]string, error)
}

// Runner runs and adopts turns.
type Runner interface {
	Run(ctx context.Context, t runner.Turn) (runner.Result, error)
	Adopt(ctx context.Context, t runner.Turn, container string, startedAt time.Time) (runner.Result, error)
	Steer(ctx context.Context, f groupfolder.Folder, containerID string, msgs []contract.Message) error
	RemoveLeftovers(ctx context.Context, keep func(engine.Container) bool) ([]string, error)
	RetryRemovals(ctx context.Context)
	Prepare(ctx context.Context, t runner.Turn) error
}

// Turns runs one turn from start to end: plan, directories, the services that live as
// long as its container, the container itself (turn.Builder.Run).
type Turns interface {
	Run(ctx context.Context, req turn.Request, r turn.Runner, w turn.Watch) (runner.Result, error)
	// Prepare has r make f's next container ahead (turn.Builder.Prepare).
	Prepare(ctx context.Context, f groupfolder.Folder, r turn.Preparer) error
}

// Config is the queue's wiring and policy.
type Config struct {
	Store  Store
	Runner Runner
	Turns  Turns
	// EngineUp reports whether the engine answers; while it does not, nothing starts.
	EngineUp func() bool
	// CheckEngine asks the engine now and updates what EngineUp says. The queue calls it
	// when a run failed for the engine: EngineUp may be seconds old. Nil uses EngineUp.
	CheckEngine func(ctx context.Context) bool
	// MaxRunning is the global cap (default 5).
	MaxRunning int
	// RetryMax and RetryBackoff govern fatal inbox runs: retries with doubling backoff,
	// then the folder is parked.
	RetryMax     int
	RetryBackoff time.Duration
	// InboxBatch bounds the messages of one inbox turn (default 50).
	InboxBatch int
	// Prepare, when positive, has each folder's next container made ahead after its turn
	// ends, and, once the engine first answers, for the Prepare folders that ran last.
	Prepare int
	Logger  *slog.Logger
	// OnChange is called when the counts of running or queued runs may have changed.
	OnChange func()
}

// Queue dispatches runs. Start it with Run; Wake it when work arrives.
type Queue struct {
	cfg  Config
	log  *slog.Logger
	wake chan struct{}

	mu       sync.Mutex
	inflight map[string]*flight
	orphans  map[string]string // run id -> container, waiting for the engine
	changed  chan struct{}     // closed and replaced when a run ends
	ended    map[string]*waiters
	detach   chan struct{}
	wg       sync.WaitGroup
	fence    *fence
}

type flight struct {
	cancel context.CancelFunc
	folder groupfolder.Folder
	// container is the engine's id once created, or the adopted container's name once its
	// turn's servers are back: what steering signals.
	container string
	// orphan is the container of a run the engine dropped: adopted when it is back.
	orphan string
	// killed is set by Kill: the run is ending and takes no more steering.
	killed bool
	// made leaves the fence: the run's container is made (nil when adopting).
	made func()
}

// New checks cfg and returns a Queue.
func New(cfg Config) (*Queue, error) {
	if cfg.Store == nil || cfg.Runner == nil || cfg.Turns == nil {
		return nil, errors.New("queue: store, runner and turns are required")
	}
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = 5
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 5
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 10 * time.Second
	}
	if cfg.InboxBatch <= 0 {
		cfg.InboxBatch = 50
	}
	if cfg.EngineUp == nil {
		cfg.EngineUp = func() bool { return true }
	}
	if cfg.CheckEngine == nil {
		cfg.CheckEngine = func(context.Context) bool { return cfg.EngineUp() }
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func() {}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Queue{cfg: cfg, log: log, wake: make(chan struct{}, 1), inflight: map[string]*flight{}, orphans: map[string]string{}, ended: map[string]*waiters{}, changed: make(chan struct{}), detach: make(chan struct{}), fence: newFence()}, nil
}

// Wake tells the queue that work may be waiting. It never blocks.
func (q *Queue) Wake() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Run dispatches until ctx ends. Then it detaches from the running turns, leaving their
// containers to finish under the engine, and returns once every turn goroutine is gone.
func (q *Queue) Run(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	reconciled := false
	for {
		if !reconciled && q.cfg.EngineUp() {
			if err := q.reconcile(ctx); err != nil {
				q.log.Error("reconciling with the engine", "err", err)
			} else {
				reconciled = true
				q.prepareRecent(ctx)
			}
		}
		if reconciled {
			q.dispatch(ctx)
		}
		select {
		case <-ctx.Done():
			close(q.detach)
			q.wg.Wait()
			return nil
		case <-q.wake:
		case <-tick.C:
		}
	}
}

// Kill stops a running run; it reports whether the run was in flight here. One that is not
// yet (its start is on its way, or it waits to be adopted) stops as it starts: it sees the
// kill the store recorded.
func (q *Queue) Kill(id string) bool {
	q.mu.Lock()
	fl := q.inflight[id]
	if fl != nil {
		fl.killed = true
	}
	q.mu.Unlock()
	if fl == nil {
		return false
	}
	fl.cancel()
	return true
}

// ErrNotRunning says a run is not in flight here with a running container (queued, not
// started yet, being killed, or ended), so it cannot be steered.
var ErrNotRunning = errors.New("run is not running")

// Steer delivers messages to a running run. A run that is not running, or stops being
// while the messages are delivered, is ErrNotRunning: the state machine's answer, never
// an engine error.
func (q *Queue) Steer(ctx context.Context, id string, msgs []contract.Message) error {
	q.mu.Lock()
	fl := q.inflight[id]
	var folder groupfolder.Folder
	var container string
	if fl != nil && !fl.killed {
		folder, container = fl.folder, fl.container
	}
	q.mu.Unlock()
	if container == "" {
		return ErrNotRunning
	}
	err := q.cfg.Runner.Steer(ctx, folder, container, msgs)
	if errors.Is(err, engine.ErrNoSuchContainer) || errors.Is(err, runner.ErrNotRunning) {
		// The run ended (or was killed) between the lookup and the signal.
		return fmt.Errorf("%w: %v", ErrNotRunning, err)
	}
	return err
}

// Changed returns a channel that is closed when the next run ends, so a caller can wait
// for a run without polling: take the channel, check the run, then wait on it.
func (q *Queue) Changed() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.changed
}

// waiters are the callers waiting for one run's turn to end.
type waiters struct {
	ch chan struct{} // closed when the turn ends
	n  int           // callers holding ch
}

// Ended returns a channel that is closed when run id's turn here ends (whatever its
// outcome: done, failed, requeued, detached), so a long poll wakes for its own run only:
// take the channel, check the run, then wait on it. release gives the channel back once
// the caller stops waiting; a run nobody waits for costs nothing.
func (q *Queue) Ended(id string) (ended <-chan struct{}, release func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.ended[id]
	if w == nil {
		w = &waiters{ch: make(chan struct{})}
		q.ended[id] = w
	}
	w.n++
	return w.ch, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if w.n--; w.n == 0 && q.ended[id] == w {
			delete(q.ended, id)
		}
	}
}

// Waiting is the number of runs someone waits for with Ended: for tests that a wait
// leaves nothing behind.
func (q *Queue) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ended)
}

// Running is the number of runs in flight here.
func (q *Queue) Running() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.inflight)
}
