package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/arizuko/arizukod/assembly"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/groupfolder"
)

// localFlags are the flags of the commands that work on a data directory without a daemon.
type localFlags struct {
	config    string
	dataDir   string
	image     string
	skillsDir string
	allowlist string
}

func (l *localFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.config, "config", "", "the daemon's configuration file, whose settings apply (default /etc/arizuko/arizukod.toml for root, else $XDG_CONFIG_HOME/arizuko/arizukod.toml)")
	fs.StringVar(&l.dataDir, "data-dir", "", "data directory (default: data_dir of the configuration, $DATA_DIR)")
	fs.StringVar(&l.image, "image", "", "agent image; runs never pull (default: image of the configuration, $CONTAINER_IMAGE)")
	fs.StringVar(&l.skillsDir, "skills-dir", "", "bundled skills, mounted read-only at /skills and seeded into sessions (default: skills_dir of the configuration when it exists)")
	fs.StringVar(&l.allowlist, "allowlist", "", "mount allowlist (JSON) (default: allowlist of the configuration)")
}

// load reads the daemon's configuration as `arizukod serve` would, with the flags in place
// of what they name: --data-dir and --image as DATA_DIR and CONTAINER_IMAGE, --skills-dir
// and --allowlist over the file's.
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
	for _, f := range []struct {
		flag string
		dst  *string
	}{{l.skillsDir, &cfg.SkillsDir}, {l.allowlist, &cfg.Allowlist}} {
		if f.flag == "" {
			continue
		}
		abs, err := filepath.Abs(f.flag)
		if err != nil {
			return nil, err
		}
		*f.dst = abs
	}
	return cfg, nil
}

// offline is the daemon's turn machinery for this configuration, for showing a turn
// without running one.
func (l *localFlags) offline(ctx context.Context) (*assembly.System, error) {
	cfg, err := l.load()
	if err != nil {
		return nil, err
	}
	return assembly.New(ctx, cfg, assembly.Options{Mode: assembly.Offline})
}

// local is the daemon's turn machinery for this configuration, for turns of f run in this
// process on the engine ef chooses; timeout, when set, is their run timeout.
func (l *localFlags) local(ctx context.Context, ef engineFlags, f groupfolder.Folder, timeout time.Duration) (*assembly.System, error) {
	cfg, err := l.load()
	if err != nil {
		return nil, err
	}
	if timeout > 0 {
		cfg.RunTimeout = timeout
	}
	return assembly.New(ctx, cfg, assembly.Options{Mode: assembly.Local, EngineFlags: ef.flags(), Folder: f})
}
