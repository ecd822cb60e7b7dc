package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/delivery"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// restartKeys are the keys a reload cannot apply: what the listening socket, the store, the
// engine connection, the runner, the queue and the scheduler were made with at the start.
// A reload that changes one says so and keeps the running value.
var restartKeys = []struct {
	key  string
	keep func(dst, src *config.Config) // dst's value becomes src's
	get  func(c *config.Config) any
}{
	{"data_dir", func(d, s *config.Config) { d.DataDir = s.DataDir }, func(c *config.Config) any { return c.DataDir }},
	{"listen", func(d, s *config.Config) { d.Listen = s.Listen }, func(c *config.Config) any { return c.Listen }},
	{"socket_mode", func(d, s *config.Config) { d.SocketMode = s.SocketMode }, func(c *config.Config) any { return c.SocketMode }},
	{"allow_group", func(d, s *config.Config) { d.AllowGroup = s.AllowGroup }, func(c *config.Config) any { return c.AllowGroup }},
	{"engine", func(d, s *config.Config) { d.Engine = s.Engine }, func(c *config.Config) any { return c.Engine }},
	{"engine_socket", func(d, s *config.Config) { d.EngineSocket = s.EngineSocket }, func(c *config.Config) any { return c.EngineSocket }},
	{"instance", func(d, s *config.Config) { d.Instance = s.Instance }, func(c *config.Config) any { return c.Instance }},
	{"image", func(d, s *config.Config) { d.Image = s.Image }, func(c *config.Config) any { return c.Image }},
	{"run_timeout", func(d, s *config.Config) { d.RunTimeout = s.RunTimeout }, func(c *config.Config) any { return c.RunTimeout }},
	{"stop_grace", func(d, s *config.Config) { d.StopGrace = s.StopGrace }, func(c *config.Config) any { return c.StopGrace }},
	{"max_running", func(d, s *config.Config) { d.MaxRunning = s.MaxRunning }, func(c *config.Config) any { return c.MaxRunning }},
	{"prepared", func(d, s *config.Config) { d.Prepared = s.Prepared }, func(c *config.Config) any { return c.Prepared }},
	{"retry_max", func(d, s *config.Config) { d.RetryMax = s.RetryMax }, func(c *config.Config) any { return c.RetryMax }},
	{"retry_backoff", func(d, s *config.Config) { d.RetryBackoff = s.RetryBackoff }, func(c *config.Config) any { return c.RetryBackoff }},
	{"skills_dir", func(d, s *config.Config) { d.SkillsDir = s.SkillsDir }, func(c *config.Config) any { return c.SkillsDir }},
	{"web_dir", func(d, s *config.Config) { d.WebDir = s.WebDir }, func(c *config.Config) any { return c.WebDir }},
	{"timezone", func(d, s *config.Config) { d.Location = s.Location }, func(c *config.Config) any { return c.Location.String() }},
	{"limits.allowed_networks", func(d, s *config.Config) { d.Limits.AllowedNetworks = s.Limits.AllowedNetworks },
		func(c *config.Config) any { return fmt.Sprintf("%q", c.Limits.AllowedNetworks) }},
	{"limits.allow_unlimited", func(d, s *config.Config) { d.Limits.AllowUnlimited = s.Limits.AllowUnlimited },
		func(c *config.Config) any { return c.Limits.AllowUnlimited }},
	{"metrics.listen", func(d, s *config.Config) { d.Metrics = s.Metrics }, func(c *config.Config) any { return c.Metrics.Listen }},
	{"tracing.endpoint", func(d, s *config.Config) { d.Tracing = s.Tracing }, func(c *config.Config) any { return c.Tracing.Endpoint }},
}

// redact is the filter of every secret the daemon knows (secretSet).
func (d *Daemon) redact(text string) string { return d.secrets.redact(text) }

// modelOptions are the [model] settings of cfg for the model gateway, whose turns tell
// the groups' credentials they read to the secret set.
func (d *Daemon) modelOptions(cfg *config.Config) turn.ModelOptions {
	return turn.ModelOptions{
		Upstream: cfg.Model.Upstream, APIKeyFile: cfg.Model.APIKeyFile, OAuthTokenFile: cfg.Model.OAuthTokenFile,
		CredentialsDir: cfg.Model.CredentialsDir, GiveUp: cfg.Model.GiveUp, EnvFile: cfg.EnvFile, Secret: d.secrets.learn,
	}
}

// leasePolicy is [delivery] of cfg.
func leasePolicy(cfg *config.Config) store.LeasePolicy {
	return store.LeasePolicy{Visibility: cfg.Delivery.VisibilityTimeout, MaxAttempts: cfg.Delivery.MaxAttempts}
}

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

// reload re-reads the configuration, the mount allowlist, the env file, the model
// credential, the groups' credentials and the webhooks' secrets, and applies them to the
// turns that start from now on (running and queued turns go on), to the outbox stream and
// to the webhooks, whose pusher starts again when they or [delivery] changed. A
// configuration that does not load, an allowlist, env file or webhook secret that does
// not read, is refused whole: the previous one stays, and the journal and STATUS say why
// (STATUS until a reload works).
// Grants need no reload: they are read from the store at every call.
func (d *Daemon) reload(ctx context.Context) {
	daemon.SdNotify(false, fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", monotonicUsec()))
	defer daemon.SdNotify(false, daemon.SdNotifyReady)
	if d.opts.load == nil {
		d.log.Warn("reload: not available: this daemon was started without its configuration's path; restart it instead")
		return
	}
	changed, restart, err := d.apply(ctx)
	if err != nil {
		why := err.Error()
		d.refused.Store(&why)
		d.log.Error("reload refused: the previous configuration stays", "err", err)
		d.notifyStatus()
		return
	}
	d.refused.Store(nil)
	for _, k := range restart {
		d.log.Warn("reload: "+k+" changed: it takes effect at the next restart (systemctl restart arizukod)", "key", k)
	}
	d.log.Info("configuration reloaded", "config", d.live.Load().Source, "changed", changed)
	d.notifyStatus()
}

// apply loads everything a reload reads, and only when all of it loaded, switches to it.
// It returns the keys that changed and took effect, and those that need a restart.
func (d *Daemon) apply(ctx context.Context) (changed, restart []string, err error) {
	old := d.live.Load()
	cfg, err := d.opts.load()
	if err != nil {
		return nil, nil, err
	}
	for _, k := range restartKeys {
		if !reflect.DeepEqual(k.get(cfg), k.get(d.cfg)) {
			restart = append(restart, k.key)
			k.keep(cfg, d.cfg)
		}
	}
	allow, allowErr := mountsec.LoadAllowlist(cfg.Allowlist, mountsec.Options{Protected: []string{cfg.DataDir}})
	if allowErr != nil && !errors.Is(allowErr, mountsec.ErrNoAllowlist) {
		return nil, nil, fmt.Errorf("allowlist: %w", allowErr)
	}
	model, err := d.gateway.Load().Reloaded(d.modelOptions(cfg), d.layout, d.log)
	if err != nil {
		return nil, nil, err
	}
	policy := leasePolicy(cfg)
	pusher, err := delivery.New(d.store, cfg.Webhooks, policy, d.log)
	if err != nil {
		return nil, nil, err
	}
	// Last, as it writes the containers' env file.
	src, err := loadSecrets(ctx, cfg, d.layout, model, pusher.Secrets())
	if err != nil {
		return nil, nil, err
	}
	b := *d.builder.Load()
	b.Allowlist, b.AllowlistErr = allow, allowErr
	b.Limits = cfg.Limits.Limits
	b.DiaryMax, b.EpisodesMax = cfg.Memory.DiaryMax, cfg.Memory.EpisodesMax
	services := *b.Services
	services.Model = model
	b.Services = &services
	// The secrets first: from the moment a turn can get a new credential, it is redacted.
	// A running turn may still echo a value the new files no longer have: it stays.
	d.secrets.reload(src.all())
	d.gateway.Store(model)
	d.builder.Store(&b)
	d.live.Store(cfg)
	changed = changedKeys(old, cfg)
	for _, k := range src.changed(d.sources) {
		if !slices.Contains(changed, k) {
			changed = append(changed, k)
		}
	}
	d.sources = src
	if slices.Contains(changed, "webhook") || slices.Contains(changed, "delivery") {
		d.api.SetDelivery(policy)
		d.pushers.start(pusher)
	}
	return changed, restart, nil
}

// changedKeys names the parts of the configuration that differ, for the journal.
func changedKeys(old, cfg *config.Config) []string {
	out := []string{}
	for _, p := range []struct {
		key  string
		a, b any
	}{
		{"env_file", old.EnvFile, cfg.EnvFile},
		{"env_allow", old.EnvAllow, cfg.EnvAllow},
		{"allowlist", old.Allowlist, cfg.Allowlist},
		{"limits", [4]any{old.Limits.MemoryBytes, old.Limits.NanoCPUs, old.Limits.PidsLimit, old.Limits.Network},
			[4]any{cfg.Limits.MemoryBytes, cfg.Limits.NanoCPUs, cfg.Limits.PidsLimit, cfg.Limits.Network}},
		{"memory", old.Memory, cfg.Memory},
		{"model", old.Model, cfg.Model},
		{"retention", old.Retention, cfg.Retention},
		{"delivery", old.Delivery, cfg.Delivery},
		{"webhook", old.Webhooks, cfg.Webhooks},
	} {
		if !reflect.DeepEqual(p.a, p.b) {
			out = append(out, p.key)
		}
	}
	return out
}

// monotonicUsec is CLOCK_MONOTONIC in microseconds, as RELOADING=1 wants it beside.
func monotonicUsec() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return time.Now().UnixMicro()
	}
	return ts.Sec*1e6 + ts.Nsec/1e3
}
