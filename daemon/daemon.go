// Package daemon is `arizukod serve`: over the turn machinery assembly builds from the
// configuration (store, engine, runner, turn builder), it runs the queue, the scheduler
// and the API, listens (socket-activated or on its own socket),
// tells systemd how it is doing over sd_notify, watches the engine, and stops gracefully by
// detaching from running turns. It owns the lifecycle and nothing else: every decision
// about a turn lives in the packages it wires.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
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
	"github.com/arizuko/arizukod/assembly"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/metrics"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/pricing"
	"github.com/arizuko/arizukod/queue"
	"github.com/arizuko/arizukod/retention"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/scheduler"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/tracing"
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

	// sys is the turn machinery of the latest configuration, which a reload (SIGHUP)
	// replaces; turns in flight keep what they started with.
	sys     atomic.Pointer[assembly.System]
	api     *api.Server
	pushers *pushers
	tracer  *tracing.Tracer        // the turns' traces' exporter; nil when tracing is off
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
	d := &Daemon{cfg: cfg, version: version, answered: make(chan struct{})}
	for _, o := range opts {
		o(&d.opts)
	}
	met, err := d.assemble(ctx, log)
	if err != nil {
		return err
	}
	defer d.sys.Load().Close()
	defer stopTracing(d.tracer, d.log)
	l, activated, err := listen(passed, cfg.Listen, cfg.SocketMode, cfg.AllowGroup)
	if err != nil {
		return err
	}
	srv, pl, err := d.server(ctx, l, met)
	if err != nil {
		l.Close()
		return err
	}
	if err := d.startRelay(ctx); err != nil {
		l.Close()
		return err
	}
	d.log.Info("arizukod listening", "socket", l.Addr().String(), "socket_activated", activated, "data_dir", cfg.DataDir, "config", cfg.Source,
		"engine_from", d.sys.Load().EngineChoice.Source())
	d.serve(ctx, srv, pl, hup)
	if !activated {
		os.Remove(cfg.Listen)
	}
	return nil
}

// assemble builds the turn machinery of the configuration (assembly) and the queue over
// it, and starts asking the engine.
func (d *Daemon) assemble(ctx context.Context, log *slog.Logger) (*metrics.Metrics, error) {
	cfg := d.cfg
	var met *metrics.Metrics // made once the log is: turns, which hear usage, start after
	sys, err := assembly.New(ctx, cfg, assembly.Options{Mode: assembly.Serve, Logger: log, InfoFunc: d.engineInfo,
		OnUsage: func(u gateway.Usage) { met.ModelUsage(usageMetrics(u)) },
		OnCost: func(f groupfolder.Folder, model string, c pricing.Cost) {
			met.ModelCost(string(f), model, int64(c.Micros), c.Known())
		}})
	if err != nil {
		return nil, err
	}
	if d.tracer, err = startTracing(ctx, cfg, d.version, sys.Logger); err != nil {
		sys.Close()
		return nil, err
	}
	// The builder of every later reload is a copy of this one, and keeps its tracer.
	sys.Builder.Tracer = d.tracer
	d.sys.Store(sys)
	d.log, d.layout, d.engine, d.store, d.runner = sys.Logger, sys.Layout, sys.Engine, sys.Store, sys.Runner
	met = newMetrics(d)
	// The engine's first answer, all the first /health waits for, is on its way meanwhile.
	d.pingAhead(ctx)
	if errors.Is(sys.Builder.AllowlistErr, mountsec.ErrNoAllowlist) {
		d.log.Info("no mount allowlist: groups get no additional mounts", "path", cfg.Allowlist)
	}
	d.log.Info("sidecars run as " + string(sys.Sidecars.Mode()))
	d.queue, err = queue.New(queue.Config{
		Store: meteredStore{d.store, met}, Runner: d.runner, Turns: currentBuilder(func() *turn.Builder { return d.sys.Load().Builder }),
		EngineUp: d.up, CheckEngine: d.checkEngine, MaxRunning: cfg.MaxRunning, RetryMax: cfg.RetryMax, RetryBackoff: cfg.RetryBackoff,
		Prepare: cfg.Prepared, Logger: d.log, OnChange: d.notifyStatus,
	})
	if err != nil {
		sys.Close()
		return nil, err
	}
	return met, nil
}

// server is the API, with the listener that checks its callers' peers on l, and the
// metrics listener when [metrics] listen names one.
func (d *Daemon) server(ctx context.Context, l net.Listener, met *metrics.Metrics) (*http.Server, net.Listener, error) {
	cfg, sys := d.cfg, d.sys.Load()
	pl, err := newPeerListener(l, cfg.AllowGroup, d.log)
	if err != nil {
		return nil, nil, err
	}
	handler := api.New(d.store, d.queue, d, d.log)
	handler.Networks, handler.Runtimes, handler.Location, handler.Layout = cfg.Limits.AllowedNetworks, cfg.Limits.AllowedRuntimes, cfg.Location, d.layout
	handler.SetDelivery(sys.LeasePolicy())
	handler.Metrics, handler.Upkeep = met, d
	handler.Prices = func() pricing.Table { return d.sys.Load().Model.Prices() }
	handler.Projects = projects{func() *turn.Builder { return d.sys.Load().Builder }}
	handler.Warm = d.warmAgents
	d.api = handler
	if cfg.Metrics.Listen != "" {
		if _, err := met.Serve(ctx, cfg.Metrics.Listen); err != nil {
			return nil, nil, err
		}
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(handler.Close)
	return srv, pl, nil
}

// serve runs the queue, the scheduler, the webhooks' pusher, the watches, the reloads on
// hup and srv on l until ctx ends (or srv stops), then stops them: running turns are
// detached.
func (d *Daemon) serve(ctx context.Context, srv *http.Server, l net.Listener, hup <-chan os.Signal) {
	sys, log := d.sys.Load(), d.log
	sched := scheduler.New(scheduler.Config{Store: d.store, Location: d.cfg.Location, Wake: d.queue.Wake, Logger: log})
	var wg sync.WaitGroup
	qctx, stopQueue := context.WithCancel(context.WithoutCancel(ctx))
	d.pushers = &pushers{ctx: ctx}
	d.pushers.start(sys.Pusher)
	wg.Add(9)
	go func() { defer wg.Done(); d.runner.WatchMemory(qctx, 5*time.Second) }()
	go func() { defer wg.Done(); d.clearSidecars(ctx, sys.Sidecars) }()
	go func() { defer wg.Done(); d.runner.WatchImages(qctx) }()
	go func() { defer wg.Done(); d.watchEngine(ctx) }()
	go func() { defer wg.Done(); d.reloadOnHUP(ctx, hup) }()
	go func() {
		defer wg.Done()
		retention.Run(ctx, d.store, d.layout, func() config.Retention { return d.sys.Load().Config.Retention }, log)
	}()
	go func() { defer wg.Done(); sched.Run(ctx) }()
	go func() { defer wg.Done(); d.queue.Run(qctx) }()
	go func() { defer wg.Done(); d.watchdog(ctx) }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(l) }()

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
