// Package daemon is `arizukod serve`: it wires the configuration, the store, the engine, the
// runner, the queue and the API together, listens (socket-activated or on its own socket),
// tells systemd how it is doing over sd_notify, watches the engine, and stops gracefully by
// detaching from running turns. It owns the lifecycle and nothing else: every decision
// about a turn lives in the packages it wires.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/delivery"
	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/queue"
	"github.com/arizuko/arizukod/retention"
	"github.com/arizuko/arizukod/runtime/detect"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/scheduler"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// Daemon is one running arizukod.
type Daemon struct {
	cfg     *config.Config // as started: what only a restart changes is read here
	log     *slog.Logger
	version string
	store   *store.Store
	engine  engine.Engine
	queue   *queue.Queue
	runner  *runner.Runner
	layout  groupfolder.Layout
	opts    options

	// What a reload (SIGHUP) replaces; turns in flight keep what they started with.
	live    atomic.Pointer[config.Config]
	secrets secretSet     // the filter of every text stored or logged (redact)
	sources secretSources // the secrets the last (re)load read; the reload's goroutine's
	builder atomic.Pointer[turn.Builder]
	gateway atomic.Pointer[turn.ModelGateway]
	api     *api.Server
	pushers *pushers
	pruning sync.Mutex             // one pruning at a time
	refused atomic.Pointer[string] // why the last reload was refused; nil after one that worked

	mu        sync.Mutex
	info      engine.Info
	engineUp  bool
	engErr    string
	checkedAt time.Time // the last check of the engine
	infoKnown bool      // info is the answering engine's, asked since it last came back
	infoBusy  bool      // an Info call is under way
	cleared   bool      // a killed daemon's sidecars are stopped (clearSidecars)

	checking   *engineCheck  // the ping under way (under mu): others take its answer
	answered   chan struct{} // closed when the engine first answers a ping
	answerOnce sync.Once
}

// Option is an optional part of Run.
type Option func(*options)

type options struct {
	load func() (*config.Config, error)
}

// WithReload makes SIGHUP re-read the configuration with load (as the daemon was started)
// and apply what can change while turns run; without it SIGHUP only says so.
func WithReload(load func() (*config.Config, error)) Option {
	return func(o *options) { o.load = load }
}

// Run serves until ctx ends, then stops gracefully: running turns are detached, the store
// is closed, STOPPING=1 is sent.
func Run(ctx context.Context, cfg *config.Config, version string, log *slog.Logger, opts ...Option) error {
	// First of all: taking systemd's sockets removes LISTEN_* from the environment, before
	// any child (git, for the env file) could inherit them.
	passed, err := activation.Listeners()
	if err != nil {
		return fmt.Errorf("socket activation: %w", err)
	}
	// SIGHUP would end the process until it is caught: caught from the start, it reloads
	// once the daemon serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	d := &Daemon{cfg: cfg, log: log, version: version, answered: make(chan struct{})}
	for _, o := range opts {
		o(&d.opts)
	}
	d.live.Store(cfg)
	layout, err := groupfolder.NewLayout(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	d.layout = layout
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	if d.engine, err = openEngine(cfg); err != nil {
		return err
	}
	// The engine's first answer, all the first /health waits for, is on its way meanwhile.
	d.pingAhead(ctx)
	allow, allowErr := mountsec.LoadAllowlist(cfg.Allowlist, mountsec.Options{Protected: []string{cfg.DataDir}})
	if allowErr != nil && !errors.Is(allowErr, mountsec.ErrNoAllowlist) {
		return allowErr
	}
	if errors.Is(allowErr, mountsec.ErrNoAllowlist) {
		log.Info("no mount allowlist: groups get no additional mounts", "path", cfg.Allowlist)
	}
	var skills fs.FS
	if fi, err := os.Stat(cfg.SkillsDir); err == nil && fi.IsDir() {
		skills = os.DirFS(cfg.SkillsDir)
	}
	model, err := turn.NewModelGateway(d.modelOptions(cfg), layout, log)
	if err != nil {
		return err
	}
	// Every secret known, wherever it came from (the env file, passed on or not, the model
	// credential, the groups' credentials; the webhooks' below), is redacted.
	if d.sources, err = loadSecrets(ctx, cfg, layout, model, nil); err != nil {
		return err
	}
	d.secrets.reload(d.sources.all())
	d.gateway.Store(model)
	// From here on no secret value reaches the journal or the store, whoever writes it:
	// an agent's answer, stderr line, outbox message or MCP call may echo one.
	log = slog.New(logging.Redacting(log.Handler(), d.redact))
	d.log = log
	dbPath, err := layout.StorePath()
	if err != nil {
		return err
	}
	if d.store, err = store.Open(ctx, dbPath, store.WithRedact(d.redact)); err != nil {
		return err
	}
	defer d.store.Close()
	d.runner, err = runner.New(runner.Config{
		Engine: d.engine, Layout: layout, Instance: cfg.Instance, Image: cfg.Image,
		Timeout: cfg.RunTimeout, StopGrace: cfg.StopGrace, SkillsDir: existingDir(cfg.SkillsDir),
		WebDir: existingDir(cfg.WebDir), Redact: d.redact, Logger: log,
		InfoFunc: d.engineInfo, Networks: cfg.Limits.AllowedNetworks, AllowUnlimited: cfg.Limits.AllowUnlimited,
		Prepared: cfg.Prepared,
	})
	if err != nil {
		return err
	}
	builder := &turn.Builder{
		Layout: layout, Store: d.store, Allowlist: allow, AllowlistErr: allowErr, Skills: skills,
		Location: cfg.Location, Networks: cfg.Limits.AllowedNetworks,
		Limits:   cfg.Limits.Limits,
		DiaryMax: cfg.Memory.DiaryMax, EpisodesMax: cfg.Memory.EpisodesMax, Logger: log,
	}
	tracer, err := startTracing(ctx, cfg, version, log)
	if err != nil {
		return err
	}
	defer stopTracing(tracer, log)
	builder.Tracer = tracer
	d.builder.Store(builder)
	sidecars, err := sidecar.New(ctx, sidecar.Options{Engine: d.engine, InfoFunc: d.engineInfo, Layout: layout,
		Instance: cfg.Instance, StopGrace: cfg.StopGrace, Networks: cfg.Limits.AllowedNetworks, Logger: log,
		Secret: d.secrets.learn})
	if err != nil {
		return err
	}
	defer sidecars.Close()
	log.Info("sidecars run as " + string(sidecars.Mode()))
	met := newMetrics(d)
	builder.Services = &turn.Services{Store: d.store, Sidecars: sidecars, Model: model, Location: cfg.Location, Logger: log,
		OnUsage: func(u gateway.Usage) { met.ModelUsage(usageMetrics(u)) }}
	d.queue, err = queue.New(queue.Config{
		Store: meteredStore{d.store, met}, Runner: d.runner, Turns: currentBuilder(d.builder.Load), EngineUp: d.up, CheckEngine: d.checkEngine,
		MaxRunning: cfg.MaxRunning, RetryMax: cfg.RetryMax, RetryBackoff: cfg.RetryBackoff,
		Prepare: cfg.Prepared, Logger: log, OnChange: d.notifyStatus,
	})
	if err != nil {
		return err
	}

	sched := scheduler.New(scheduler.Config{Store: d.store, Location: cfg.Location, Wake: d.queue.Wake, Logger: log})

	policy := leasePolicy(cfg)
	pusher, err := delivery.New(d.store, cfg.Webhooks, policy, log)
	if err != nil {
		return err
	}
	d.sources.webhooks = pusher.Secrets()
	d.secrets.reload(d.sources.all())

	l, activated, err := listen(passed, cfg.Listen, cfg.SocketMode, cfg.AllowGroup)
	if err != nil {
		return err
	}
	pl, err := newPeerListener(l, cfg.AllowGroup, log)
	if err != nil {
		l.Close()
		return err
	}
	handler := api.New(d.store, d.queue, d, log)
	handler.Networks = cfg.Limits.AllowedNetworks
	handler.Location = cfg.Location
	handler.Layout = layout
	handler.SetDelivery(policy)
	d.api = handler
	handler.Metrics = met
	handler.Upkeep = d
	if cfg.Metrics.Listen != "" {
		if _, err := met.Serve(ctx, cfg.Metrics.Listen); err != nil {
			l.Close()
			return err
		}
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(handler.Close)
	log.Info("arizukod listening", "socket", l.Addr().String(), "socket_activated", activated, "data_dir", cfg.DataDir, "config", cfg.Source)

	var wg sync.WaitGroup
	qctx, stopQueue := context.WithCancel(context.WithoutCancel(ctx))
	d.pushers = &pushers{ctx: ctx}
	d.pushers.start(pusher)
	wg.Add(8)
	go func() { defer wg.Done(); d.clearSidecars(ctx, sidecars) }()
	go func() { defer wg.Done(); d.runner.WatchImages(qctx) }()
	go func() { defer wg.Done(); d.watchEngine(ctx) }()
	go func() { defer wg.Done(); d.reloadOnHUP(ctx, hup) }()
	go func() {
		defer wg.Done()
		retention.Run(ctx, d.store, layout, func() config.Retention { return d.live.Load().Retention }, log)
	}()
	go func() { defer wg.Done(); sched.Run(ctx) }()
	go func() { defer wg.Done(); d.queue.Run(qctx) }()
	go func() { defer wg.Done(); d.watchdog(ctx) }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(pl) }()

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		log.Error("API server stopped", "err", err)
	}
	daemon.SdNotify(false, daemon.SdNotifyStopping)
	log.Info("arizukod stopping: running turns are detached and adopted at the next start")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	stopQueue()
	wg.Wait()
	d.pushers.wait()
	d.runner.Close()
	if !activated {
		os.Remove(cfg.Listen)
	}
	return nil
}

func existingDir(p string) string {
	if p == "" {
		return ""
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return p
	}
	return ""
}

func openEngine(cfg *config.Config) (engine.Engine, error) {
	if cfg.EngineSocket != "" {
		kind := cfg.Engine
		if kind == "" {
			kind = "podman"
		}
		return detect.Open(kind, cfg.EngineSocket)
	}
	return detect.New(cfg.Engine), nil
}

// watchEngine pings the engine: every 2 s while it is away or its details are not known
// yet, every 15 s while it answers. The first answer sends READY=1: the API answers and
// turns start as soon as the details (Info) follow. A check the queue asked for
// (checkEngine) counts as the latest, and one that finds the engine away brings the next
// check within 2 s.
func (d *Daemon) watchEngine(ctx context.Context) {
	ready := false
	for {
		d.mu.Lock()
		due := !d.engineUp || !d.infoKnown || time.Since(d.checkedAt) >= 15*time.Second
		d.mu.Unlock()
		if due && d.checkEngine(ctx) && !ready {
			ready = true
			daemon.SdNotify(false, daemon.SdNotifyReady)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// watchdog pings systemd at half the interval the unit asks for.
func (d *Daemon) watchdog(ctx context.Context) {
	every, err := daemon.SdWatchdogEnabled(false)
	if err != nil || every == 0 {
		return
	}
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			daemon.SdNotify(false, daemon.SdNotifyWatchdog)
		}
	}
}

func (d *Daemon) notifyStatus() {
	h := d.report(context.Background())
	eng := "engine unavailable: " + h.Engine.Error
	if h.Engine.Up {
		eng = fmt.Sprintf("%s %s", h.Engine.Name, h.Engine.Version)
		if h.Status == "degraded" {
			eng += "; turns refused: " + h.Engine.Limits
		}
	}
	if h.Model.Error != "" {
		eng += "; cannot reach a model: " + h.Model.Error
	}
	if why := d.refused.Load(); why != nil {
		eng += "; reload refused, running with the previous configuration: " + *why
	}
	daemon.SdNotify(false, fmt.Sprintf("STATUS=%d running, %d queued; %s", h.Running, h.Queued, eng))
}
