package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/arizuko/arizukod/config"
)

// check is one doctor check: what it looks at, and the command that fixes a failure.
type check struct {
	name string
	run  func(ctx context.Context, o *doctorOpts) (detail string, err error)
	fix  string
}

type doctorOpts struct {
	ef      engineFlags
	dataDir string
}

var checks = []check{
	{"engine", checkEngine, "systemctl --user enable --now podman.socket   (rootful: systemctl enable --now podman.socket)"},
	{"data-dir", checkDataDir, "mkdir -p DIR && chown $(id -u):$(id -g) DIR   (or set --data-dir / $DATA_DIR)"},
	{"journald", checkJournald, "systemctl start systemd-journald   (without journald, logs go to stderr)"},
	{"sidecars", checkSidecars, "run arizukod under systemd (system or user manager) with the engine's CLI in PATH, for sidecars as transient units"},
	{"limits", checkLimits, "give the engine its cgroups (arizukod.toml(5), [limits]), or set allow_unlimited = true in [limits] of arizukod.toml to run turns without the memory, CPU and pids limits"},
	{"image", checkImage, "arizukod image build claude   (Claude Code; then image = \"localhost/arizuko-claude:VERSION\" in arizukod.toml)   or: arizukod image import-static --tag localhost/arizuko-agent:latest /usr/libexec/arizuko/agent"},
	{"model", checkModel, "echo KEY > /etc/arizuko/anthropic-api-key && chmod 0640 it, and [model] api_key_file = \"/etc/arizuko/anthropic-api-key\" in arizukod.toml   (or ANTHROPIC_API_KEY in the daemon's environment or env file)"},
}

func cmdDoctor(ctx context.Context, args []string) error {
	fs := newFlags("doctor", "[--check NAME]...")
	var o doctorOpts
	var only multiFlag
	o.ef.register(fs)
	fs.StringVar(&o.dataDir, "data-dir", "", "data directory (default: data_dir of arizukod.toml, $DATA_DIR)")
	fs.Var(&only, "check", "run only this check (repeatable): engine, data-dir, journald, sidecars, limits, image, model")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	failed := 0
	for _, c := range checks {
		if len(only) > 0 && !slices.Contains(only, c.name) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		detail, err := c.run(cctx, &o)
		cancel()
		if err != nil {
			failed++
			fmt.Printf("FAIL  %-9s %v\n      fix: %s\n", c.name, indent(err.Error()), c.fix)
			continue
		}
		fmt.Printf("ok    %-9s %s\n", c.name, detail)
	}
	if failed > 0 {
		return fmt.Errorf("%d check(s) failed", failed)
	}
	return nil
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n      ") }

func checkEngine(ctx context.Context, o *doctorOpts) (string, error) {
	_, info, err := o.ef.open(ctx)
	if err != nil {
		return "", err
	}
	mode := "rootful"
	if info.Rootless {
		mode = "rootless"
	}
	return fmt.Sprintf("%s %s (API %s, %s) at %s", info.Name, info.Version, info.APIVersion, mode, info.Socket), nil
}

func checkDataDir(_ context.Context, o *doctorOpts) (string, error) {
	if o.dataDir == "" {
		cfg, err := config.Load(serviceMode(), "", os.Getenv)
		if err != nil {
			return "", err
		}
		o.dataDir = cfg.DataDir
	}
	fi, err := os.Stat(o.dataDir)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", o.dataDir)
	}
	f, err := os.CreateTemp(o.dataDir, ".doctor-*")
	if err != nil {
		return "", fmt.Errorf("%s is not writable: %w", o.dataDir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return o.dataDir + " is writable", nil
}

func checkJournald(context.Context, *doctorOpts) (string, error) {
	const sock = "/run/systemd/journal/socket"
	if _, err := os.Stat(sock); err != nil {
		return "", errors.New("no journald socket at " + sock)
	}
	return "journald socket at " + sock, nil
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
