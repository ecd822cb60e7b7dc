// Package fakeengine is an engine.Engine in memory for fast unit tests of what drives
// containers (the runner, the queue): each container plays a Script (what it does with
// its stdin, what it prints, how it ends, whether it hangs until stopped), and the engine
// records what it was asked (specs, input, signals, removals). It is never used in
// production and does not replace the tests against the real engines of the test host.
package fakeengine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/runtime/engine"
)

// Stdin says what a container does with its input line.
type Stdin int

const (
	// StdinRead reads stdin until EOF before it prints; a container nobody attached to
	// reads EOF at once.
	StdinRead Stdin = iota
	// StdinBroken fails every write at once, as a container that closed its stdin.
	StdinBroken
	// StdinBlocked never reads: a write blocks until the attachment is closed.
	StdinBlocked
)

// Script is how one container behaves once started.
type Script struct {
	Stdin Stdin
	// Stdout and Stderr are printed once the input is read (Answer makes an Output).
	Stdout, Stderr string
	// ExitCode is the exit status when the container ends by itself.
	ExitCode int
	// OOM ends the container as the kernel's OOM killer would: exit 137, OOMKilled.
	OOM bool
	// Hang keeps the container running after it printed, until it is stopped or killed
	// (exit 143 on SIGTERM, 137 on SIGKILL), or until OnClose.
	Hang bool
	// OnClose, when set on a hanging container, is printed on stdout once the runner's
	// _close sentinel appears in the input directory of its IPC mount; the container
	// then exits with ExitCode, as an agent that wraps up at the soft deadline.
	OnClose string
	// IgnoreTerm makes a hanging container outlive SIGTERM: Stop kills it after grace.
	IgnoreTerm bool
	// CreateErr makes Create refuse the container (wrapped in engine.ErrCreate).
	CreateErr error
	// StartErr makes Start fail.
	StartErr error
}

// Answer is stdout that carries out between the output markers.
func Answer(out contract.Output) string { return string(contract.WriteOutput(out)) }

// ErrDown is what every call returns while the engine is down (SetDown).
var ErrDown = errors.New("fake engine: connection refused")

// Engine is the fake. The zero value is not usable; use New.
type Engine struct {
	mu         sync.Mutex
	info       engine.Info
	script     func(engine.Spec) Script
	images     map[string]bool // nil: every image exists
	down       error
	gone       chan struct{} // closed when the engine goes down: waits in flight fail
	seq        int
	containers map[string]*container // by ID
	all        []*container          // every container created, removed ones included
	specs      []engine.Spec
}

// New returns an engine whose every container plays s.
func New(s Script) *Engine {
	return &Engine{
		info:       engine.Info{Name: "fake", Version: "1", APIVersion: "1", Socket: "fake://", Networks: []string{engine.NetworkBridge}},
		script:     func(engine.Spec) Script { return s },
		gone:       make(chan struct{}),
		containers: map[string]*container{},
	}
}

// SetScript makes the containers created from now on play f(spec).
func (e *Engine) SetScript(f func(engine.Spec) Script) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.script = f
}

// SetInfo sets what Info answers.
func (e *Engine) SetInfo(info engine.Info) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.info = info
}

// SetImages limits the images that exist to refs; Create of any other fails as a real
// engine's does (engine.ErrNoSuchImage and engine.ErrCreate).
func (e *Engine) SetImages(refs ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.images = map[string]bool{}
	for _, r := range refs {
		e.images[r] = true
	}
}

// SetDown(true) makes every call fail with ErrDown until SetDown(false), and the waits in
// flight too; the containers keep running meanwhile, as behind an engine socket that went
// away.
func (e *Engine) SetDown(down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case down && e.down == nil:
		e.down = ErrDown
		close(e.gone)
	case !down && e.down != nil:
		e.down = nil
		e.gone = make(chan struct{})
	}
}

func (e *Engine) check() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.down
}

func (e *Engine) get(id string) (*container, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.down != nil {
		return nil, e.down
	}
	if c, ok := e.containers[id]; ok {
		return c, nil
	}
	for _, c := range e.containers {
		if c.spec.Name == id {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", engine.ErrNoSuchContainer, id)
}

func (e *Engine) Ping(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.down
}

func (e *Engine) Info(context.Context) (engine.Info, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.info, e.down
}

func (e *Engine) ImageExists(_ context.Context, ref string) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.images == nil || e.images[ref], e.down
}

func (e *Engine) ImportImage(_ context.Context, ref string, rootfs io.Reader, _ []string) error {
	if _, err := io.Copy(io.Discard, rootfs); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.images != nil {
		e.images[ref] = true
	}
	return e.down
}

func (e *Engine) Create(_ context.Context, spec engine.Spec) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.down != nil {
		return "", e.down
	}
	if e.images != nil && !e.images[spec.Image] {
		return "", fmt.Errorf("%w %s (runs never pull: import or build it first): %w", engine.ErrNoSuchImage, spec.Image, engine.ErrCreate)
	}
	for _, c := range e.containers {
		if spec.Name != "" && c.spec.Name == spec.Name {
			return "", fmt.Errorf("%w: the container name %q is already in use", engine.ErrNameInUse, spec.Name)
		}
	}
	s := e.script(spec)
	if s.CreateErr != nil {
		return "", fmt.Errorf("%w: %w", engine.ErrCreate, s.CreateErr)
	}
	e.seq++
	id := fmt.Sprintf("%064x", e.seq)
	c := newContainer(id, spec, s)
	e.specs = append(e.specs, spec)
	e.containers[id] = c
	e.all = append(e.all, c)
	return id, nil
}

func (e *Engine) Attach(_ context.Context, id string) (*engine.Attachment, error) {
	c, err := e.get(id)
	if err != nil {
		return nil, err
	}
	return c.attach(), nil
}

func (e *Engine) Start(_ context.Context, id string) error {
	c, err := e.get(id)
	if err != nil {
		return err
	}
	return c.start()
}

func (e *Engine) Wait(ctx context.Context, id string) (engine.State, error) {
	c, err := e.get(id)
	if err != nil {
		return engine.State{}, err
	}
	e.mu.Lock()
	gone := e.gone
	e.mu.Unlock()
	select {
	case <-c.done:
	case <-gone:
		return engine.State{}, ErrDown
	case <-ctx.Done():
		return engine.State{}, ctx.Err()
	}
	// An engine that went away meanwhile does not answer the wait.
	if err := e.check(); err != nil {
		return engine.State{}, err
	}
	return c.state(), nil
}

func (e *Engine) Inspect(_ context.Context, id string) (engine.State, error) {
	c, err := e.get(id)
	if err != nil {
		return engine.State{}, err
	}
	return c.state(), nil
}

// Signal records sig; SIGTERM and SIGKILL end a running container. A container that is
// not running refuses it, as the engines do.
func (e *Engine) Signal(_ context.Context, id, sig string) error {
	c, err := e.get(id)
	if err != nil {
		return err
	}
	return c.signal(sig)
}

// Stop sends SIGTERM, then SIGKILL after grace, and returns once the container ended.
func (e *Engine) Stop(ctx context.Context, id string, grace time.Duration) error {
	c, err := e.get(id)
	if err != nil {
		return err
	}
	if c.signal("SIGTERM") != nil {
		return nil
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return nil
	case <-t.C:
		_ = c.signal("SIGKILL")
	case <-ctx.Done():
		return ctx.Err()
	}
	<-c.done
	return nil
}

// Remove kills a running container and forgets it; one already gone is not an error.
func (e *Engine) Remove(_ context.Context, id string) error {
	c, err := e.get(id)
	if errors.Is(err, engine.ErrNoSuchContainer) {
		return nil
	}
	if err != nil {
		return err
	}
	if c.signal("SIGKILL") == nil {
		<-c.done
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.containers, c.id)
	return nil
}

func (e *Engine) List(_ context.Context, labels map[string]string) ([]engine.Container, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.down != nil {
		return nil, e.down
	}
	var out []engine.Container
	for _, c := range e.containers {
		match := true
		for k, v := range labels {
			match = match && c.spec.Labels[k] == v
		}
		if match {
			st := c.state()
			out = append(out, engine.Container{ID: c.id, Name: c.spec.Name, Labels: maps.Clone(c.spec.Labels), Running: st.Running, Created: c.created})
		}
	}
	slices.SortFunc(out, func(a, b engine.Container) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Logs copies what the container printed so far.
func (e *Engine) Logs(_ context.Context, id string, stdout, stderr io.Writer) error {
	c, err := e.get(id)
	if err != nil {
		return err
	}
	out, errOut := c.logs()
	if _, err := io.WriteString(stdout, out); err != nil {
		return err
	}
	_, err = io.WriteString(stderr, errOut)
	return err
}

// Specs are the specs of every container created, in order, removed ones included.
func (e *Engine) Specs() []engine.Spec {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.specs)
}

// record is the last container created with that name or ID, removed or not.
func (e *Engine) record(name string) *container {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.all) - 1; i >= 0; i-- {
		if c := e.all[i]; c.id == name || c.spec.Name == name {
			return c
		}
	}
	return nil
}

// Stdin is what the container named name (or with that ID) read on its stdin, removed
// or not.
func (e *Engine) Stdin(name string) string {
	c := e.record(name)
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stdin.String()
}

// Signals are the signals the container named name (or with that ID) got, in order,
// removed or not.
func (e *Engine) Signals(name string) []string {
	c := e.record(name)
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.signals)
}

// Exists says whether a container named name (or with that ID) exists.
func (e *Engine) Exists(name string) bool {
	_, err := e.get(name)
	return err == nil
}

// closeSentinel is where the runner's _close sentinel appears for c: the input directory
// of its IPC mount; "" when it has none.
func closeSentinel(spec engine.Spec) string {
	for _, m := range spec.Mounts {
		if m.Target == contract.IPCDir {
			return filepath.Join(m.Source, contract.InputDir, "_close")
		}
	}
	return ""
}

// exitStatus is the exit code of a container ended by sig.
func exitStatus(sig string) int {
	if sig == "SIGKILL" {
		return 137
	}
	return 143
}

// fileAppears closes the returned channel once path exists, until stop is closed.
func fileAppears(path string, stop <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{})
	if path == "" {
		return ch
	}
	go func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if _, err := os.Stat(path); err == nil {
				close(ch)
				return
			}
			select {
			case <-t.C:
			case <-stop:
				return
			}
		}
	}()
	return ch
}

var _ engine.Engine = (*Engine)(nil)
