package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/runtime/engine"
)

const (
	// settleWait is how long a turn waits for its folder's warm agent being made (Claude
	// Code gets ready in about 1 to 3 s) before it runs a fresh container instead.
	settleWait = 10 * time.Second
	// softGap is how long before the hard deadline the agent is told to wrap up.
	softGap       = 30 * time.Second
	maxStderrKept = 64 << 10
	logMaxBytes   = 16 << 20
)

// Config is what a Runner needs for every turn.
type Config struct {
	Engine engine.Engine
	// Info describes the engine; InfoFunc, when set, is asked instead at every turn, for a
	// daemon that learns the engine only once it answers.
	Info     engine.Info
	InfoFunc func() engine.Info
	Layout   groupfolder.Layout
	Instance string // the value of engine.LabelInstance on every container
	Image    string
	// Timeout is a turn's run timeout unless the turn has its own; required.
	Timeout time.Duration
	// StopGrace is how long a container gets between SIGTERM and SIGKILL; required.
	StopGrace time.Duration
	// SkillsDir is mounted read-only at /skills when set.
	SkillsDir string
	// WebDir is mounted read-only at /workspace/web when set.
	WebDir  string
	Rlimits []engine.Rlimit
	// Networks are the named networks a turn may join (limits.allowed_networks).
	Networks []string
	// Runtimes are the OCI runtimes a turn may name besides the engine's default
	// (limits.allowed_runtimes).
	Runtimes []string
	// AllowUnlimited runs turns where the engine cannot apply the memory, CPU and pids
	// limits (limits.allow_unlimited); otherwise they fail as a terminal misconfiguration.
	AllowUnlimited bool
	// Redact removes secret values from text before it is logged; nil logs text as is.
	Redact func(string) string
	// Prepared is how many folders may have a container prepared ahead at once
	// (engine.Preparer engines only); 0 prepares none.
	Prepared int
	// WarmAgents is how many of them may be warm agents (started, waiting for their turn:
	// warm.go), the most recently prepared; 0 starts none.
	WarmAgents int
	// WarmMinAvailable: below this MemAvailable (bytes) no agent is warmed and the warm ones
	// are removed; 0 does not look.
	WarmMinAvailable int64
	// MemAvailable, when set, is asked instead of /proc/meminfo (tests).
	MemAvailable func() (int64, error)
	Logger       *slog.Logger
}

// Runner runs turns. It is safe for concurrent use.
type Runner struct {
	cfg Config
	log *slog.Logger
	// removals are the removals still running after their turn's result.
	removals sync.WaitGroup
	// unremoved holds the containers (ID to name) whose removal failed, typically because
	// the engine went away just then; RetryRemovals tries them again.
	mu        sync.Mutex
	unremoved map[string]string
	pool      pool
	// lastStamp is the newest millisecond handed out by stamp.
	lastStamp atomic.Int64
}

// stamp is the millisecond that names a container and its run log: now, or the one after
// the last it gave when that is not older. A turn and the container prepared for the
// folder's next turn, or two turns, that begin in the same millisecond would otherwise get
// the same name, and the engine refuses the second.
func (r *Runner) stamp(now time.Time) time.Time {
	for {
		last := r.lastStamp.Load()
		ms := max(now.UnixMilli(), last+1)
		if r.lastStamp.CompareAndSwap(last, ms) {
			return time.UnixMilli(ms)
		}
	}
}

// New checks cfg and returns a Runner.
func New(cfg Config) (*Runner, error) {
	if cfg.Engine == nil {
		return nil, errors.New("runner: no engine")
	}
	if cfg.Image == "" {
		return nil, errors.New("runner: no image")
	}
	if cfg.Instance == "" {
		return nil, errors.New("runner: no instance label")
	}
	if cfg.Timeout <= 0 {
		return nil, errors.New("runner: no run timeout")
	}
	if cfg.StopGrace <= 0 {
		return nil, errors.New("runner: no stop grace")
	}
	if cfg.Rlimits == nil {
		cfg.Rlimits = engine.DefaultRlimits()
	}
	if cfg.Redact == nil {
		cfg.Redact = func(s string) string { return s }
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Runner{cfg: cfg, log: log, pool: pool{max: cfg.Prepared}}, nil
}

func (r *Runner) info() engine.Info {
	if r.cfg.InfoFunc != nil {
		return r.cfg.InfoFunc()
	}
	return r.cfg.Info
}

// Run runs one turn to its end. Cancelling ctx kills the container; the Result then says
// FailKilled. The returned error is non-nil only when the turn could not be attempted at
// all (bad input, directories that cannot be made); everything that happens to the
// container is in the Result.
func (r *Runner) Run(ctx context.Context, t Turn) (Result, error) {
	start := time.Now()
	res := Result{RunID: t.RunID}
	timeout := r.timeout(t)
	dirs, err := r.cfg.Layout.Ensure(t.Folder, os.Getuid(), os.Getgid())
	if err != nil {
		return res, fmt.Errorf("prepare %s: %w", t.Folder, err)
	}
	if err := r.clearInput(t.Folder); err != nil {
		return res, fmt.Errorf("prepare %s: %w", t.Folder, err)
	}
	t.Input.Folder = string(t.Folder)
	t.Input.RunID = t.RunID
	stdin, err := contract.EncodeInput(t.Input)
	if err != nil {
		return res, err
	}
	mounts, err := r.Mounts(t.Folder, dirs, t.ProjectMounts, t.ExtraMounts)
	if err != nil {
		return res, err
	}
	stamp := r.stamp(start)
	spec := r.spec(t, ContainerName(t.Folder, t.TaskID, stamp), mounts, timeout)
	res.Container = spec.Name
	tr := &turnRun{r: r, t: t, log: r.turnLog(t), res: &res, dirs: dirs, started: start, stamp: stamp}
	if err := r.admit(&spec); err != nil {
		tr.fail(FailMisconfig, true, "%v", err)
	} else if p := r.takeFor(ctx, t, spec); p != nil {
		res.Container = p.name
		tr.id = p.id
		spec.Name = p.name
		if p.warm != nil {
			tr.note("warm agent %s, ready %s before", p.id[:min(12, len(p.id))], start.Sub(p.made).Round(time.Millisecond))
			tr.runWarm(ctx, spec, p.warm, stdin, timeout)
		} else {
			tr.note("prepared %s, made %s before", p.id[:min(12, len(p.id))], start.Sub(p.made).Round(time.Millisecond))
			tr.runCreated(ctx, spec, stdin, timeout)
		}
	} else {
		tr.run(ctx, spec, stdin, timeout)
	}
	res.Duration = time.Since(start)
	if res.Failure != FailDetached {
		tr.writeLog()
		switch {
		case tr.id == "":
		case res.Failure == FailNone:
			// The answer does not depend on the removal: take it off the critical path.
			r.removals.Add(1)
			go func() { defer r.removals.Done(); tr.remove(ctx) }()
		default:
			// A failed, killed or timed-out turn is gone when its result is.
			tr.remove(ctx)
		}
	}
	return res, nil
}

// takeFor is the container prepared for t's folder when one matches spec (a warm agent
// also t's prepare line and WarmKey): none for a task's turn (its container has a name of
// its own).
func (r *Runner) takeFor(ctx context.Context, t Turn, spec engine.Spec) *prepared {
	if t.TaskID != "" {
		return nil
	}
	if _, ok := r.preparer(); !ok {
		return nil
	}
	key, wkey, err := turnKeys(t, spec)
	if err != nil {
		return nil
	}
	return r.take(ctx, t.Folder, key, wkey, t.Warm)
}

// turnKeys are the keys a prepared container of t must have: its spec's, and a warm
// agent's.
func turnKeys(t Turn, spec engine.Spec) (key, wkey string, err error) {
	if key, err = specKey(spec); err != nil {
		return "", "", err
	}
	line, err := prepareLine(t)
	if err != nil {
		return "", "", err
	}
	return key, warmKey(key, line, t.WarmKey), nil
}

// Settle is called by a turn before it starts anything its agent could reach (its
// services), and done once it is over: until then no warm agent of its folder is made.
// It waits for one being made, and removes the folder's warm agent (waiting for the
// removal) unless t, as the turn will run it (with the services' environment), would
// use it (warmFits): a warm agent the turn does not use never reaches the turn's services.
func (r *Runner) Settle(ctx context.Context, t Turn) (done func()) {
	r.pool.mu.Lock()
	if r.pool.busy == nil {
		r.pool.busy = map[groupfolder.Folder]int{}
	}
	r.pool.busy[t.Folder]++
	making := r.pool.making[t.Folder]
	r.pool.mu.Unlock()
	done = sync.OnceFunc(func() {
		r.pool.mu.Lock()
		if r.pool.busy[t.Folder]--; r.pool.busy[t.Folder] <= 0 {
			delete(r.pool.busy, t.Folder)
		}
		r.pool.mu.Unlock()
	})
	pe, ok := r.preparer()
	if !ok {
		return done
	}
	if making != nil {
		select {
		case <-making:
		case <-time.After(settleWait):
			// A warm agent slow to get ready: the turn runs a fresh container rather than
			// wait; the making is cut short and its container removed first.
			r.pool.mu.Lock()
			if abort := r.pool.abort[t.Folder]; abort != nil {
				abort()
			}
			r.pool.mu.Unlock()
			select {
			case <-making:
			case <-ctx.Done():
				return done
			}
		case <-ctx.Done():
			return done
		}
	}
	r.pool.mu.Lock()
	p := r.pool.ready[t.Folder]
	r.pool.mu.Unlock()
	if p == nil || p.warm == nil || r.warmFits(ctx, pe, t, p) {
		return done
	}
	r.pool.mu.Lock()
	if r.pool.ready[t.Folder] != p {
		r.pool.mu.Unlock()
		return done
	}
	delete(r.pool.ready, t.Folder)
	r.pool.mu.Unlock()
	r.log.Info("warm agent dropped: the turn differs from what it was prepared with", logging.FieldContainer, p.name, logging.FieldFolder, string(t.Folder))
	r.remove(ctx, p)
	return done
}

// warmFits says whether the warm agent p serves t: a turn that may have one (not a task's,
// whose services would otherwise run beside it), with the same keys, the agent alive and
// the image its reference names now the one it was made with (the image's events may come
// later than the turn).
func (r *Runner) warmFits(ctx context.Context, pe engine.Preparer, t Turn, p *prepared) bool {
	if !t.Warm || t.TaskID != "" || p.warm.dead() {
		return false
	}
	// The engine's answer is the slowest part (tens of ms on a busy Podman): asked at
	// once, while the keys are computed.
	type look struct {
		id  string
		err error
	}
	image := make(chan look, 1)
	go func() {
		id, err := pe.ImageID(ctx, r.cfg.Image)
		image <- look{id, err}
	}()
	fits := r.sameKeys(t, p)
	img := <-image
	r.pool.mu.Lock()
	defer r.pool.mu.Unlock()
	return fits && img.err == nil && img.id == r.pool.image && p.gen == r.pool.gen
}

// sameKeys says whether t, as the runner would run it now, has p's keys.
func (r *Runner) sameKeys(t Turn, p *prepared) bool {
	dirs, err := r.cfg.Layout.Ensure(t.Folder, os.Getuid(), os.Getgid())
	if err != nil {
		return false
	}
	mounts, err := r.Mounts(t.Folder, dirs, t.ProjectMounts, t.ExtraMounts)
	if err != nil {
		return false
	}
	spec := r.spec(t, "", mounts, r.timeout(t))
	if r.admit(&spec) != nil {
		return false
	}
	key, wkey, err := turnKeys(t, spec)
	return err == nil && p.key == key && p.wkey == wkey
}

// Close removes the prepared containers and waits for the removals still running after
// their turns' results. The daemon calls it when it stops; RemoveLeftovers covers a crash.
func (r *Runner) Close() {
	r.dropPrepared(context.Background())
	r.removals.Wait()
}

// turnRun is the state of one Run.
type turnRun struct {
	r       *Runner
	t       Turn
	log     *slog.Logger // the runner's, with the turn's journal fields
	res     *Result
	dirs    groupfolder.Dirs
	started time.Time
	stamp   time.Time // names the run log: unique among this runner's turns (Runner.stamp)
	id      string
	stderr  tailBuffer
	events  []string
}

// turnLog is the runner's logger with the journal fields of t, which every line of a
// turn carries.
func (r *Runner) turnLog(t Turn) *slog.Logger {
	return r.log.With(logging.FieldRunID, t.RunID, logging.FieldFolder, string(t.Folder))
}

func (tr *turnRun) note(format string, args ...any) {
	tr.events = append(tr.events, fmt.Sprintf("%s "+format, append([]any{time.Since(tr.started).Round(time.Millisecond)}, args...)...))
}

func (tr *turnRun) fail(f Failure, terminal bool, format string, args ...any) {
	tr.res.Failure = f
	tr.res.Terminal = terminal
	tr.res.Output = contract.Output{Status: contract.StatusFatal, Error: tr.r.cfg.Redact(fmt.Sprintf(format, args...))}
	tr.note("failed (%s): %s", f, tr.res.Output.Error)
}

// nameTries bounds the names a turn tries when another process took its container's.
const nameTries = 3

func (tr *turnRun) run(ctx context.Context, spec engine.Spec, stdin []byte, timeout time.Duration) {
	e := tr.r.cfg.Engine
	env := spec.Env
	var (
		id  string
		err error
	)
	for range nameTries {
		// A kill does not cancel the creation: the engine may finish a create whose request
		// was cancelled, and the container would be left behind. It is removed once it exists.
		spec.Env = append(slices.Clip(env), tr.t.containerEnv(spec.Name)...)
		if id, err = e.Create(context.WithoutCancel(ctx), spec); !errors.Is(err, engine.ErrNameInUse) {
			break
		}
		// Another process on the engine (a second daemon, another checkout's tests) named a
		// container of this folder in the same millisecond: the next one is this turn's.
		tr.note("name %s in use on the engine", spec.Name)
		tr.stamp = tr.r.stamp(time.Now())
		spec.Name = ContainerName(tr.t.Folder, tr.t.TaskID, tr.stamp)
		tr.res.Container = spec.Name
	}
	if err != nil {
		err = tr.r.info().CreateError(spec, err)
		if errors.Is(err, engine.ErrCreate) {
			tr.fail(FailMisconfig, true, "create %s: %v", spec.Name, err)
		} else {
			tr.fail(FailEngine, false, "create %s: %v", spec.Name, err)
		}
		return
	}
	tr.id = id
	tr.note("created %s", id[:min(12, len(id))])
	tr.runCreated(ctx, spec, stdin, timeout)
}

// runCreated attaches to the created (or prepared) container tr.id, starts it, writes
// the input and supervises it to its end.
func (tr *turnRun) runCreated(ctx context.Context, spec engine.Spec, stdin []byte, timeout time.Duration) {
	e, id := tr.r.cfg.Engine, tr.id
	if ctx.Err() != nil {
		tr.fail(FailKilled, false, "killed before start")
		return
	}
	if tr.t.OnCreated != nil {
		tr.t.OnCreated(spec.Name, id)
	}
	att, err := e.Attach(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			tr.fail(FailKilled, false, "killed before start")
		} else {
			tr.fail(FailEngine, false, "attach %s: %v", spec.Name, err)
		}
		return
	}
	defer att.Close()
	capture := &contract.Capture{}
	stderr := tr.stderrWriter()
	copied := make(chan error, 1)
	streamEnd := make(chan struct{})
	go func() { copied <- att.CopyOutput(capture, stderr); close(streamEnd) }()
	if err := e.Start(ctx, id); err != nil {
		if ctx.Err() != nil {
			tr.fail(FailKilled, false, "killed before start")
		} else {
			tr.fail(FailMisconfig, true, "start %s: %v", spec.Name, err)
		}
		return
	}
	tr.note("started")
	tr.feed(ctx, spec, att, capture, copied, streamEnd, stdin, timeout)
}

// feed writes the turn's input line to the started container and supervises it to its
// end: copied and streamEnd are its output copy's.
func (tr *turnRun) feed(ctx context.Context, spec engine.Spec, att *engine.Attachment, capture *contract.Capture, copied <-chan error, streamEnd <-chan struct{}, stdin []byte, timeout time.Duration) {
	// The input counts as sent once Write took the whole line: the agent may then have
	// read it. Closing stdin only adds the EOF after it.
	inputErr := make(chan error, 1)
	go func() {
		_, err := att.Stdin.Write(stdin)
		if err == nil {
			if cerr := att.Stdin.Close(); cerr != nil {
				tr.log.Debug("close stdin", logging.FieldContainer, spec.Name, "err", cerr)
			}
			if tr.t.OnInput != nil {
				tr.t.OnInput()
			}
		}
		inputErr <- err
	}()
	cause, w := tr.supervise(ctx, timeout, tr.started, streamEnd)
	if cause == FailDetached {
		return
	}
	// The streams end when the container does; do not let a stuck stream hold the turn.
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
		tr.note("output stream did not end 5s after exit")
		att.Close()
	}
	// A write still blocked now never completes: the container is gone. Closing the
	// connection ends it with an error.
	var werr error
	select {
	case werr = <-inputErr:
	default:
		att.Close()
		werr = <-inputErr
	}
	if werr != nil {
		tr.note("input not written whole: %v", werr)
	}
	tr.classify(cause, w, capture, spec.MemoryBytes, timeout, werr == nil)
}

func (tr *turnRun) stderrWriter() *lineSplitter {
	return &lineSplitter{onLine: tr.t.OnStderr, tail: &tr.stderr, redact: tr.r.cfg.Redact}
}
