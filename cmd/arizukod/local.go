package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/mountsec"
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
	l.limits = cfg.Limits
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
		Limits: lim.Limits}, st, nil
}
