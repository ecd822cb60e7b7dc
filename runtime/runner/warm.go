package runner

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/runtime/engine"
)

// A warm agent is a prepared container taken one step further, for an image that says its
// agent can wait for its turn (contract.PrepareLabel): the container is started, its
// agent gets the prepare line (contract.Prepared: session, system prompt, grants, folder)
// and prints contract.ReadyMarker once it waits; the turn then only writes its own line.
// It is still a fresh container per turn: it serves one turn of its own folder and is
// removed after. Before its turn it reaches nothing of one: its model token is refused
// (the gateway takes a container's token only once a turn runs in it), there is no egress
// proxy and no sidecar (a folder with sidecars is not warmed), and the MCP server that its
// agent connects to at start refuses every tools/call until the turn binds it (turn's
// Services). It is used only when the turn would write the same prepare line, the spec has
// the same key, and Turn.WarmKey (its seeded home) is the same; otherwise it is removed
// before anything of the turn is served and the turn runs a fresh container.
// Config.WarmAgents bounds how many folders keep one (the most recently prepared), and
// none is kept while the host's MemAvailable is below Config.WarmMinAvailable.

// warmReadyTimeout bounds how long a warm agent may take to print its ready marker.
const warmReadyTimeout = 2 * time.Minute

// maxHeld bounds what a warm agent's streams keep before its turn.
const maxHeld = 64 << 10

// warmAgent is the running side of a warm prepared container.
type warmAgent struct {
	att    *engine.Attachment
	out    *switchWriter // stdout: the ready marker, then the turn's capture
	errw   *switchWriter // stderr: held, then the turn's
	ended  chan struct{} // the streams ended: the container exited
	copied chan error
}

// dead says whether the warm agent's container ended before its turn.
func (w *warmAgent) dead() bool {
	select {
	case <-w.ended:
		return true
	default:
		return false
	}
}

// switchWriter holds what a stream gives before the turn binds it (bounded), watching
// for the ready marker, then writes to the turn's writer.
type switchWriter struct {
	mu    sync.Mutex
	to    io.Writer
	held  []byte
	line  []byte
	ready chan struct{} // closed at the ready marker; nil: not watched
	seen  bool
}

func (w *switchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.to != nil {
		return w.to.Write(p)
	}
	if w.ready != nil && !w.seen {
		for _, c := range p {
			if c != '\n' {
				if len(w.line) < 256 {
					w.line = append(w.line, c)
				}
				continue
			}
			if string(bytes.TrimSpace(w.line)) == contract.ReadyMarker {
				w.seen = true
				close(w.ready)
				break
			}
			w.line = w.line[:0]
		}
	}
	if len(w.held)+len(p) <= maxHeld {
		w.held = append(w.held, p...)
	}
	return len(p), nil
}

// bind writes what was held to to, and everything after.
func (w *switchWriter) bind(to io.Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) > 0 {
		to.Write(w.held)
	}
	w.held, w.to = nil, to
}

// warmKey is what a warm agent must share with its turn beyond the spec: the prepare line
// and the turn's WarmKey.
func warmKey(specKey string, line []byte, extra string) string {
	sum := sha256.Sum256([]byte(specKey + "\x00" + string(line) + "\x00" + extra))
	return hex.EncodeToString(sum[:12])
}

// prepareLine is the first line of t's warm agent.
func prepareLine(t Turn) ([]byte, error) {
	in := t.Input
	in.Folder = string(t.Folder)
	return contract.EncodeInput(contract.Prepared(in))
}

// mayWarm says whether the runner may start a warm agent now: warm agents configured,
// an image that declares it, enough memory.
func (r *Runner) mayWarm() bool {
	if r.cfg.WarmAgents <= 0 {
		return false
	}
	r.pool.mu.Lock()
	ok := r.pool.warmable
	r.pool.mu.Unlock()
	return ok && r.memoryOK()
}

// Warms says whether the runner may start a warm agent now (Prepare then needs the turn
// whole: its prepare line, WarmKey and Hold).
func (r *Runner) Warms() bool {
	if _, ok := r.preparer(); !ok {
		return false
	}
	return r.mayWarm()
}

// memoryOK says whether MemAvailable is at least Config.WarmMinAvailable.
func (r *Runner) memoryOK() bool {
	if r.cfg.WarmMinAvailable <= 0 {
		return true
	}
	avail, err := r.memAvailable()
	if err != nil {
		r.log.Debug("MemAvailable", "err", err)
		return false
	}
	return avail >= r.cfg.WarmMinAvailable
}

func (r *Runner) memAvailable() (int64, error) {
	if r.cfg.MemAvailable != nil {
		return r.cfg.MemAvailable()
	}
	return MemAvailable()
}

// MemAvailable is the host's MemAvailable (/proc/meminfo), in bytes.
func MemAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo: MemAvailable %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("/proc/meminfo: no MemAvailable")
}

// startWarm starts the created container p, hands its agent line and waits for its
// ready marker.
func (r *Runner) startWarm(ctx context.Context, p *prepared, line []byte) error {
	att, err := r.cfg.Engine.Attach(ctx, p.id)
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	w := &warmAgent{att: att, out: &switchWriter{ready: make(chan struct{})}, errw: &switchWriter{},
		ended: make(chan struct{}), copied: make(chan error, 1)}
	go func() { w.copied <- att.CopyOutput(w.out, w.errw); close(w.ended) }()
	p.warm = w
	if err := r.cfg.Engine.Start(ctx, p.id); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if _, err := att.Stdin.Write(line); err != nil {
		return fmt.Errorf("write the prepare line: %w", err)
	}
	timer := time.NewTimer(warmReadyTimeout)
	defer timer.Stop()
	select {
	case <-w.out.ready:
		return nil
	case <-w.ended:
		return fmt.Errorf("it exited before it was ready: %s", tail(w.errw))
	case <-timer.C:
		return fmt.Errorf("no %s within %s", contract.ReadyMarker, warmReadyTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tail is the last line a held stream kept.
func tail(w *switchWriter) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(w.held)), "\n")
	return lines[len(lines)-1]
}

// dropWarm removes every warm agent: memory is short.
func (r *Runner) dropWarm(ctx context.Context, why string) {
	r.pool.mu.Lock()
	var drop []*prepared
	for f, p := range r.pool.ready {
		if p.warm != nil {
			drop = append(drop, p)
			delete(r.pool.ready, f)
		}
	}
	r.pool.mu.Unlock()
	for _, p := range drop {
		r.log.Info("warm agent dropped: "+why, logging.FieldContainer, p.name, logging.FieldFolder, string(p.folder))
		r.removeLater(ctx, p)
	}
}

// WatchMemory drops the warm agents whenever MemAvailable falls below
// Config.WarmMinAvailable, looking every interval while ctx lasts.
func (r *Runner) WatchMemory(ctx context.Context, interval time.Duration) {
	if r.cfg.WarmAgents <= 0 || r.cfg.WarmMinAvailable <= 0 {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !r.memoryOK() {
				r.dropWarm(ctx, "MemAvailable is below warm_min_available")
			}
		}
	}
}

// WarmAgent is one warm agent, as `arizukod runs warm` shows it.
type WarmAgent struct {
	Folder    groupfolder.Folder
	Container string
	Made      time.Time
	// PSSBytes is the proportional set size of the container's processes; 0 when it
	// cannot be read (the engine names no pid, /proc is not readable).
	PSSBytes int64
}

// WarmAgents lists the warm agents with their memory, the folders sorted.
func (r *Runner) WarmAgents(ctx context.Context) []WarmAgent {
	r.pool.mu.Lock()
	var out []WarmAgent
	ids := map[string]string{}
	for f, p := range r.pool.ready {
		if p.warm != nil && !p.warm.dead() {
			out = append(out, WarmAgent{Folder: f, Container: p.name, Made: p.made})
			ids[p.name] = p.id
		}
	}
	r.pool.mu.Unlock()
	slices.SortFunc(out, func(a, b WarmAgent) int { return strings.Compare(string(a.Folder), string(b.Folder)) })
	for i := range out {
		st, err := r.cfg.Engine.Inspect(ctx, ids[out[i].Container])
		if err == nil && st.Pid > 0 {
			out[i].PSSBytes = containerPSS(st.Pid)
		}
	}
	return out
}

// containerPSS sums the PSS of the processes in the pid namespace of pid: the container's.
func containerPSS(pid int) int64 {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var total int64
	for _, p := range procs {
		if l, err := os.Readlink(p + "/ns/pid"); err != nil || l != ns {
			continue
		}
		total += pss(p + "/smaps_rollup")
	}
	return total
}

// pss reads the Pss line of a smaps_rollup file, in bytes.
func pss(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// runWarm is the turn in the warm agent tr.id: the gateway takes its token (OnCreated),
// its streams go to the turn, and the turn's line follows the prepare line.
func (tr *turnRun) runWarm(ctx context.Context, spec engine.Spec, w *warmAgent, stdin []byte, timeout time.Duration) {
	defer w.att.Close()
	if ctx.Err() != nil {
		tr.fail(FailKilled, false, "killed before start")
		return
	}
	if tr.t.OnCreated != nil {
		tr.t.OnCreated(spec.Name, tr.id)
	}
	capture := &contract.Capture{}
	w.out.bind(capture)
	w.errw.bind(tr.stderrWriter())
	tr.note("bound the warm agent")
	tr.feed(ctx, spec, w.att, capture, w.copied, w.ended, stdin, timeout)
}
