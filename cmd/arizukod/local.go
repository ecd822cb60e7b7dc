package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/runtime"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// localFlags are the flags of the commands that work on a data directory without a daemon.
type localFlags struct {
	dataDir   string
	skillsDir string
	allowlist string
	// limits are the [limits] of the configuration file the daemon would read; open sets them.
	limits config.Limits
	// cfg is that configuration file; open sets it.
	cfg *config.Config
}

func (l *localFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.dataDir, "data-dir", defaultDataDir(), "data directory ($DATA_DIR)")
	fs.StringVar(&l.skillsDir, "skills-dir", "", "bundled skills, mounted read-only at /skills and seeded into sessions")
	def, _ := mountsec.DefaultAllowlistPath(os.Geteuid() == 0)
	fs.StringVar(&l.allowlist, "allowlist", def, "mount allowlist (JSON)")
}

// open makes the data directory, opens its store and returns a turn builder over both, as
// the daemon would have them: with the [limits] of the daemon's configuration file
// (the networks the operator allowed, the default limits, allow_unlimited).
func (l *localFlags) open(ctx context.Context) (*turn.Builder, *store.Store, error) {
	cfg, err := config.Load(serviceMode(), "", os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	l.limits, l.cfg = cfg.Limits, cfg
	abs, err := filepath.Abs(l.dataDir)
	if err != nil {
		return nil, nil, fmt.Errorf("--data-dir: %w", err)
	}
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
	lim := l.limits
	return &turn.Builder{Layout: layout, Store: st, Allowlist: allow, AllowlistErr: allowErr, Skills: skills, Networks: lim.AllowedNetworks,
		Limits: runtime.Limits{MemoryBytes: lim.MemoryBytes, NanoCPUs: lim.NanoCPUs, PidsLimit: lim.PidsLimit, Network: lim.Network}}, st, nil
}

// services are what the daemon starts around each of its turns, for the turns of b run
// here: the group's sidecars on eng, its MCP server, model gateway and egress proxy. The
// returned func releases them once the turns are over. Unlike the daemon it stops no
// leftover sidecars: a daemon on the same data directory may be running them.
func (l *localFlags) services(ctx context.Context, b *turn.Builder, st *store.Store, eng runtime.Engine, info runtime.Info) (*turn.Services, func(), error) {
	log := slog.Default()
	cfg := l.cfg
	model, err := turn.NewModelGateway(turn.ModelOptions{
		Upstream: cfg.Model.Upstream, APIKeyFile: cfg.Model.APIKeyFile, OAuthTokenFile: cfg.Model.OAuthTokenFile,
		CredentialsDir: cfg.Model.CredentialsDir, EnvFile: cfg.EnvFile,
	}, b.Layout, log)
	if err != nil {
		return nil, nil, err
	}
	sidecars, err := sidecar.New(ctx, sidecar.Options{Engine: eng, Info: info, Layout: b.Layout,
		Instance: instanceLabel(b.Layout.DataDir), StopGrace: cfg.StopGrace, Networks: l.limits.AllowedNetworks, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return &turn.Services{Store: st, Sidecars: sidecars, Model: model, Location: cfg.Location, Logger: log}, sidecars.Close, nil
}
