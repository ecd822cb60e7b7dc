package daemon

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"

	"github.com/arizuko/arizukod/assembly"
	"github.com/arizuko/arizukod/delivery"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/turn"
)

// pushers runs the webhook pusher of the current configuration until the daemon's context
// ends; a reload that changes the webhooks or [delivery] starts another in its place.
type pushers struct {
	ctx  context.Context
	mu   sync.Mutex
	stop context.CancelFunc // the running pusher's
	wg   sync.WaitGroup
}

// start runs p in place of the running pusher, which stops: a push under way finishes and
// is acked, the rows it leased but did not try go back to the stream.
func (s *pushers) start(p *delivery.Pusher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		s.stop()
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.stop = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		p.Run(ctx)
	}()
}

// wait waits until every pusher started ended (after the daemon's context did).
func (s *pushers) wait() { s.wg.Wait() }

// currentBuilder runs each turn with the builder of the latest configuration.
type currentBuilder func() *turn.Builder

func (b currentBuilder) Run(ctx context.Context, req turn.Request, r turn.Runner, w turn.Watch) (runner.Result, error) {
	return b().Run(ctx, req, r, w)
}

func (b currentBuilder) Prepare(ctx context.Context, f groupfolder.Folder, r turn.Preparer) error {
	return b().Prepare(ctx, f, r)
}

// reloadOnHUP reloads at each SIGHUP until ctx ends.
func (d *Daemon) reloadOnHUP(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			d.reload(ctx)
		}
	}
}

// reload re-reads the configuration, and with it the mount allowlist, the env file, the
// model credential, the groups' credentials and the webhooks' secrets (assembly's Reload),
// and applies them to the turns that start from now on (running and queued turns go on),
// to the outbox stream and to the webhooks, whose pusher starts again when they or
// [delivery] changed. A configuration that does not load, an allowlist, env file or
// webhook secret that does not read, is refused whole: the previous one stays, and the
// journal and STATUS say why (STATUS until a reload works).
// Grants need no reload: they are read from the store at every call.
func (d *Daemon) reload(ctx context.Context) {
	daemon.SdNotify(false, fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", monotonicUsec()))
	defer daemon.SdNotify(false, daemon.SdNotifyReady)
	if d.opts.load == nil {
		d.log.Warn("reload: not available: this daemon was started without its configuration's path; restart it instead")
		return
	}
	ch, err := d.apply(ctx)
	if err != nil {
		why := err.Error()
		d.refused.Store(&why)
		d.log.Error("reload refused: the previous configuration stays", "err", err)
		d.notifyStatus()
		return
	}
	d.refused.Store(nil)
	for _, k := range ch.Restart {
		d.log.Warn("reload: "+k+" changed: it takes effect at the next restart (systemctl restart arizukod)", "key", k)
	}
	d.log.Info("configuration reloaded", "config", d.sys.Load().Config.Source, "changed", ch.Applied)
	d.notifyStatus()
}

// apply loads the configuration and the next System over it, and only when all of it
// loaded, switches to it.
func (d *Daemon) apply(ctx context.Context) (assembly.Changes, error) {
	cfg, err := d.opts.load()
	if err != nil {
		return assembly.Changes{}, err
	}
	next, ch, err := d.sys.Load().Reload(ctx, cfg)
	if err != nil {
		return assembly.Changes{}, err
	}
	d.sys.Store(next)
	if slices.Contains(ch.Applied, "webhook") || slices.Contains(ch.Applied, "delivery") {
		d.api.SetDelivery(next.LeasePolicy())
		d.pushers.start(next.Pusher)
	}
	return ch, nil
}

// monotonicUsec is CLOCK_MONOTONIC in microseconds, as RELOADING=1 wants it beside.
func monotonicUsec() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return time.Now().UnixMicro()
	}
	return ts.Sec*1e6 + ts.Nsec/1e3
}
