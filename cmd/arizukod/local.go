package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// localFlags are the flags of the commands that work on a data directory without a daemon.
type localFlags struct {
	config    string
	dataDir   string
	image     string
	skillsDir string
	allowlist string
	// cfg is the daemon's configuration with the flags above in it; open sets it.
	cfg *config.Config
}

func (l *localFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.config, "config", "", "the daemon's configuration file, whose defaults apply (default /etc/arizuko/arizukod.toml for root, else $XDG_CONFIG_HOME/arizuko/arizukod.toml)")
	fs.StringVar(&l.dataDir, "data-dir", "", "data directory (default: data_dir of the configuration, $DATA_DIR)")
	fs.StringVar(&l.image, "image", "", "agent image; runs never pull (default: image of the configuration, $CONTAINER_IMAGE)")
	fs.StringVar(&l.skillsDir, "skills-dir", "", "bundled skills, mounted read-only at /skills and seeded into sessions (default: skills_dir of the configuration when it exists)")
	def, _ := mountsec.DefaultAllowlistPath(os.Geteuid() == 0)
	fs.StringVar(&l.allowlist, "allowlist", def, "mount allowlist (JSON)")
}

// load reads the daemon's configuration as `arizukod serve` would, with --data-dir and
// --image in place of DATA_DIR and CONTAINER_IMAGE: the data directory, image, instance
// label, run timeout and limits of a local command are the daemon's.
func (l *localFlags) load() (*config.Config, error) {
	over := map[string]string{"CONTAINER_IMAGE": l.image}
	if l.dataDir != "" {
		abs, err := filepath.Abs(l.dataDir)
		if err != nil {
			return nil, fmt.Errorf("--data-dir: %w", err)
		}
		over["DATA_DIR"] = abs
	}
	cfg, err := config.Load(serviceMode(), l.config, func(k string) string {
		if v := over[k]; v != "" {
			return v
		}
		return os.Getenv(k)
	})
	if err != nil {
		return nil, err
	}
	if l.skillsDir == "" {
		l.skillsDir = existingDir(cfg.SkillsDir)
	}
	return cfg, nil
}

// open makes the data directory, opens its store and returns a turn builder over both, as
// the daemon would have them: with the [limits] of the daemon's configuration file
// (the networks the operator allowed, the default limits, allow_unlimited).
func (l *localFlags) open(ctx context.Context) (*turn.Builder, *store.Store, error) {
	cfg, err := l.load()
	if err != nil {
		return nil, nil, err
	}
	l.cfg = cfg
	abs := cfg.DataDir
	layout, err := groupfolder.NewLayout(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("--data-dir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, nil, fmt.Errorf("--data-dir: %w", err)
	}
	dbPath, err := layout.StorePath()
	if err != nil {
		return nil, nil, err
	}
	st, err := store.Open(ctx, dbPath)
	if err != nil {
		return nil, nil, err
	}
	allow, allowErr := mountsec.LoadAllowlist(l.allowlist, mountsec.Options{Protected: []string{abs}})
	if allowErr != nil && !errors.Is(allowErr, mountsec.ErrNoAllowlist) {
		st.Close()
		return nil, nil, allowErr
	}
	var skills fs.FS
	if l.skillsDir != "" {
		skills = os.DirFS(l.skillsDir)
	}
	return &turn.Builder{Layout: layout, Store: st, Allowlist: allow, AllowlistErr: allowErr, Skills: skills, Location: cfg.Location,
		Networks: cfg.Limits.AllowedNetworks, Runtimes: cfg.Limits.AllowedRuntimes, Limits: cfg.Limits.Limits}, st, nil
}

// runner is the runner the daemon would have for the data directory open opened, on eng:
// its instance label, image, run timeout (unless timeout is set), mounts and limits.
func (l *localFlags) runner(eng engine.Engine, info engine.Info, timeout time.Duration) (*runner.Runner, error) {
	cfg := l.cfg
	layout, err := groupfolder.NewLayout(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	return runner.New(runner.Config{
		Engine:    eng,
		Info:      info,
		Layout:    layout,
		Instance:  cfg.Instance,
		Image:     cfg.Image,
		Timeout:   cmp.Or(timeout, cfg.RunTimeout),
		StopGrace: cfg.StopGrace,
		SkillsDir: l.skillsDir,
		WebDir:    existingDir(cfg.WebDir),
		// The operator's word from arizukod.toml, as the daemon has it.
		Networks:       cfg.Limits.AllowedNetworks,
		Runtimes:       cfg.Limits.AllowedRuntimes,
		AllowUnlimited: cfg.Limits.AllowUnlimited,
	})
}

// existingDir is p when it is a directory, else "".
func existingDir(p string) string {
	if fi, err := os.Stat(p); p != "" && err == nil && fi.IsDir() {
		return p
	}
	return ""
}

// services are what the daemon starts around each of its turns, for the turn of b for
// folder f run here: the group's sidecars on eng, its MCP server, model gateway and egress
// proxy. The returned func releases them once the turn is over. Unlike the daemon it stops
// no leftover sidecars: a daemon on the same data directory may be running them. What the
// daemon says of its setup when it starts is not said for one turn where it does not
// apply: no model credential (a turn that asks the model fails at once, naming the fix),
// where sidecars run for a group that has none.
func (l *localFlags) services(ctx context.Context, b *turn.Builder, f groupfolder.Folder, st *store.Store, eng engine.Engine, info engine.Info) (*turn.Services, func(), error) {
	log := slog.Default()
	cfg := l.cfg
	model, err := turn.NewModelGateway(turn.ModelOptions{
		Upstream: cfg.Model.Upstream, APIKeyFile: cfg.Model.APIKeyFile, OAuthTokenFile: cfg.Model.OAuthTokenFile,
		CredentialsDir: cfg.Model.CredentialsDir, GiveUp: cfg.Model.GiveUp, EnvFile: cfg.EnvFile,
	}, b.Layout, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	var mode sidecar.Mode
	if plan, err := b.Plan(ctx, f); err == nil && len(plan.Config.Sidecars) == 0 {
		mode = sidecar.ModeEngine
	}
	sidecars, err := sidecar.New(ctx, sidecar.Options{Engine: eng, Info: info, Layout: b.Layout, Mode: mode,
		Instance: cfg.Instance, StopGrace: cfg.StopGrace, Networks: cfg.Limits.AllowedNetworks, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return &turn.Services{Store: st, Sidecars: sidecars, Model: model, Location: cfg.Location, Logger: log}, sidecars.Close, nil
}
