package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/agentdir"
	"github.com/arizuko/arizukod/internal/atomicfile"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/runtime/engine"
)

// errDenied says the manager does not let this user start units (polkit): the sidecar
// runs on the engine instead.
var errDenied = errors.New("the systemd manager refused to start a unit for this user")

// errNoCLI says the engine's CLI, which a transient unit runs, is not there: the sidecar
// runs on the engine instead.
var errNoCLI = errors.New("no engine CLI for transient units")

// unavailable reports whether err says that no transient unit can run a sidecar now (no
// manager answers, it refuses this user, no engine CLI), so that the engine runs it.
func unavailable(err error) bool {
	return errors.Is(err, ErrNoSystemd) || errors.Is(err, errDenied) || errors.Is(err, errNoCLI)
}

// ErrStart marks a sidecar that did not come up: its unit or container failed, or its
// socket never answered. The error carries the last lines it logged.
var ErrStart = errors.New("sidecar did not start")

// Defaults of a Manager.
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultStopGrace    = 5 * time.Second
	// ClientMemory is what the engine's CLI, the unit's own process, may use on top of the
	// container's memory: the unit's MemoryMax is the container's limit plus this.
	ClientMemory = 64 << 20
)

// Options configure a Manager.
type Options struct {
	Engine engine.Engine
	// Info describes the engine (its Name is the kind, its Socket the URI the CLI uses);
	// InfoFunc, when set, is asked instead at every Start, as in runner.Config.
	Info     engine.Info
	InfoFunc func() engine.Info
	Layout   groupfolder.Layout
	Instance string          // engine.LabelInstance of this daemon's containers
	Rlimits  []engine.Rlimit // default engine.DefaultRlimits()
	// Networks are the named networks a sidecar may join (limits.allowed_networks).
	Networks []string
	// Mode forces a mode; empty detects it (see New).
	Mode Mode
	// CLI is the engine's command-line tool that transient units run; empty looks up
	// "podman" or "docker", after the engine's kind, in PATH.
	CLI string
	// EnvDir holds the env files and container ID files of running sidecars (mode 0700,
	// never mounted); default DataDir/sidecar-env.
	EnvDir       string
	StartTimeout time.Duration // how long a sidecar's socket may take to answer
	StopGrace    time.Duration // between SIGTERM and SIGKILL when a sidecar stops
	Logger       *slog.Logger
	// Secret, when set, hears each value of a sidecar's env (named sidecar:NAME:VAR)
	// before the sidecar starts: they may be credentials, which the daemon redacts.
	Secret func(name, value string)
}

// Manager starts and stops the sidecars of turns. It is safe for concurrent use.
type Manager struct {
	o   Options
	sd  *manager // nil: the engine runs every sidecar
	log *slog.Logger

	mu   sync.Mutex
	down bool // the last sidecar ran on the engine for want of a transient unit
}

// New returns a Manager. With Options.Mode empty it uses the systemd manager target
// chooses: the system's for root in a system service, else the user's own (for the
// packaged service, the lingering arizuko user's). While that one does not answer (or no
// engine CLI is there), sidecars run on the engine, which is logged once with the reason
// and again when units work; each turn asks the manager anew, so a daemon started before
// the user manager (at boot) gets units once it answers. A forced systemd mode that does
// not answer at New is an error.
func New(ctx context.Context, o Options) (*Manager, error) {
	switch {
	case o.Engine == nil:
		return nil, errors.New("sidecar manager: no engine")
	case o.Instance == "":
		return nil, errors.New("sidecar manager: no instance label")
	case o.Layout.DataDir == "":
		return nil, errors.New("sidecar manager: no data directory")
	}
	if o.Rlimits == nil {
		o.Rlimits = engine.DefaultRlimits()
	}
	if o.EnvDir == "" {
		o.EnvDir = filepath.Join(o.Layout.DataDir, "sidecar-env")
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	m := &Manager{o: o, log: o.Logger}
	if m.log == nil {
		m.log = slog.Default()
	}
	switch o.Mode {
	case "":
		mode, rt := detect()
		m.sd = &manager{mode: mode, runtimeDir: rt, getenv: os.Getenv}
		if _, err := m.sd.get(ctx); err != nil {
			m.onEngine(err)
		}
	case ModeSystemdUser, ModeSystemdSystem:
		sd := &manager{mode: o.Mode, getenv: os.Getenv}
		if o.Mode == ModeSystemdUser {
			sd.runtimeDir = os.Getenv("XDG_RUNTIME_DIR")
		}
		if _, err := sd.get(ctx); err != nil {
			return nil, err
		}
		m.sd = sd
	case ModeEngine:
	default:
		return nil, fmt.Errorf("sidecar manager: mode %q: want %s, %s or %s", o.Mode, ModeSystemdUser, ModeSystemdSystem, ModeEngine)
	}
	return m, nil
}

// Mode says where the next sidecar runs, as far as the last one tells.
func (m *Manager) Mode() Mode {
	if m.sd == nil {
		return ModeEngine
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return ModeEngine
	}
	return m.sd.mode
}

// onEngine notes that no transient unit could run a sidecar, for reason: it runs on the
// engine. Logged at the first of a row only.
func (m *Manager) onEngine(reason error) {
	m.mu.Lock()
	first := !m.down
	m.down = true
	m.mu.Unlock()
	if first {
		m.log.Warn("sidecars run on the engine, not as transient units, until the systemd manager serves them", "manager", m.sd.mode, "reason", reason)
	}
}

// onUnits notes that a transient unit ran a sidecar; logged when the engine ran the last.
func (m *Manager) onUnits() {
	m.mu.Lock()
	was := m.down
	m.down = false
	m.mu.Unlock()
	if was {
		m.log.Info("sidecars run as transient units again", "manager", m.sd.mode)
	}
}

// Close drops the D-Bus connection.
func (m *Manager) Close() {
	if m.sd != nil {
		m.sd.close()
	}
}

// Probe says where a Manager made now would run sidecars, and why: for `arizukod doctor`.
// service asks as a systemd service would (INVOCATION_ID set), whether this process is one
// or not: `runuser -u arizuko arizukod doctor` for the packaged service.
func Probe(ctx context.Context, service bool) (Mode, string) {
	want, rt := target(service || os.Getenv("INVOCATION_ID") != "", os.Getenv("XDG_RUNTIME_DIR"), os.Geteuid())
	c, err := dial(ctx, want, rt, os.Getenv)
	if err != nil {
		return ModeEngine, err.Error()
	}
	defer c.Close()
	var clis []string
	for _, k := range []string{kindPodman, kindDocker} {
		if p, err := exec.LookPath(k); err == nil {
			clis = append(clis, p)
		}
	}
	if len(clis) == 0 {
		return ModeEngine, fmt.Sprintf("the %s manager answers, but no podman or docker CLI is in PATH for its units", want)
	}
	where := "the system manager"
	if want == ModeSystemdUser {
		where = fmt.Sprintf("the user manager of uid %d (%s)", os.Geteuid(), rt)
	}
	return want, "transient units of " + where + ", run by " + strings.Join(clis, " or ")
}

func (m *Manager) info() engine.Info {
	if m.o.InfoFunc != nil {
		return m.o.InfoFunc()
	}
	return m.o.Info
}

// Handle is the sidecars of one turn.
type Handle struct {
	m       *Manager
	running []*running
}

// running is one started sidecar.
type running struct {
	u       *Unit
	unit    bool   // a transient unit runs it; else the engine does
	id      string // the engine's container id, when the engine runs it
	envFile string
	cidFile string // where the unit's engine CLI writes the container's id
}

// Names are the names of the running sidecars, in config order: session.Options.Sidecars.
func (h *Handle) Names() []string {
	var out []string
	for _, r := range h.running {
		out = append(out, r.u.Name)
	}
	return out
}

// Start starts the sidecars of a turn of f, one after the other, each until its socket
// answers. When one fails, those already started are stopped and the error (ErrStart,
// with what the sidecar logged last) fails the turn. No sidecars is a Handle with none.
// socketDir is f's sidecar socket directory, as Layout.Ensure made it for the turn;
// runtime is the OCI runtime of the group's turns ("" for the engine's default), which
// its sidecars run under too.
func (m *Manager) Start(ctx context.Context, f groupfolder.Folder, socketDir, runID, runtime string, cs []Config) (*Handle, error) {
	h := &Handle{m: m}
	if len(cs) == 0 {
		return h, nil
	}
	if err := Validate(cs, m.o.Networks); err != nil {
		return nil, err
	}
	info := m.info()
	if err := info.CheckRuntime(runtime); err != nil {
		return nil, fmt.Errorf("%w: sidecars of %s: %w", ErrStart, f, err)
	}
	user := ""
	if !info.Rootless {
		user = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	}
	for _, c := range cs {
		u, err := NewUnit(f, c, UnitOptions{Instance: m.o.Instance, RunID: runID, SocketDir: socketDir, User: user, Rlimits: m.o.Rlimits, Networks: m.o.Networks, Runtime: runtime})
		if err != nil {
			return nil, errors.Join(err, h.Stop(ctx))
		}
		if m.o.Secret != nil {
			for k, v := range u.Env {
				m.o.Secret("sidecar:"+u.Name+":"+k, v)
			}
		}
		r, err := m.start(ctx, u, info, runID)
		if err != nil {
			return nil, errors.Join(err, h.Stop(ctx))
		}
		h.running = append(h.running, r)
	}
	return h, nil
}

// start starts one sidecar: as a transient unit when a systemd manager serves it and the
// engine's CLI is there, else on the engine.
func (m *Manager) start(ctx context.Context, u *Unit, info engine.Info, runID string) (*running, error) {
	log := m.log.With(logging.FieldFolder, u.Folder, logging.FieldRunID, runID, "sidecar", u.Name)
	if err := removeSocket(u.Socket()); err != nil {
		return nil, fmt.Errorf("sidecar %s: stale socket: %w", u.Name, err)
	}
	if m.sd != nil {
		cli, err := m.cli(info.Name)
		var r *running
		if err == nil {
			r, err = m.startUnitWhenNameFree(ctx, u, info, cli)
		}
		if err == nil {
			m.onUnits()
			log.Info("sidecar started", "unit", u.Service, "mode", m.sd.mode)
			return r, nil
		}
		if !unavailable(err) {
			return nil, err
		}
		m.onEngine(err)
	}
	r, err := m.startContainer(ctx, u)
	if err == nil {
		log.Info("sidecar started", logging.FieldContainer, u.Container.ContainerName, "mode", ModeEngine)
	}
	return r, err
}

// cli is the absolute path of the engine's CLI.
func (m *Manager) cli(kind string) (string, error) {
	if kind != kindPodman && kind != kindDocker {
		return "", fmt.Errorf("%w: engine kind %q is unknown yet", errNoCLI, kind)
	}
	p := m.o.CLI
	if p == "" {
		var err error
		if p, err = exec.LookPath(kind); err != nil {
			return "", fmt.Errorf("%w: %v", errNoCLI, err)
		}
	}
	return filepath.Abs(p)
}

// startUnitWhenNameFree is startUnit, again while the engine CLI's `run` fails for the
// container's name, for at most nameWait: a container removed just before (an earlier
// turn's, a killed daemon's) may hold its name a little longer than the engine lists it.
// A failed start stops its unit and removes what it made, so each try begins clean.
func (m *Manager) startUnitWhenNameFree(ctx context.Context, u *Unit, info engine.Info, cli string) (*running, error) {
	deadline := time.Now().Add(nameWait)
	for {
		r, err := m.startUnit(ctx, u, info, cli)
		if err == nil || !engine.NameInUse(err.Error()) || time.Now().After(deadline) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startUnit runs u as a transient unit whose main process is the engine CLI's `run`.
func (m *Manager) startUnit(ctx context.Context, u *Unit, info engine.Info, cli string) (*running, error) {
	name := u.Container.ContainerName
	// What a crash of an earlier daemon of this instance may have left under the names.
	state, desc, err := m.sd.unitState(ctx, u.Service)
	if err != nil {
		return nil, fmt.Errorf("sidecar %s: %w", u.Name, err)
	}
	if state != "gone" {
		if !strings.HasSuffix(desc, " "+instanceMark(m.o.Instance)) {
			return nil, fmt.Errorf("%w: %s: unit %s exists and is not this arizukod's (%s)", ErrStart, u.Name, u.Service, desc)
		}
		if err := m.sd.stopUnit(ctx, u.Service); err != nil {
			return nil, fmt.Errorf("sidecar %s: %w", u.Name, err)
		}
	}
	if err := m.removeLeftover(ctx, name); err != nil {
		return nil, fmt.Errorf("sidecar %s: %w", u.Name, err)
	}
	r := &running{u: u, unit: true}
	if r.cidFile, err = m.cidFile(u); err != nil {
		return nil, err
	}
	if len(u.Env) > 0 {
		if r.envFile, err = m.writeEnvFile(u); err != nil {
			return nil, err
		}
	}
	argv, err := u.CommandLine(info.Name, cli, info.Socket, r.envFile, r.cidFile)
	if err != nil {
		removeFile(r.envFile)
		return nil, err
	}
	props := []sddbus.Property{
		sddbus.PropDescription(u.Container.Description),
		sddbus.PropType("exec"),
		execProperty("ExecStart", argv, false),
		execProperty("ExecStop", stopCommand(info.Name, cli, info.Socket, r.cidFile, m.o.StopGrace), true),
		execProperty("ExecStopPost", removeCommand(info.Name, cli, info.Socket, r.cidFile), true),
		property("KillMode", "mixed"),
		property("TimeoutStopUSec", uint64((m.o.StopGrace+10*time.Second)/time.Microsecond)),
		property("CollectMode", "inactive-or-failed"),
		property("MemoryMax", uint64(u.MemoryBytes+ClientMemory)),
		property("CPUQuotaPerSecUSec", uint64(u.NanoCPUs/1000)),
		property("SyslogIdentifier", name),
	}
	if home := os.Getenv("HOME"); home != "" {
		props = append(props, property("Environment", []string{"HOME=" + home}))
	}
	if m.sd.mode == ModeSystemdSystem && os.Geteuid() != 0 {
		// The system manager would run the CLI as root; it runs as the daemon's user.
		props = append(props, property("User", strconv.Itoa(os.Geteuid())), property("Group", strconv.Itoa(os.Getegid())))
	}
	started := time.Now()
	if err := m.sd.startUnit(ctx, u.Service, props); err != nil {
		m.stop(ctx, r)
		if accessDenied(err) {
			return nil, fmt.Errorf("%w: %v", errDenied, err)
		}
		return nil, fmt.Errorf("%w: %s (unit %s): %v\n%s", ErrStart, u.Name, u.Service, err, journalTail(ctx, m.sd.mode, u.Service, "", started))
	}
	invocation := m.sd.invocation(ctx, u.Service)
	err = m.waitSocket(ctx, u, func(ctx context.Context) (string, error) {
		state, _, err := m.sd.unitState(ctx, u.Service)
		if err == nil && state != "active" && state != "activating" && state != "reloading" {
			err = fmt.Errorf("the unit is %s", state)
		}
		return state, err
	})
	if err != nil {
		m.stop(ctx, r)
		return nil, fmt.Errorf("%w: %s (unit %s): %v; its last log lines:\n%s", ErrStart, u.Name, u.Service, err, journalTail(ctx, m.sd.mode, u.Service, invocation, started))
	}
	return r, nil
}

// startContainer runs u on the engine directly, with the unit's container.
func (m *Manager) startContainer(ctx context.Context, u *Unit) (*running, error) {
	spec, err := u.Spec()
	if err != nil {
		return nil, err
	}
	e := m.o.Engine
	id, err := m.create(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: create %s: %v", ErrStart, u.Name, spec.Name, err)
	}
	r := &running{u: u, id: id}
	if err := e.Start(ctx, id); err != nil {
		m.stop(ctx, r)
		return nil, fmt.Errorf("%w: %s: start %s: %v", ErrStart, u.Name, spec.Name, err)
	}
	err = m.waitSocket(ctx, u, func(ctx context.Context) (string, error) {
		st, err := e.Inspect(ctx, id)
		if err == nil && !st.Running {
			err = fmt.Errorf("the container %s (exit %d)", st.Status, st.ExitCode)
		}
		return st.Status, err
	})
	if err != nil {
		logs := containerTail(ctx, e, id)
		m.stop(ctx, r)
		return nil, fmt.Errorf("%w: %s (container %s): %v; its last log lines:\n%s", ErrStart, u.Name, spec.Name, err, logs)
	}
	return r, nil
}

// waitSocket waits until u's socket accepts a connection, while alive says the sidecar
// still runs, for at most StartTimeout.
func (m *Manager) waitSocket(ctx context.Context, u *Unit, alive func(context.Context) (string, error)) error {
	deadline := time.Now().Add(m.o.StartTimeout)
	for {
		if c, err := dialSocket(ctx, u.Socket()); err == nil {
			c.Close()
			return nil
		}
		if _, err := alive(ctx); err != nil {
			return fmt.Errorf("it stopped before its socket answered: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("its socket %s did not answer within %s", u.Socket(), m.o.StartTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// create creates the sidecar's container after removing a leftover of the same name. A
// container removed just before (an earlier turn's, a stopping daemon's) may hold the
// name a little longer than it is listed (Podman frees it in its storage last): the
// create is tried again until the name is free, for at most nameWait.
func (m *Manager) create(ctx context.Context, spec engine.Spec) (string, error) {
	deadline := time.Now().Add(nameWait)
	for {
		if err := m.removeLeftover(ctx, spec.Name); err != nil {
			return "", err
		}
		id, err := m.o.Engine.Create(ctx, spec)
		if !errors.Is(err, engine.ErrNameInUse) || time.Now().After(deadline) {
			if err != nil {
				err = m.info().CreateError(spec, err)
			}
			return id, err
		}
		select {
		case <-ctx.Done():
			return "", err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// nameWait bounds how long a sidecar's create waits for its name to be freed.
const nameWait = 10 * time.Second

// removeLeftover removes the container named name if it carries this instance's label,
// by its ID: what a crash or a unit's stop left. A container of that name that is not
// this instance's is never touched.
func (m *Manager) removeLeftover(ctx context.Context, name string) error {
	list, err := m.o.Engine.List(ctx, map[string]string{engine.LabelInstance: m.o.Instance, engine.LabelRole: RoleSidecar})
	if err != nil {
		return fmt.Errorf("list leftover containers: %w", err)
	}
	for _, c := range list {
		if strings.TrimPrefix(c.Name, "/") == name && c.Labels[engine.LabelInstance] == m.o.Instance {
			if err := m.o.Engine.Remove(ctx, c.ID); err != nil {
				return fmt.Errorf("remove leftover container %s: %w", name, err)
			}
		}
	}
	return nil
}

// containerTail is the last lines a container printed, for an error.
func containerTail(ctx context.Context, e engine.Engine, id string) string {
	var b strings.Builder
	if err := e.Logs(ctx, id, &b, &b); err != nil && b.Len() == 0 {
		return fmt.Sprintf("(no logs: %v)", err)
	}
	lines := strings.Split(strings.TrimSpace(strings.ToValidUTF8(b.String(), "?")), "\n")
	return strings.Join(lines[max(0, len(lines)-journalLines):], "\n")
}

// Stop stops the turn's sidecars, last started first: each unit's stop job (which stops
// its container with grace), then removal of the container, its socket and env file.
// It goes on when ctx is cancelled, bounded by the stop grace, so that a killed turn
// leaves nothing running.
func (h *Handle) Stop(ctx context.Context) error {
	var errs []error
	for i := len(h.running) - 1; i >= 0; i-- {
		errs = append(errs, h.m.stop(ctx, h.running[i]))
	}
	h.running = nil
	return errors.Join(errs...)
}

func (m *Manager) stop(ctx context.Context, r *running) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.o.StopGrace+30*time.Second)
	defer cancel()
	var errs []error
	if r.unit {
		errs = append(errs, m.sd.stopUnit(ctx, r.u.Service))
		errs = append(errs, m.removeLeftover(ctx, r.u.Container.ContainerName))
	} else {
		if err := m.o.Engine.Stop(ctx, r.id, m.o.StopGrace); err != nil && !errors.Is(err, engine.ErrNoSuchContainer) {
			errs = append(errs, err)
		}
		errs = append(errs, m.o.Engine.Remove(ctx, r.id))
	}
	errs = append(errs, removeFile(r.envFile), removeFile(r.cidFile), removeSocket(r.u.Socket()))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop sidecar %s of %s: %w", r.u.Name, r.u.Folder, err)
	}
	return nil
}

// Cleanup stops what a killed daemon of this instance left: the sidecar units whose
// description carries its instance, and the containers labelled role=sidecar of it, and
// removes the env and container id files. It returns the units and containers it
// stopped. Call it before the first turn.
func (m *Manager) Cleanup(ctx context.Context) ([]string, error) {
	var done []string
	var errs []error
	if m.sd != nil {
		// Every sidecar's units, not only those named for this instance (NamePrefix): the
		// description says whose a unit is, also one named before names carried the tag.
		units, err := m.sd.listUnits(ctx, namePrefix+"*.service")
		switch {
		case errors.Is(err, ErrNoSystemd):
			// No manager answers, so none of its units can be stopped; New logged why.
		case err != nil:
			errs = append(errs, fmt.Errorf("list sidecar units: %w", err))
		}
		for _, u := range units {
			if !strings.HasSuffix(u.Description, " "+instanceMark(m.o.Instance)) || u.ActiveState == "inactive" {
				continue
			}
			if err := m.sd.stopUnit(ctx, u.Name); err != nil {
				errs = append(errs, err)
				continue
			}
			m.log.Info("stopped leftover sidecar unit", "unit", u.Name)
			done = append(done, u.Name)
		}
	}
	list, err := m.o.Engine.List(ctx, map[string]string{engine.LabelInstance: m.o.Instance, engine.LabelRole: RoleSidecar})
	if err != nil {
		errs = append(errs, fmt.Errorf("list sidecar containers: %w", err))
	}
	for _, c := range list {
		if c.Labels[engine.LabelInstance] != m.o.Instance || c.Labels[engine.LabelRole] != RoleSidecar {
			continue
		}
		if err := m.o.Engine.Remove(ctx, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("remove leftover sidecar %s: %w", c.Name, err))
			continue
		}
		m.log.Info("removed leftover sidecar container", logging.FieldContainer, c.Name, logging.FieldFolder, c.Labels[engine.LabelFolder])
		done = append(done, c.Name)
	}
	entries, err := os.ReadDir(m.o.EnvDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		errs = append(errs, removeFile(filepath.Join(m.o.EnvDir, e.Name())))
	}
	return done, errors.Join(errs...)
}

// writeEnvFile writes u.Env into EnvDir/<unit>.env, mode 0600, atomically.
func (m *Manager) writeEnvFile(u *Unit) (string, error) {
	if err := m.ensureEnvDir(); err != nil {
		return "", err
	}
	path := filepath.Join(m.o.EnvDir, strings.TrimSuffix(u.Service, ".service")+".env")
	return path, atomicfile.Write(path, EnvFile(u.Env), 0o600)
}

// cidFile is EnvDir/<unit>.cid, where u's run writes its container's id, removed if a
// killed daemon's run left it (the run refuses a file that exists): the unit of the name
// is stopped and its container removed by then.
func (m *Manager) cidFile(u *Unit) (string, error) {
	if err := m.ensureEnvDir(); err != nil {
		return "", err
	}
	path := filepath.Join(m.o.EnvDir, strings.TrimSuffix(u.Service, ".service")+".cid")
	if err := removeFile(path); err != nil {
		return "", fmt.Errorf("sidecar %s: stale container id file: %w", u.Name, err)
	}
	return path, nil
}

// ensureEnvDir makes EnvDir, mode 0700, and checks that it is one.
func (m *Manager) ensureEnvDir() error {
	if err := os.Mkdir(m.o.EnvDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("sidecar env directory: %w", err)
	}
	if fi, err := os.Lstat(m.o.EnvDir); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("sidecar env directory %s: must be a directory of mode 0700", m.o.EnvDir)
	}
	return nil
}

func removeFile(p string) error {
	if p == "" {
		return nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// A sidecar's socket is in the group's sidecar socket directory, ipc/<slug>/sidecars/,
// which the agent can write: it is reached through the IPC directory's descriptor
// (agentdir), so a link the agent planted (for sidecars/ or the socket's name) is never
// followed.
func socketIn(path string) (*agentdir.Dir, string, error) {
	sockets := filepath.Dir(path)
	ipc, err := agentdir.Open(filepath.Dir(sockets))
	if err != nil {
		return nil, "", err
	}
	return ipc, filepath.Base(sockets) + "/" + filepath.Base(path), nil
}

// removeSocket removes a sidecar's socket, or the link or file an agent put in its place.
func removeSocket(path string) error {
	ipc, rel, err := socketIn(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer ipc.Close()
	if err := ipc.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// dialSocket connects to a sidecar's socket, within a second: only to the socket file
// itself, never through a link to another socket of the host.
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
	ipc, rel, err := socketIn(path)
	if err != nil {
		return nil, err
	}
	defer ipc.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return ipc.Dial(ctx, rel)
}
