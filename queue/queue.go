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
	"encoding/json"
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
	RequeueRun(ctx context.Context, id string) error
	FinishRun(ctx context.Context, id string, o store.Outcome) (*store.Run, error)
	GetRun(ctx context.Context, id string) (*store.Run, error)
	ListRunning(ctx context.Context) ([]store.Run, error)
	CountRuns(ctx context.Context) (store.RunCounts, error)
	ListCursors(ctx context.Context) ([]store.Cursor, error)
	PendingFolders(ctx context.Context) ([]string, error)
	CreateInboxRun(ctx context.Context, folder string, limit int, build func([]store.InboxMessage) (store.Run, error)) (*store.Run, error)
	AppendLog(ctx context.Context, runID string, level store.LogLevel, message string) error
}

// Runner runs and adopts turns.
type Runner interface {
	Run(ctx context.Context, t runner.Turn) (runner.Result, error)
	Adopt(ctx context.Context, t runner.Turn, container string, startedAt time.Time) (runner.Result, error)
	Steer(ctx context.Context, f groupfolder.Folder, containerID string, msgs []contract.Message) error
	RemoveLeftovers(ctx context.Context, keep func(engine.Container) bool) ([]string, error)
	RetryRemovals(ctx context.Context)
}

// Builder builds a run's turn.
type Builder interface {
	Build(ctx context.Context, req turn.Request) (runner.Turn, error)
}

// Hooks lets the daemon wrap each turn, for the per-turn MCP server, model gateway and
// sidecars: Before runs before the container starts, may add to the turn's environment
// what the agent needs to reach them, and returns what to do after it exits.
type Hooks interface {
	Before(ctx context.Context, run *store.Run, f groupfolder.Folder, t *runner.Turn) (after func(), err error)
}

// Config is the queue's wiring and policy.
type Config struct {
	Store   Store
	Runner  Runner
	Builder Builder
	Hooks   Hooks // optional
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
	Logger     *slog.Logger
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
	detach   chan struct{}
	wg       sync.WaitGroup
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
}

// New checks cfg and returns a Queue.
func New(cfg Config) (*Queue, error) {
	if cfg.Store == nil || cfg.Runner == nil || cfg.Builder == nil {
		return nil, errors.New("queue: store, runner and builder are required")
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
	return &Queue{cfg: cfg, log: log, wake: make(chan struct{}, 1), inflight: map[string]*flight{}, orphans: map[string]string{}, changed: make(chan struct{}), detach: make(chan struct{})}, nil
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

// dispatch makes inbox runs and starts what the store lets start.
func (q *Queue) dispatch(ctx context.Context) {
	if !q.cfg.EngineUp() {
		return
	}
	q.adoptOrphans(ctx)
	q.cfg.Runner.RetryRemovals(ctx)
	q.makeInboxRuns(ctx)
	for ctx.Err() == nil {
		run, err := q.cfg.Store.StartNext(ctx, q.cfg.MaxRunning)
		if err != nil {
			q.log.Error("start next run", "err", err)
			return
		}
		if run == nil {
			return
		}
		q.cfg.OnChange()
		q.start(ctx, run, "")
	}
}

// adoptOrphans adopts the containers of the runs the engine dropped while it was away.
func (q *Queue) adoptOrphans(ctx context.Context) {
	q.mu.Lock()
	orphans := q.orphans
	q.orphans = map[string]string{}
	q.mu.Unlock()
	for id, container := range orphans {
		run, err := q.cfg.Store.GetRun(ctx, id)
		if err != nil {
			q.log.Error("adopt after the engine came back", "ARIZUKO_RUN_ID", id, "err", err)
			continue
		}
		q.log.Info("adopting run after the engine came back", "ARIZUKO_RUN_ID", id, "ARIZUKO_FOLDER", run.Folder, "ARIZUKO_CONTAINER", container)
		q.start(ctx, run, container)
	}
}

// inboxInput is the input JSON of runs made from a group's inbox.
func (q *Queue) makeInboxRuns(ctx context.Context) {
	folders, err := q.cfg.Store.PendingFolders(ctx)
	if err != nil {
		q.log.Error("pending inbox folders", "err", err)
		return
	}
	for _, f := range folders {
		run, err := q.cfg.Store.CreateInboxRun(ctx, f, q.cfg.InboxBatch, func(pending []store.InboxMessage) (store.Run, error) {
			b, err := json.Marshal(inboxInput(pending))
			return store.Run{Folder: f, Input: b}, err
		})
		if err != nil {
			q.log.Error("make inbox run", "ARIZUKO_FOLDER", f, "err", err)
			continue
		}
		if run != nil {
			q.log.Info("inbox run queued", "ARIZUKO_RUN_ID", run.ID, "ARIZUKO_FOLDER", f, "messages", run.InboxLast-run.InboxFirst+1)
		}
	}
}

// inboxInput is the input of a turn over pending inbox messages: each message with its
// sender, chat and time; the last sender's memory; the last chat as the one it answers.
func inboxInput(pending []store.InboxMessage) RunInput {
	in := RunInput{}
	for _, m := range pending {
		role := m.Role
		if role == "" {
			role = "user"
		}
		in.Messages = append(in.Messages, contract.Message{Role: role, Content: m.Content,
			SenderJID: m.SenderJID, ChatJID: m.ChatJID, Time: time.UnixMilli(m.CreatedAt).UTC().Format(time.RFC3339Nano)})
		if m.SenderJID != "" {
			in.SenderJID = m.SenderJID
		}
	}
	in.ChatJID = contract.ReplyChat(in.Messages)
	return in
}

// RunInput is the input JSON a run carries in the store.
type RunInput struct {
	Messages  []contract.Message `json:"messages"`
	SessionID string             `json:"sessionId,omitempty"`
	SenderJID string             `json:"senderJid,omitempty"`
	// ChatJID is the chat the turn answers; empty: the last message's that has one.
	ChatJID string `json:"chatJid,omitempty"`
}

// start runs one run in its own goroutine; container is set when adopting.
func (q *Queue) start(ctx context.Context, run *store.Run, container string) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := groupfolder.Folder(run.Folder)
	q.mu.Lock()
	q.inflight[run.ID] = &flight{cancel: cancel, folder: f}
	q.mu.Unlock()
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		defer cancel()
		q.execute(rctx, run, container)
		q.mu.Lock()
		if fl := q.inflight[run.ID]; fl != nil && fl.orphan != "" {
			q.orphans[run.ID] = fl.orphan
		}
		delete(q.inflight, run.ID)
		close(q.changed)
		q.changed = make(chan struct{})
		q.mu.Unlock()
		q.cfg.OnChange()
		q.Wake()
	}()
}

func (q *Queue) execute(ctx context.Context, run *store.Run, adoptContainer string) {
	log := q.log.With("ARIZUKO_RUN_ID", run.ID, "ARIZUKO_FOLDER", run.Folder)
	f, err := groupfolder.Parse(run.Folder)
	if err != nil {
		q.finish(ctx, run, runner.Result{Failure: runner.FailMisconfig, Terminal: true,
			Output: contract.Output{Status: contract.StatusFatal, Error: err.Error()}}, log)
		return
	}
	// A kill that came before the run was in flight here (against the previous daemon, or
	// between the store's start and this one) found nothing to cancel: the store has it.
	if now, err := q.cfg.Store.GetRun(ctx, run.ID); err == nil && now.KillRequestedAt != 0 {
		q.Kill(run.ID)
	}
	if ctx.Err() != nil {
		q.finish(ctx, run, q.killedBeforeStart(ctx, run, f, adoptContainer), log)
		return
	}
	var in RunInput
	if len(run.Input) > 0 {
		if err := json.Unmarshal(run.Input, &in); err != nil {
			q.finish(ctx, run, misconfig("stored input: %v", err), log)
			return
		}
	}
	t, err := q.cfg.Builder.Build(ctx, turn.Request{
		RunID: run.ID, Folder: f, TaskID: run.TaskID, Messages: in.Messages,
		SessionID: in.SessionID, SenderJID: in.SenderJID, ChatJID: in.ChatJID,
		Timeout: time.Duration(run.TimeoutMS) * time.Millisecond, Isolated: run.Kind == store.KindTask,
	})
	if err != nil {
		q.finish(ctx, run, killedOr(ctx, misconfig("prepare turn: %v", err)), log)
		return
	}
	if q.cfg.Hooks != nil {
		after, err := q.cfg.Hooks.Before(ctx, run, f, &t)
		if err != nil {
			q.finish(ctx, run, killedOr(ctx, misconfig("prepare turn: %v", err)), log)
			return
		}
		defer after()
	}
	t.Detach = q.detach
	// The container's name: the runner's (set before any stderr line), or the adopted one,
	// which takes steering only now that its MCP server, sidecars and gateways are back.
	container := adoptContainer
	if adoptContainer != "" {
		q.mu.Lock()
		if fl := q.inflight[run.ID]; fl != nil {
			fl.container = adoptContainer
		}
		q.mu.Unlock()
		log.Info("turn adopted: its servers are back and it takes steering", "ARIZUKO_CONTAINER", adoptContainer)
	}
	t.OnCreated = func(name, id string) {
		container = name
		q.mu.Lock()
		if fl := q.inflight[run.ID]; fl != nil {
			fl.container = id
		}
		q.mu.Unlock()
		if err := q.cfg.Store.SetContainer(context.WithoutCancel(ctx), run.ID, name); err != nil {
			log.Error("record container", "container", name, "err", err)
		}
		log.Info("turn started", "ARIZUKO_CONTAINER", name)
	}
	t.OnStderr = func(line string) {
		log.Info(line, "ARIZUKO_STREAM", "stderr", "ARIZUKO_CONTAINER", container)
	}
	// What a later adoption needs to tell an agent that never got its input from one that
	// may have acted on it.
	t.InputSent = run.InputSentAt != 0
	t.OnInput = func() {
		if err := q.cfg.Store.MarkInputSent(context.WithoutCancel(ctx), run.ID); err != nil {
			log.Error("record input sent", "err", err)
		}
	}
	var res runner.Result
	if adoptContainer != "" {
		res, err = q.cfg.Runner.Adopt(ctx, t, adoptContainer, time.UnixMilli(run.StartedAt))
	} else {
		res, err = q.cfg.Runner.Run(ctx, t)
	}
	if err != nil {
		q.finish(ctx, run, killedOr(ctx, misconfig("run: %v", err)), log)
		return
	}
	if res.Failure == runner.FailDetached {
		log.Info("turn detached: the daemon is stopping; the next start adopts it", "ARIZUKO_CONTAINER", res.Container)
		return
	}
	if res.Failure == runner.FailNoInput && run.Attempt <= q.cfg.RetryMax {
		// Nothing the agent did depended on the turn: run it again from the start, in a
		// new container. A kill requested meanwhile refuses the requeue and ends it below.
		if err := q.cfg.Store.RequeueRun(context.WithoutCancel(ctx), run.ID); err == nil {
			log.Warn("the turn's input never reached the agent: run requeued", "attempt", run.Attempt, "ARIZUKO_CONTAINER", res.Container, "err", res.Output.Error)
			return
		}
	}
	if res.Failure == runner.FailEngine && container == "" && ctx.Err() != nil {
		res = killedOr(ctx, res)
	}
	if res.Failure == runner.FailEngine {
		up := q.cfg.CheckEngine(context.WithoutCancel(ctx))
		switch {
		case container != "" && !up:
			// The container exists and may well run on: the run stays running, and its
			// container is adopted once the engine answers again.
			q.mu.Lock()
			if fl := q.inflight[run.ID]; fl != nil {
				fl.orphan = container
			}
			q.mu.Unlock()
			log.Warn("engine unavailable: the run's container is adopted when it is back", "ARIZUKO_CONTAINER", container, "err", res.Output.Error)
			return
		case container == "" && (!up || run.Attempt <= q.cfg.RetryMax):
			// No container was made, so nothing ran: put the run back. The engine may
			// already be back by now (it failed while the engine was away), and while it
			// stays away the queue starts nothing; a failure that repeats with the engine
			// up ends the run after RetryMax attempts.
			if err := q.cfg.Store.RequeueRun(context.WithoutCancel(ctx), run.ID); err == nil {
				log.Warn("engine unavailable: run requeued", "attempt", run.Attempt, "err", res.Output.Error)
				return
			}
		}
	}
	q.finish(ctx, run, res, log)
}

// killedBeforeStart ends a run killed before it was in flight here without preparing it:
// a new one never gets a container; an adopted container is stopped, collected and removed.
func (q *Queue) killedBeforeStart(ctx context.Context, run *store.Run, f groupfolder.Folder, adoptContainer string) runner.Result {
	killed := killedOr(ctx, runner.Result{})
	if adoptContainer == "" {
		return killed
	}
	res, err := q.cfg.Runner.Adopt(ctx, runner.Turn{RunID: run.ID, Folder: f}, adoptContainer, time.UnixMilli(run.StartedAt))
	if err != nil || res.Failure == runner.FailNoInput {
		return killed
	}
	return res
}

// killedOr is res, unless the run was killed (ctx is cancelled only by Kill): a failure
// while the turn was being prepared is then the kill's doing, and the run ends killed.
func killedOr(ctx context.Context, res runner.Result) runner.Result {
	if ctx.Err() == nil {
		return res
	}
	return runner.Result{Failure: runner.FailKilled,
		Output: contract.Output{Status: contract.StatusFatal, Error: "run killed on request before its container started"}}
}

func misconfig(format string, args ...any) runner.Result {
	return runner.Result{Failure: runner.FailMisconfig, Terminal: true,
		Output: contract.Output{Status: contract.StatusFatal, Error: fmt.Sprintf(format, args...)}}
}

// finish records the end of a run with its cursor and session, and logs it.
func (q *Queue) finish(ctx context.Context, run *store.Run, res runner.Result, log *slog.Logger) {
	ctx = context.WithoutCancel(ctx)
	o := outcome(run, res, q.cfg.RetryMax, q.retryBackoff(run.Attempt))
	var code *int
	if res.Container != "" && res.Failure != runner.FailLost && res.Failure != runner.FailEngine {
		c := res.ExitCode
		code = &c
	}
	o.ExitCode = code
	final, err := q.cfg.Store.FinishRun(ctx, run.ID, o)
	if err != nil {
		log.Error("record run end", "err", err)
		return
	}
	attrs := []any{
		"ARIZUKO_CONTAINER", res.Container,
		"ARIZUKO_STATUS", string(o.Status),
		"ARIZUKO_STATE", string(final.State),
		"ARIZUKO_EXIT_CODE", res.ExitCode,
		"ARIZUKO_DURATION_MS", res.Duration.Milliseconds(),
	}
	if o.Failure != "" {
		attrs = append(attrs, "ARIZUKO_FAILURE", string(o.Failure))
	}
	if o.Error != "" {
		attrs = append(attrs, "ARIZUKO_ERROR", o.Error)
	}
	if u := final.Usage; u.Requests > 0 || u.Refused != "" {
		attrs = append(attrs, "ARIZUKO_MODEL", u.Model, "ARIZUKO_MODEL_REQUESTS", u.Requests,
			"ARIZUKO_INPUT_TOKENS", u.InputTokens, "ARIZUKO_OUTPUT_TOKENS", u.OutputTokens,
			"ARIZUKO_CACHE_READ_TOKENS", u.CacheReadTokens, "ARIZUKO_CACHE_WRITE_TOKENS", u.CacheWriteTokens)
		if u.Refused != "" {
			attrs = append(attrs, "ARIZUKO_MODEL_REFUSED", u.Refused)
		}
	}
	if o.Status == store.StatusOK {
		log.Info("turn finished", attrs...)
	} else {
		log.Warn("turn failed", attrs...)
	}
}

func (q *Queue) retryBackoff(attempt int) time.Duration {
	d := q.cfg.RetryBackoff
	for i := 1; i < attempt && d < time.Hour; i++ {
		d *= 2
	}
	return min(d, time.Hour)
}

// outcome maps a runner Result to what the store records, with the cursor rule of seed
// 000: ok and error advance the cursor, fatal rolls it back for a retry with backoff,
// misconfiguration parks the folder (a retry would not help), a kill counts as handled.
func outcome(run *store.Run, res runner.Result, retryMax int, backoff time.Duration) store.Outcome {
	o := store.Outcome{
		Status:       store.Status(res.Output.Status),
		Failure:      storeFailure(res.Failure),
		Terminal:     res.Terminal,
		Error:        res.Output.Error,
		Result:       res.Output.Result,
		NewSessionID: res.Output.NewSessionID,
		SaveSession:  run.Kind != store.KindTask && res.Output.Status != contract.StatusFatal,
	}
	switch {
	case res.Failure == runner.FailKilled:
		o.State = store.RunKilled
	case res.Failure != runner.FailNone && res.Failure != runner.FailTimeout || res.Output.Status == contract.StatusFatal:
		o.State = store.RunError
	default:
		o.State = store.RunExited
	}
	if o.Status == "" {
		o.Status = store.StatusFatal
	}
	if run.InboxFirst == 0 {
		return o
	}
	switch {
	case res.Failure == runner.FailKilled, o.Status == store.StatusOK, o.Status == store.StatusError:
		o.Cursor = store.CursorUpdate{Op: store.CursorAdvance}
	case res.Terminal:
		o.Cursor = store.CursorUpdate{Op: store.CursorPark, Reason: o.Error}
	default:
		o.Cursor = store.CursorUpdate{Op: store.CursorRetry, Reason: o.Error, Backoff: backoff, MaxRetries: retryMax}
	}
	return o
}

func storeFailure(f runner.Failure) store.Failure {
	switch f {
	case runner.FailNone:
		return store.FailureNone
	case runner.FailTimeout:
		return store.FailureTimeout
	case runner.FailOOM:
		return store.FailureOOM
	case runner.FailMisconfig:
		return store.FailureMisconfig
	case runner.FailKilled:
		return store.FailureKilled
	case runner.FailLost:
		return store.FailureLost
	case runner.FailNoOutput, runner.FailBadOutput, runner.FailNoInput:
		return store.Failure(f)
	}
	return store.FailureEngine
}

// reconcile runs once the engine first answers. The runs the store says are running were
// detached from or orphaned by a previous daemon: each is adopted by its container (still
// running or exited) or recorded as lost. Every other container of this instance is a
// leftover and is removed.
func (q *Queue) reconcile(ctx context.Context) error {
	runs, err := q.cfg.Store.ListRunning(ctx)
	if err != nil {
		return err
	}
	adopt := map[string]bool{}
	for _, r := range runs {
		if r.Container != "" {
			adopt[r.Container] = true
		}
	}
	removed, err := q.cfg.Runner.RemoveLeftovers(ctx, func(c engine.Container) bool { return adopt[c.Name] })
	if err != nil {
		return err
	}
	if len(removed) > 0 {
		q.log.Info("removed leftover containers", "count", len(removed))
	}
	for i := range runs {
		run := &runs[i]
		if run.Container == "" && run.KillRequestedAt != 0 {
			// Killed before its container was made: it ends killed as it starts (a
			// requeue would refuse it, and reconciling would never finish).
			q.start(ctx, run, "")
			continue
		}
		if run.Container == "" {
			// It died before its container was made: run it again from the start.
			if err := q.cfg.Store.RequeueRun(ctx, run.ID); err != nil {
				return err
			}
			q.log.Info("run requeued: the previous daemon stopped before its container existed", "ARIZUKO_RUN_ID", run.ID, "ARIZUKO_FOLDER", run.Folder)
			continue
		}
		q.log.Info("adopting run", "ARIZUKO_RUN_ID", run.ID, "ARIZUKO_FOLDER", run.Folder, "ARIZUKO_CONTAINER", run.Container)
		q.start(ctx, run, run.Container)
	}
	return nil
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

// Running is the number of runs in flight here.
func (q *Queue) Running() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.inflight)
}
