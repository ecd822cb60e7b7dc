package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/atomicfile"
)

// Labels every container of arizukod carries, so that cleanup finds exactly its own.
const (
	LabelInstance = "io.arizuko.instance"
	LabelFolder   = "io.arizuko.folder"
	LabelRun      = "io.arizuko.run"
	LabelRole     = "io.arizuko.role"
)

// Defaults of a turn, overridable per group.
const (
	DefaultTimeout   = 20 * time.Minute
	DefaultMemory    = 1 << 30
	DefaultNanoCPUs  = 2e9
	DefaultPidsLimit = 512
	DefaultStopGrace = 10 * time.Second
	// softGap is how long before the hard deadline the agent is told to wrap up.
	softGap       = 30 * time.Second
	maxStderrKept = 64 << 10
	logMaxBytes   = 16 << 20
)

// CloseSentinel is the file written into the group's IPC input directory at the soft deadline.
const CloseSentinel = "_close"

// Failure says why a turn did not produce a usable answer, so the caller can act on it.
type Failure string

// Failures a Result can carry; empty means the agent answered.
const (
	FailNone      Failure = ""
	FailTimeout   Failure = "timeout"
	FailOOM       Failure = "oom"
	FailMisconfig Failure = "misconfig" // create failure, exit 125/126/127, missing image: terminal
	FailNoOutput  Failure = "no-output"
	FailBadOutput Failure = "bad-output"
	FailKilled    Failure = "killed"
	FailEngine    Failure = "engine"
	// FailLost: the container of an adopted run was gone, and its result with it.
	FailLost Failure = "lost"
	// FailDetached: the run was left running on purpose; it is not over.
	FailDetached Failure = "detached"
	// FailNoInput: the agent never got its input and gave no ok or error answer, so nothing
	// it did can depend on the turn: the input line was not written whole to its stdin (the
	// container ended first, or the daemon that ran it stopped before), or the container
	// never started. The turn may run again.
	FailNoInput Failure = "no-input"
)

// Config is what a Runner needs for every turn.
type Config struct {
	Engine Engine
	// Info describes the engine; InfoFunc, when set, is asked instead at every turn, for a
	// daemon that learns the engine only once it answers.
	Info     Info
	InfoFunc func() Info
	Layout   groupfolder.Layout
	Instance string // the value of LabelInstance on every container
	Image    string
	Timeout  time.Duration
	// StopGrace is how long a container gets between SIGTERM and SIGKILL.
	StopGrace time.Duration
	// SkillsDir is mounted read-only at /skills when set.
	SkillsDir string
	// WebDir is mounted read-only at /workspace/web when set.
	WebDir  string
	Rlimits []Rlimit
	// Networks are the named networks a turn may join (limits.allowed_networks).
	Networks []string
	// AllowUnlimited runs turns where the engine cannot apply the memory, CPU and pids
	// limits (limits.allow_unlimited); otherwise they fail as a terminal misconfiguration.
	AllowUnlimited bool
	// Redact removes secret values from text before it is logged; nil logs text as is.
	Redact func(string) string
	Logger *slog.Logger
}

// Limits are the resources of one container.
type Limits struct {
	MemoryBytes int64
	NanoCPUs    int64
	PidsLimit   int64
	Network     string
}

// Turn is one request to run the agent.
type Turn struct {
	RunID  string
	Folder groupfolder.Folder
	// TaskID names a scheduled task's container arizuko-<folder>-task-<id>-<unix_ms>.
	TaskID string
	Input  contract.Input
	Limits Limits
	// ExtraMounts are additional mounts, already validated against the allowlist.
	ExtraMounts []Mount
	// Timeout overrides Config.Timeout when positive.
	Timeout time.Duration
	// Env is more of the container's environment (KEY=VALUE), such as the turn's model
	// token; it cannot replace the variables the runner sets.
	Env []string
	// OnCreated, when set, learns the container's name and id before it starts.
	OnCreated func(name, id string)
	// OnInput, when set, is called once the whole input line is written to the container's
	// stdin, so that a daemon adopting the run later knows the agent may have acted on it.
	OnInput func()
	// InputSent tells Adopt that the daemon that started the container wrote its input
	// whole (OnInput was called); without it, an adopted turn whose agent gave no ok or
	// error answer ends FailNoInput.
	InputSent bool
	// OnStderr, when set, gets each line the container prints on stderr.
	OnStderr func(line string)
	// Detach, when closed, makes Run return at once and leave the container running, for
	// a daemon that stops gracefully; Adopt collects the result later.
	Detach <-chan struct{}
}

// Result is how a turn ended.
type Result struct {
	RunID     string
	Container string
	Output    contract.Output
	ExitCode  int
	Failure   Failure
	// Terminal marks failures that a retry will not fix.
	Terminal    bool
	Duration    time.Duration
	StdoutBytes int64
	Stderr      string // the last bytes of stderr, redacted
	LogFile     string
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
}

// NewRunner checks cfg and returns a Runner.
func NewRunner(cfg Config) (*Runner, error) {
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
		cfg.Timeout = DefaultTimeout
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.Rlimits == nil {
		cfg.Rlimits = DefaultRlimits()
	}
	if cfg.Redact == nil {
		cfg.Redact = func(s string) string { return s }
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Runner{cfg: cfg, log: log}, nil
}

func (r *Runner) info() Info {
	if r.cfg.InfoFunc != nil {
		return r.cfg.InfoFunc()
	}
	return r.cfg.Info
}

// DefaultRlimits are explicit, so that a container never inherits limits the host refuses.
func DefaultRlimits() []Rlimit {
	return []Rlimit{{"nofile", 1024, 1024}, {"nproc", 4096, 4096}}
}

// ContainerName is arizuko-<folder>-<unix_ms>, or arizuko-<folder>-task-<id>-<unix_ms> for
// a task. The time makes each run's name its own: a finished turn's container is removed
// after its result, so the next run of the same task may start while it is still there.
func ContainerName(f groupfolder.Folder, taskID string, now time.Time) string {
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	if taskID != "" {
		return "arizuko-" + f.ContainerSlug() + "-task-" + taskID + "-" + ms
	}
	return "arizuko-" + f.ContainerSlug() + "-" + ms
}

// QueryTimeout is what the agent gets as ARIZUKO_QUERY_TIMEOUT_MS: the run timeout less the
// 30 s it needs to deliver a summary before the hard kill.
func QueryTimeout(timeout time.Duration) time.Duration {
	if timeout > 2*softGap {
		return timeout - softGap
	}
	return timeout * 3 / 4
}

// Run runs one turn to its end. Cancelling ctx kills the container; the Result then says
// FailKilled. The returned error is non-nil only when the turn could not be attempted at
// all (bad input, directories that cannot be made); everything that happens to the
// container is in the Result.
func (r *Runner) Run(ctx context.Context, t Turn) (Result, error) {
	start := time.Now()
	name := ContainerName(t.Folder, t.TaskID, start)
	res := Result{RunID: t.RunID, Container: name}
	timeout := r.cfg.Timeout
	if t.Timeout > 0 {
		timeout = t.Timeout
	}
	dirs, err := r.cfg.Layout.Ensure(t.Folder, os.Getuid(), os.Getgid())
	if err != nil {
		return res, fmt.Errorf("prepare %s: %w", t.Folder, err)
	}
	if err := clearInput(dirs.IPCInput); err != nil {
		return res, fmt.Errorf("prepare %s: %w", t.Folder, err)
	}
	t.Input.Folder = string(t.Folder)
	stdin, err := contract.EncodeInput(t.Input)
	if err != nil {
		return res, err
	}
	mounts, err := r.Mounts(t.Folder, dirs, t.ExtraMounts)
	if err != nil {
		return res, err
	}
	spec := r.spec(t, name, dirs, mounts, timeout)
	tr := &turnRun{r: r, t: t, res: &res, dirs: dirs, started: start}
	if err := r.admit(&spec); err != nil {
		tr.fail(FailMisconfig, true, "%v", err)
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

// MountOptions are the daemon-wide sources of a turn's mount table; empty ones are left out.
type MountOptions struct {
	SkillsDir string
	WebDir    string
	EnvFile   string
}

// MountTable is the mount table of a turn of f, in the order the engine gets it: the seed's
// table, then the additional mounts (already validated). Parents come before the mounts
// nested in them. media/ and, for a world's own turns, share/ live inside the group
// directory already: mounting them again would only add a window for a symlink swap.
func MountTable(f groupfolder.Folder, d groupfolder.Dirs, o MountOptions, extra []Mount) []Mount {
	m := []Mount{{Source: d.Group, Target: "/workspace", Origin: "group"}}
	if f.Depth() > 0 {
		m = append(m, Mount{Source: d.Share, Target: "/workspace/share", Origin: "share"})
	}
	m = append(m, Mount{Source: d.Session, Target: "/root", Origin: "session"}, Mount{Source: d.IPC, Target: "/var/run/pub/arizuko", Origin: "ipc"})
	if o.SkillsDir != "" {
		m = append(m, Mount{Source: o.SkillsDir, Target: "/skills", ReadOnly: true, Origin: "skills"})
	}
	if o.WebDir != "" {
		m = append(m, Mount{Source: o.WebDir, Target: "/workspace/web", ReadOnly: true, Origin: "web"})
	}
	if o.EnvFile != "" {
		m = append(m, Mount{Source: o.EnvFile, Target: "/workspace/env-dir/env", ReadOnly: true, Origin: "env"})
	}
	for _, e := range extra {
		e.Origin = "extra"
		m = append(m, e)
	}
	return m
}

// Mounts is MountTable for a turn of this runner, with every source checked.
func (r *Runner) Mounts(f groupfolder.Folder, d groupfolder.Dirs, extra []Mount) ([]Mount, error) {
	o := MountOptions{SkillsDir: r.cfg.SkillsDir, WebDir: r.cfg.WebDir}
	if env, err := r.cfg.Layout.EnvFile(); err == nil {
		if fi, err := os.Stat(env); err == nil && fi.Mode().IsRegular() {
			o.EnvFile = env
		}
	}
	for _, e := range extra {
		if !strings.HasPrefix(e.Target, "/workspace/extra/") {
			return nil, fmt.Errorf("additional mount %s: target %q is not under /workspace/extra", e.Source, e.Target)
		}
	}
	m := MountTable(f, d, o, extra)
	for _, x := range m {
		if _, err := os.Stat(x.Source); err != nil {
			return nil, fmt.Errorf("mount %s -> %s: source unusable: %w", x.Source, x.Target, err)
		}
	}
	return m, nil
}

func (r *Runner) spec(t Turn, name string, d groupfolder.Dirs, mounts []Mount, timeout time.Duration) Spec {
	l := t.Limits
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = DefaultMemory
	}
	if l.NanoCPUs <= 0 {
		l.NanoCPUs = DefaultNanoCPUs
	}
	if l.PidsLimit <= 0 {
		l.PidsLimit = DefaultPidsLimit
	}
	s := Spec{
		Name:  name,
		Image: r.cfg.Image,
		Labels: map[string]string{
			LabelInstance: r.cfg.Instance,
			LabelFolder:   string(t.Folder),
			LabelRun:      t.RunID,
			LabelRole:     "agent",
		},
		Env: []string{
			"HOME=/root",
			"ARIZUKO_FOLDER=" + string(t.Folder),
			"ARIZUKO_RUN_ID=" + t.RunID,
			"ARIZUKO_QUERY_TIMEOUT_MS=" + strconv.FormatInt(QueryTimeout(timeout).Milliseconds(), 10),
		},
		Mounts:      mounts,
		Tmpfs:       []Tmpfs{{Target: "/tmp", Options: "rw,nosuid,nodev,size=256m,mode=1777"}},
		Network:     l.Network,
		MemoryBytes: l.MemoryBytes,
		NanoCPUs:    l.NanoCPUs,
		PidsLimit:   l.PidsLimit,
		Rlimits:     r.cfg.Rlimits,
		WorkingDir:  "/workspace",
		Stdin:       true,
		LogMaxBytes: logMaxBytes,
	}
	for _, kv := range t.Env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(s.Env, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			s.Env = append(s.Env, kv)
		}
	}
	if !r.info().Rootless {
		// A rootful engine would otherwise write the agent's files as root; rootless
		// Podman already maps the container's root to the daemon's user.
		s.User = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	}
	return s
}

// Close waits for the removals still running after their turns' results. The daemon
// calls it when it stops; RemoveLeftovers covers a crash.
func (r *Runner) Close() { r.removals.Wait() }

// clearInput removes what an earlier turn left in the IPC input directory: a stale _close
// would end the new turn at once. A file already gone is fine: a steer to the earlier turn
// that found it ended takes its messages back.
func clearInput(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// turnRun is the state of one Run.
type turnRun struct {
	r       *Runner
	t       Turn
	res     *Result
	dirs    groupfolder.Dirs
	started time.Time
	id      string
	stderr  tailBuffer
	events  []string
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

func (tr *turnRun) run(ctx context.Context, spec Spec, stdin []byte, timeout time.Duration) {
	e := tr.r.cfg.Engine
	// A kill does not cancel the creation: the engine may finish a create whose request was
	// cancelled, and the container would be left behind. It is removed once it exists.
	id, err := e.Create(context.WithoutCancel(ctx), spec)
	if err != nil {
		if errors.Is(err, ErrCreate) {
			tr.fail(FailMisconfig, true, "create %s: %v", spec.Name, err)
		} else {
			tr.fail(FailEngine, false, "create %s: %v", spec.Name, err)
		}
		return
	}
	tr.id = id
	tr.note("created %s", id[:min(12, len(id))])
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
	// The input counts as sent once Write took the whole line: the agent may then have
	// read it. Closing stdin only adds the EOF after it.
	inputErr := make(chan error, 1)
	go func() {
		_, err := att.Stdin.Write(stdin)
		if err == nil {
			if cerr := att.Stdin.Close(); cerr != nil {
				tr.r.log.Debug("close stdin", "container", spec.Name, "err", cerr)
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

// remove removes the container unless the run was detached; it runs even when ctx is
// cancelled.
func (tr *turnRun) remove(ctx context.Context) {
	if tr.res.Failure == FailDetached {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := tr.r.cfg.Engine.Remove(rctx, tr.id); err != nil {
		tr.note("remove failed: %v", err)
		if tr.res.Failure == FailEngine {
			// The engine went away under the turn: the queue adopts the container when
			// the engine is back, or it is a leftover; it is not this removal's to retry.
			tr.r.log.Warn("remove container", "container", tr.res.Container, "err", err)
			return
		}
		tr.r.log.Error("remove container: retried once the engine answers", "container", tr.res.Container, "err", err)
		tr.r.mu.Lock()
		if tr.r.unremoved == nil {
			tr.r.unremoved = map[string]string{}
		}
		tr.r.unremoved[tr.id] = tr.res.Container
		tr.r.mu.Unlock()
	}
}

// RetryRemovals removes again the containers whose removal failed. The queue calls it
// while the engine answers; a container still not removable stays for the next call.
func (r *Runner) RetryRemovals(ctx context.Context) {
	r.mu.Lock()
	pending := r.unremoved
	r.unremoved = nil
	r.mu.Unlock()
	for id, name := range pending {
		err := r.cfg.Engine.Remove(ctx, id)
		if err == nil || errors.Is(err, ErrNoSuchContainer) {
			r.log.Info("removed container after a failed removal", "container", name)
			continue
		}
		r.log.Warn("remove container again", "container", name, "err", err)
		r.mu.Lock()
		if r.unremoved == nil {
			r.unremoved = map[string]string{}
		}
		r.unremoved[id] = name
		r.mu.Unlock()
	}
}

// supervise waits for the container to exit, writing the _close sentinel at the soft
// deadline and stopping it at the hard one, both counted from started. It returns why the
// runner ended the container, if it did, and the final state.
func (tr *turnRun) supervise(ctx context.Context, timeout time.Duration, started time.Time, streamEnd <-chan struct{}) (Failure, waitResult) {
	e := tr.r.cfg.Engine
	bg := context.WithoutCancel(ctx)
	wctx, cancelWait := context.WithCancel(bg)
	defer cancelWait()
	waited := make(chan waitResult, 1)
	go func() {
		st, err := e.Wait(wctx, tr.id)
		waited <- waitResult{st, err}
	}()
	soft := time.NewTimer(max(0, time.Until(started.Add(QueryTimeout(timeout)))))
	hard := time.NewTimer(max(0, time.Until(started.Add(timeout))))
	defer soft.Stop()
	defer hard.Stop()
	for {
		select {
		case w := <-waited:
			return FailNone, w
		case <-streamEnd:
			// The output ends when the agent exits: a few quick inspects see the exit sooner
			// than the engine's wait, which libpod 4.3 polls every 250 ms.
			streamEnd = nil
			if st, ok := tr.exitedAfterStream(bg); ok {
				return FailNone, waitResult{state: st}
			}
		case <-soft.C:
			tr.note("soft deadline: wrote %s", CloseSentinel)
			if err := os.WriteFile(filepath.Join(tr.dirs.IPCInput, CloseSentinel), nil, 0o644); err != nil {
				tr.r.log.Warn("write close sentinel", "container", tr.res.Container, "err", err)
			}
		case <-hard.C:
			tr.note("hard deadline after %s: stopping", timeout)
			tr.stop(bg, tr.id)
			return FailTimeout, <-waited
		case <-ctx.Done():
			tr.note("killed: %v", context.Cause(ctx))
			tr.stop(bg, tr.id)
			return FailKilled, <-waited
		case <-tr.t.Detach:
			tr.note("detached: the container keeps running")
			tr.res.Failure = FailDetached
			return FailDetached, waitResult{}
		}
	}
}

// classify turns how the container ended and what it printed into the Result. inputSent
// says whether the input line reached the container's stdin whole.
func (tr *turnRun) classify(cause Failure, w waitResult, capture *contract.Capture, memory int64, timeout time.Duration, inputSent bool) {
	tr.res.StdoutBytes = capture.Total()
	tr.res.Stderr = tr.r.cfg.Redact(tr.stderr.String())
	if w.err != nil {
		tr.fail(FailEngine, false, "wait %s: %v", tr.res.Container, w.err)
		return
	}
	tr.res.ExitCode = w.state.ExitCode
	tr.note("exited %d (%s)", w.state.ExitCode, w.state.Status)
	out, perr := capture.Result()
	switch {
	case cause == FailKilled:
		tr.fail(FailKilled, false, "run killed on request")
	case perr != nil && (w.state.ExitCode == 125 || w.state.ExitCode == 126 || w.state.ExitCode == 127):
		tr.fail(FailMisconfig, true, "the container exited %d (%s): the image or its entrypoint is wrong", w.state.ExitCode, exitMeaning(w.state.ExitCode))
	case cause == FailTimeout && perr != nil:
		tr.fail(FailTimeout, false, "no answer within the %s run timeout", timeout)
	case !inputSent && (perr != nil || out.Status == contract.StatusFatal):
		// Whatever the agent printed (typically "read stdin: EOF"), it had no turn to act on.
		detail := "no answer"
		if perr == nil {
			detail = "it answered fatal: " + out.Error
		}
		tr.fail(FailNoInput, false, "the turn's input never reached the agent (exit %d, %s)", w.state.ExitCode, detail)
	case w.state.OOMKilled:
		tr.fail(FailOOM, false, "the agent ran out of memory (limit %d bytes) and was killed", memory)
	case w.state.ExitCode == 137 && perr != nil:
		// SIGKILL that arizukod did not send. Podman 4.3 with runc on cgroup v1 does not
		// always report the OOM kill, and the kernel's OOM killer is what sends it.
		tr.fail(FailOOM, false, "the agent was killed by SIGKILL (exit 137) that arizukod did not send: most likely the memory limit (%d bytes)", memory)
	case perr == nil:
		// The agent's own text reaches logs, the journal and the store: no secret in it.
		out.Error = tr.r.cfg.Redact(out.Error)
		out.Result = tr.r.cfg.Redact(out.Result)
		out.NewSessionID = tr.r.cfg.Redact(out.NewSessionID)
		tr.res.Output = out
		if cause == FailTimeout {
			tr.res.Failure = FailTimeout
		}
	case errors.Is(perr, contract.ErrNoOutput):
		tr.fail(FailNoOutput, false, "exit %d: %v", w.state.ExitCode, perr)
	default:
		tr.fail(FailBadOutput, false, "exit %d: %v", w.state.ExitCode, perr)
	}
}

// Adopt takes over a run whose container a previous daemon left running (or exited): it
// supervises it to the end of its timeout, counted from startedAt, collects its output from
// the engine's log, removes it and returns the Result as Run would have.
func (r *Runner) Adopt(ctx context.Context, t Turn, container string, startedAt time.Time) (Result, error) {
	res := Result{RunID: t.RunID, Container: container}
	timeout := r.cfg.Timeout
	if t.Timeout > 0 {
		timeout = t.Timeout
	}
	dirs, err := r.cfg.Layout.Paths(t.Folder)
	if err != nil {
		return res, err
	}
	tr := &turnRun{r: r, t: t, res: &res, dirs: dirs, started: startedAt, id: container}
	// A kill already requested (ctx cancelled) still needs the container found and stopped.
	st, err := r.cfg.Engine.Inspect(context.WithoutCancel(ctx), container)
	if err != nil {
		if errors.Is(err, ErrNoSuchContainer) {
			tr.fail(FailLost, false, "container %s vanished while the daemon was away", container)
			res.Duration = time.Since(startedAt)
			tr.writeLog()
			return res, nil
		}
		return res, err
	}
	tr.note("adopted after a daemon restart")
	defer tr.remove(ctx)
	if neverStarted(st) {
		// The daemon stopped between creating and starting it: no agent ever ran.
		tr.fail(FailNoInput, false, "the container was created but never started (%s)", st.Status)
		res.Duration = time.Since(startedAt)
		tr.writeLog()
		return res, nil
	}
	cause, w := tr.supervise(ctx, timeout, startedAt, nil)
	if cause == FailDetached {
		return res, nil
	}
	capture := &contract.Capture{}
	if err := r.cfg.Engine.Logs(ctx, container, capture, tr.stderrWriter()); err != nil {
		tr.note("read logs: %v", err)
	}
	tr.classify(cause, w, capture, 0, timeout, t.InputSent)
	res.Duration = time.Since(startedAt)
	tr.writeLog()
	return res, nil
}

// neverStarted reports whether st is a container that was created and never started.
func neverStarted(st State) bool {
	return !st.Running && (st.StartedAt.IsZero() || st.Status == "created" || st.Status == "configured")
}

// exitedAfterStream inspects the container a few times over about 60 ms and returns its
// state once it is no longer running. An agent that closed its output and keeps running is
// left to Wait.
func (tr *turnRun) exitedAfterStream(ctx context.Context) (State, bool) {
	for delay := time.Duration(0); delay <= 32*time.Millisecond; delay = max(2*time.Millisecond, 2*delay) {
		time.Sleep(delay)
		st, err := tr.r.cfg.Engine.Inspect(ctx, tr.id)
		if err != nil {
			return State{}, false
		}
		if !st.Running && st.Status != "created" {
			return st, true
		}
	}
	return State{}, false
}

type waitResult struct {
	state State
	err   error
}

// stop asks the container to stop with grace, then kills it; removal follows in Run.
func (tr *turnRun) stop(ctx context.Context, id string) {
	e := tr.r.cfg.Engine
	sctx, cancel := context.WithTimeout(ctx, tr.r.cfg.StopGrace+15*time.Second)
	defer cancel()
	if err := e.Stop(sctx, id, tr.r.cfg.StopGrace); err != nil && !errors.Is(err, ErrNoSuchContainer) {
		tr.note("stop failed: %v; killing", err)
		if err := e.Signal(ctx, id, "SIGKILL"); err != nil {
			tr.note("kill failed: %v", err)
		}
	}
}

func exitMeaning(code int) string {
	switch code {
	case 125:
		return "the engine failed to run it"
	case 126:
		return "the entrypoint cannot be executed"
	case 127:
		return "the entrypoint was not found"
	}
	return ""
}

// writeLog writes groups/<folder>/logs/container-<unix_ms>.log: header, events, exit,
// duration and the tail of stderr. Secrets are redacted.
func (tr *turnRun) writeLog() {
	f, err := tr.r.cfg.Layout.CreateLog(tr.t.Folder, fmt.Sprintf("container-%d.log", tr.started.UnixMilli()))
	if err != nil {
		tr.r.log.Warn("run log", "folder", tr.t.Folder, "err", err)
		return
	}
	defer f.Close()
	res := tr.res
	var b bytes.Buffer
	fmt.Fprintf(&b, "run: %s\nfolder: %s\ncontainer: %s\nimage: %s\nengine: %s %s\nstarted: %s\nduration: %s\nexit: %d\nstatus: %s\nfailure: %s\n",
		res.RunID, tr.t.Folder, res.Container, tr.r.cfg.Image, tr.r.info().Name, tr.r.info().Version,
		tr.started.UTC().Format(time.RFC3339Nano), res.Duration.Round(time.Millisecond), res.ExitCode, res.Output.Status, res.Failure)
	if res.Output.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", res.Output.Error)
	}
	fmt.Fprintf(&b, "stdout: %d bytes\n\n-- events --\n%s\n\n-- stderr (last %d bytes) --\n%s\n", res.StdoutBytes, strings.Join(tr.events, "\n"), maxStderrKept, res.Stderr)
	// Everything in it, the events' engine errors included, is redacted as one text.
	if _, err := f.Write([]byte(tr.r.cfg.Redact(b.String()))); err != nil {
		tr.r.log.Warn("run log", "folder", tr.t.Folder, "err", err)
	}
	res.LogFile = f.Name()
}

// ErrNotRunning says a container is not running (not yet started, or ended), so it cannot
// be steered.
var ErrNotRunning = errors.New("container is not running")

// Steer drops messages into a running turn's IPC input directory and sends SIGUSR1 so the
// agent reads them. A container that is gone or not running is ErrNoSuchContainer or
// ErrNotRunning, and the messages are taken back: the caller is told they were not
// delivered, so they must not turn up later.
func (r *Runner) Steer(ctx context.Context, f groupfolder.Folder, containerID string, msgs []contract.Message) error {
	dir, err := r.cfg.Layout.IPCInputDir(f)
	if err != nil {
		return err
	}
	now := time.Now().UnixNano()
	var written []string
	takeBack := func() {
		for _, name := range written {
			os.Remove(name)
		}
	}
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			takeBack()
			return err
		}
		name := filepath.Join(dir, fmt.Sprintf("%d-%03d.json", now, i))
		if err := atomicfile.Write(name, b, 0o644); err != nil {
			takeBack()
			return fmt.Errorf("steer %s: %w", f, err)
		}
		written = append(written, name)
	}
	// The engine refuses a signal to a container that is not running, each in its own
	// words: ask it what the container is then. One that started meanwhile (the signal
	// came while it was being started) gets the signal again.
	var serr error
	for try := 0; ; try++ {
		if serr = r.cfg.Engine.Signal(ctx, containerID, "SIGUSR1"); serr == nil {
			return nil
		}
		st, ierr := r.cfg.Engine.Inspect(context.WithoutCancel(ctx), containerID)
		switch {
		case errors.Is(serr, ErrNoSuchContainer), errors.Is(ierr, ErrNoSuchContainer):
			takeBack()
			return fmt.Errorf("steer %s: %w", f, ErrNoSuchContainer)
		case ierr == nil && !st.Running:
			takeBack()
			return fmt.Errorf("steer %s: %w (%s)", f, ErrNotRunning, st.Status)
		case ierr == nil && try < 2:
			continue
		}
		takeBack()
		return fmt.Errorf("steer %s: signal: %w", f, serr)
	}
}

// tailBuffer keeps the last maxStderrKept bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - maxStderrKept; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// lineSplitter feeds stderr to the tail buffer and, line by line, to a callback.
type lineSplitter struct {
	onLine func(string)
	tail   *tailBuffer
	redact func(string) string
	line   []byte
}

func (l *lineSplitter) Write(p []byte) (int, error) {
	l.tail.Write(p)
	if l.onLine == nil {
		return len(p), nil
	}
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(l.line) < 4096 {
				l.line = append(l.line, rest[:min(len(rest), 4096-len(l.line))]...)
			}
			break
		}
		if len(l.line) < 4096 {
			l.line = append(l.line, rest[:min(i, 4096-len(l.line))]...)
		}
		l.onLine(l.redact(string(l.line)))
		l.line = l.line[:0]
		rest = rest[i+1:]
	}
	return len(p), nil
}

// RemoveLeftovers removes the containers of this instance, running or not, that keep does
// not claim: what a crash left behind. keep lets a restarting daemon spare the containers of
// runs it adopts; nil keeps none. It returns the names removed.
func (r *Runner) RemoveLeftovers(ctx context.Context, keep func(Container) bool) ([]string, error) {
	list, err := r.cfg.Engine.List(ctx, map[string]string{LabelInstance: r.cfg.Instance})
	if err != nil {
		return nil, fmt.Errorf("list leftovers: %w", err)
	}
	var removed []string
	for _, c := range list {
		if c.Labels[LabelInstance] != r.cfg.Instance || keep != nil && keep(c) {
			continue
		}
		if err := r.cfg.Engine.Remove(ctx, c.ID); err != nil {
			return removed, fmt.Errorf("remove leftover %s: %w", c.Name, err)
		}
		r.log.Info("removed leftover container", "container", c.Name, "ARIZUKO_FOLDER", c.Labels[LabelFolder], "ARIZUKO_RUN_ID", c.Labels[LabelRun])
		removed = append(removed, c.Name)
	}
	return removed, nil
}
