// Package assembly builds the turn machinery of one loaded configuration, in one place,
// for everything that runs or shows a turn: `arizukod serve` and its reloads (SIGHUP),
// `run --local`, `prompt`, `mounts`, `quadlet`, and the engine of `doctor` and `image`.
// A System is those parts ready to use: the data directory's layout, the engine (chosen
// by ChooseEngine), the secrets and their redaction, the store, the runner with the
// configuration's settings, the turn builder with its services (sidecars, model gateway), the mount
// allowlist and the webhooks' pusher. What the daemon and a command do with them
// (listening, the queue, printing) is theirs; so a turn of the daemon and a turn of
// `run --local` on the same file are the same turn.
//
// It owns the wiring of the parts and which settings of the configuration each gets; it
// must not decide anything about a turn (turn/, runtime/runner own that), listen, or run
// a queue.
package assembly

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/delivery"
	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/pricing"
	"github.com/arizuko/arizukod/project"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// Mode is what a System is for.
type Mode int

const (
	// Serve is the daemon: the engine is opened without being asked (the daemon watches
	// it and tells the runner what it learns through Options.InfoFunc).
	Serve Mode = iota
	// Local runs turns in this process (`run --local`): the engine must answer now, and
	// what the daemon says of its setup (no model credential, where sidecars run for a
	// folder that has none) is not said.
	Local
	// Offline shows a turn without running one (`prompt`, `mounts`, `quadlet`): no engine,
	// no services, no secrets read or written, nothing created; the store is opened when
	// the data directory has one.
	Offline
)

// Options are what a System takes besides the configuration.
type Options struct {
	Mode Mode
	// EngineFlags are the command line's --engine and --engine-socket (see ChooseEngine).
	EngineFlags EngineFlags
	// Engine, when set, is the engine, opened by the caller: none is chosen (an engine in
	// memory, internal/fakeengine, for tests of the wiring without one).
	Engine engine.Engine
	// Getenv reads the environment: $ARIZUKO_ENGINE*, $CREDENTIALS_DIRECTORY; nil is
	// os.Getenv.
	Getenv func(string) string
	// Logger is where the parts log; every line is redacted. nil is slog.Default().
	Logger *slog.Logger
	// InfoFunc is what the daemon knows of its engine, asked at every turn (Serve).
	InfoFunc func() engine.Info
	// Folder is the one folder a Local system runs turns of.
	Folder groupfolder.Folder
	// OnUsage hears the usage of each model response (the daemon's metrics).
	OnUsage func(gateway.Usage)
	// OnCost hears what each model response of a folder's turn cost (the daemon's metrics).
	OnCost func(folder groupfolder.Folder, model string, c pricing.Cost)
}

// System is the turn machinery of one configuration. A reload makes the next one
// (Reload); the parts made once (layout, engine, store, runner, sidecars, secrets) are
// shared by both.
type System struct {
	Config *config.Config
	Mode   Mode
	Layout groupfolder.Layout
	// Engine is the chosen engine (nil Offline); EngineInfo what it said (Local).
	Engine       engine.Engine
	EngineInfo   engine.Info
	EngineChoice EngineChoice
	// Secrets is the one filter of every text stored or logged.
	Secrets *Secrets
	// Logger redacts every line through Secrets.
	Logger *slog.Logger
	// Store is nil only Offline on a data directory without one.
	Store *store.Store
	// Runner, Model, Sidecars and Pusher are nil Offline.
	Runner   *runner.Runner
	Builder  *turn.Builder // with its Services but Offline
	Model    *turn.ModelGateway
	Sidecars *sidecar.Manager
	// Pusher pushes the outbox to the webhooks; the daemon runs it.
	Pusher *delivery.Pusher
	// SkillsDir and WebDir are the configuration's when they are directories, else "".
	SkillsDir, WebDir string

	sources secretSources // what the last (re)load read
	getenv  func(string) string
}

// New builds the System of cfg. Close releases it.
func New(ctx context.Context, cfg *config.Config, o Options) (_ *System, err error) {
	s := &System{Config: cfg, Mode: o.Mode, Secrets: &Secrets{}, getenv: envOrOS(o.Getenv),
		SkillsDir: existingDir(cfg.SkillsDir), WebDir: existingDir(cfg.WebDir)}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	// From here on no secret value reaches a log or the store, whoever writes it: an
	// agent's answer, stderr line, outbox message or MCP call may echo one.
	s.Logger = slog.New(logging.Redacting(log.Handler(), s.Secrets.Redact))
	if s.Layout, err = groupfolder.NewLayout(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.openStore(ctx); err != nil {
		return nil, err
	}
	var skills fs.FS
	if s.SkillsDir != "" {
		skills = os.DirFS(s.SkillsDir)
	}
	s.Builder = &turn.Builder{Layout: s.Layout, Skills: skills, Location: cfg.Location, Networks: cfg.Limits.AllowedNetworks,
		Runtimes: cfg.Limits.AllowedRuntimes, Logger: s.Logger}
	if s.Store != nil {
		s.Builder.Store = s.Store
		projects, err := s.Layout.ProjectsDir()
		if err != nil {
			return nil, err
		}
		s.Builder.Projects = &project.Manager{Dir: projects, Store: s.Store, Logger: s.Logger}
	}
	if o.Mode == Offline {
		allow, allowErr, err := loadAllowlist(cfg)
		if err != nil {
			return nil, err
		}
		setAllowlist(s.Builder, allow, allowErr)
		setReloadable(s.Builder, cfg)
		return s, nil
	}
	if err := s.openEngine(ctx, o); err != nil {
		return nil, err
	}
	model, err := turn.NewModelGateway(s.modelOptions(cfg), s.Layout, s.modelLog())
	if err != nil {
		return nil, err
	}
	if err := s.load(ctx, cfg, s.Builder, model); err != nil {
		return nil, err
	}
	if s.Runner, err = runner.New(runner.Config{
		Engine: s.Engine, Info: s.EngineInfo, InfoFunc: o.InfoFunc, Layout: s.Layout, Instance: cfg.Instance, Image: cfg.Image,
		Timeout: cfg.RunTimeout, StopGrace: cfg.StopGrace, SkillsDir: s.SkillsDir, WebDir: s.WebDir,
		Networks: cfg.Limits.AllowedNetworks, Runtimes: cfg.Limits.AllowedRuntimes, AllowUnlimited: cfg.Limits.AllowUnlimited, Prepared: cfg.Prepared,
		WarmAgents: cfg.WarmAgents, WarmMinAvailable: cfg.WarmMinAvailable,
		Redact: s.Secrets.Redact, Logger: s.Logger,
	}); err != nil {
		return nil, err
	}
	if s.Sidecars, err = sidecar.New(ctx, sidecar.Options{Engine: s.Engine, Info: s.EngineInfo, InfoFunc: o.InfoFunc,
		Layout: s.Layout, Mode: s.sidecarMode(ctx, o), Instance: cfg.Instance, StopGrace: cfg.StopGrace,
		Networks: cfg.Limits.AllowedNetworks, Logger: s.Logger, Secret: s.Secrets.learn}); err != nil {
		return nil, err
	}
	// The CA of the egress proxy's bound hosts: its key stays in the data dir, the same for
	// the daemon and run --local on it.
	ca, err := turn.OpenEgressCA(s.Layout, cfg.Instance)
	if err != nil {
		return nil, err
	}
	s.Builder.Services = &turn.Services{Store: s.Store, Sidecars: s.Sidecars, Model: s.Model, Location: cfg.Location, Warm: &turn.Warm{},
		Logger: s.Logger, OnUsage: o.OnUsage, OnCost: o.OnCost, EgressCA: ca}
	return s, nil
}

// openEngine opens the engine of o, or else the one ChooseEngine chooses: asked for its
// details at once when Local.
func (s *System) openEngine(ctx context.Context, o Options) (err error) {
	if s.EngineChoice, err = ChooseEngine(o.EngineFlags, s.Config, s.getenv); err != nil {
		return err
	}
	switch {
	case o.Engine != nil && o.Mode == Local:
		s.Engine = o.Engine
		s.EngineInfo, err = o.Engine.Info(ctx)
	case o.Engine != nil:
		s.Engine = o.Engine
	case o.Mode == Local:
		s.Engine, s.EngineInfo, err = s.EngineChoice.Detect(ctx)
	default:
		s.Engine, err = s.EngineChoice.Open()
	}
	return err
}

// openStore opens the data directory's store, made with the directory (Offline: only
// one already there).
func (s *System) openStore(ctx context.Context) error {
	path, err := s.Layout.StorePath()
	if err != nil {
		return err
	}
	if s.Mode == Offline {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	} else if err := os.MkdirAll(s.Config.DataDir, 0o750); err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	s.Store, err = store.Open(ctx, path, store.WithRedact(s.Secrets.Redact))
	return err
}

// load reads what a (re)load reads into s and b: the allowlist, the webhooks' pusher and
// every secret (writing the containers' env file last), with model as the gateway; and
// sets b's settings of cfg. Nothing of s changes unless all of it loaded.
func (s *System) load(ctx context.Context, cfg *config.Config, b *turn.Builder, model *turn.ModelGateway) error {
	allow, allowErr, err := loadAllowlist(cfg)
	if err != nil {
		return err
	}
	pusher, err := delivery.New(s.Store, cfg.Webhooks, leasePolicy(cfg), s.Logger)
	if err != nil {
		return err
	}
	src, err := loadSecrets(ctx, cfg, s.Layout, model, pusher.Secrets(), s.getenv)
	if err != nil {
		return err
	}
	// The secrets first: from the moment a turn can get a new credential, it is redacted.
	// A running turn may still echo a value the new files no longer have: it stays.
	s.Secrets.reload(src.all())
	s.sources, s.Model, s.Pusher, s.Config = src, model, pusher, cfg
	setAllowlist(b, allow, allowErr)
	setReloadable(b, cfg)
	return nil
}

// setAllowlist gives b, and the projects of its groups, the allowlist allow.
func setAllowlist(b *turn.Builder, allow *mountsec.Allowlist, missing error) {
	b.Allowlist, b.AllowlistErr = allow, missing
	if b.Projects != nil {
		projects := *b.Projects
		projects.Allowlist = allow
		b.Projects = &projects
	}
}

// setReloadable sets the settings of b a reload changes.
func setReloadable(b *turn.Builder, cfg *config.Config) {
	b.Limits = cfg.Limits.Limits
	b.DiaryMax, b.EpisodesMax = cfg.Memory.DiaryMax, cfg.Memory.EpisodesMax
}

// sidecarMode is where sidecars run: found out (systemd units, or the engine) but for a
// Local folder without sidecars, whose turn needs neither the probe nor its notice.
func (s *System) sidecarMode(ctx context.Context, o Options) sidecar.Mode {
	if o.Mode != Local {
		return ""
	}
	if plan, err := s.Builder.Plan(ctx, o.Folder); err == nil && len(plan.Config.Sidecars) == 0 {
		return sidecar.ModeEngine
	}
	return ""
}

// modelLog is where the model gateway says what it found; a Local turn that never asks
// the model is not told there is no credential (it fails at once, naming the fix, if it
// asks).
func (s *System) modelLog() *slog.Logger {
	if s.Mode == Local {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// modelOptions are the [model] settings of cfg for the model gateway, whose turns tell
// the groups' credentials they read to the secrets.
func (s *System) modelOptions(cfg *config.Config) turn.ModelOptions {
	return turn.ModelOptions{
		Upstream: cfg.Model.Upstream, APIKeyFile: cfg.Model.APIKeyFile, OAuthTokenFile: cfg.Model.OAuthTokenFile,
		CredentialsDir: cfg.Model.CredentialsDir, GiveUp: cfg.Model.GiveUp, EnvFile: cfg.EnvFile, Secret: s.Secrets.learn,
		Prices: cfg.Prices,
	}
}

// Close waits for the runner's removals, stops the sidecars and closes the store.
func (s *System) Close() {
	if s.Runner != nil {
		s.Runner.Close()
	}
	if s.Sidecars != nil {
		s.Sidecars.Close()
	}
	if s.Store != nil {
		s.Store.Close()
	}
}

// loadAllowlist reads cfg's mount allowlist; without the file, groups get no additional
// mounts, which missing says (mountsec.ErrNoAllowlist).
func loadAllowlist(cfg *config.Config) (allow *mountsec.Allowlist, missing, err error) {
	allow, err = mountsec.LoadAllowlist(cfg.Allowlist, mountsec.Options{Protected: []string{cfg.DataDir}})
	if err != nil && !errors.Is(err, mountsec.ErrNoAllowlist) {
		return nil, nil, fmt.Errorf("allowlist: %w", err)
	}
	return allow, err, nil
}

// leasePolicy is [delivery] of cfg.
func leasePolicy(cfg *config.Config) store.LeasePolicy {
	return store.LeasePolicy{Visibility: cfg.Delivery.VisibilityTimeout, MaxAttempts: cfg.Delivery.MaxAttempts}
}

// LeasePolicy is the outbox's lease policy of the System's configuration ([delivery]).
func (s *System) LeasePolicy() store.LeasePolicy { return leasePolicy(s.Config) }

// existingDir is p when it is a directory, else "".
func existingDir(p string) string {
	if fi, err := os.Stat(p); p != "" && err == nil && fi.IsDir() {
		return p
	}
	return ""
}

func envOrOS(getenv func(string) string) func(string) string {
	if getenv == nil {
		return os.Getenv
	}
	return getenv
}
