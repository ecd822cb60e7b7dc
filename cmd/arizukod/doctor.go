package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/assembly"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/runtime/engine"
)

// check is one doctor check: what it looks at, and the command that fixes a failure on
// this host (systemd or not).
type check struct {
	name string
	run  func(ctx context.Context, o *doctorOpts) (detail string, err error)
	fix  func(o *doctorOpts) string
}

type doctorOpts struct {
	ef         engineFlags
	dataDir    string
	configPath string
	host       host

	opened bool // the engine was asked, once for every check
	eng    engine.Engine
	info   engine.Info
	engErr error
	// engFrom says where the engine's setting came from (assembly.EngineChoice.Source), or
	// the daemon that answers.
	engFrom string

	claudeThere bool // the image check found the Claude Code image on the engine

	// daemon is what the daemon answering on socket runs with; nil when none answers.
	daemon *apiwire.HealthReport
	socket string
}

// daemonChecks are the checks that judge the daemon that answers, when one does, rather
// than this process's environment: what it runs with is what its turns get.
var daemonChecks = []string{"engine", "image", "cluster", "runtime", "model", "upstream"}

// askDaemon asks the daemon on o.socket what it runs with; without one the checks judge
// this environment.
func (o *doctorOpts) askDaemon(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h, err := daemonHealth(ctx, apiwire.NewClient(o.socket))
	if err != nil {
		return
	}
	o.daemon = &h
	if o.ef.kind == "" && o.ef.socket == "" && h.Engine.Up {
		o.ef.kind, o.ef.socket = h.Engine.Name, h.Engine.Socket
		if h.Engine.Name == assembly.Kubernetes {
			// A cluster is reached through [kubernetes] of the configuration, not a socket.
			o.ef.socket = ""
		}
		o.engFrom = "the daemon on " + o.socket
	}
}

// engine is the engine the daemon of this configuration would use (the flags, then the
// file, then the environment, then the default sockets), asked once: every check sees the
// same answer. A configuration that does not load leaves the flags and the environment.
func (o *doctorOpts) engine(ctx context.Context) (engine.Engine, engine.Info, error) {
	if !o.opened {
		o.opened = true
		cfg, err := config.Load(o.host.mode, o.configPath, os.Getenv)
		if err != nil {
			cfg = &config.Config{Source: config.SourceDefaults}
		}
		choice, err := o.ef.choose(cfg)
		if err != nil {
			o.engErr = err
			return nil, engine.Info{}, err
		}
		if o.engFrom == "" {
			o.engFrom = choice.Source()
		}
		o.eng, o.info, o.engErr = choice.Detect(ctx)
	}
	return o.eng, o.info, o.engErr
}

// config is the configuration the daemon would read.
func (o *doctorOpts) config() (*config.Config, error) {
	cfg, err := config.Load(o.host.mode, o.configPath, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("the configuration does not load (the config check says why): %w", err)
	}
	return cfg, nil
}

func fixed(s string) func(*doctorOpts) string { return func(*doctorOpts) string { return s } }

// onHost is a fix that depends on the host alone.
func onHost(fix func(h host) string) func(*doctorOpts) string {
	return func(o *doctorOpts) string { return fix(o.host) }
}

var checks = []check{
	{"config", checkConfig, fixed("correct the key the error names (every key: arizukod.toml(5)); arizukod serve refuses to start until it loads")},
	{"engine", checkEngine, onHost(host.engineFix)},
	{"data-dir", checkDataDir, dataDirFix},
	{"journald", checkJournald, onHost(func(h host) string {
		if h.systemd {
			return "systemctl start systemd-journald   (without journald, logs go to stderr)"
		}
		return "no systemd here: arizukod logs to stderr instead, which is enough; nothing to do"
	})},
	{"sidecars", checkSidecars, fixed("give the daemon's user a systemd user manager (loginctl enable-linger USER) and the engine's CLI in PATH, for sidecars as transient units")},
	{"subids", checkSubids, fixed("usermod --add-subuids 100000-165535 --add-subgids 100000-165535 USER   (then: podman system migrate)")},
	{"cgroups", checkCgroups, onHost(func(h host) string {
		if h.systemd {
			return "mkdir -p /etc/systemd/system/user@.service.d && printf '[Service]\\nDelegate=cpu cpuset io memory pids\\n' > /etc/systemd/system/user@.service.d/delegate.conf && systemctl daemon-reload, then log the engine's user in again   (or set allow_unlimited = true in [limits] of arizukod.toml)"
		}
		return "no systemd here to delegate cgroups: run a rootful engine, or set allow_unlimited = true in [limits] of arizukod.toml to run turns without the limits"
	})},
	{"limits", checkLimits, limitsFix},
	{"image", checkImage, imageFix},
	{"cluster", checkKubernetes, fixed("apply contrib/kubernetes (the engine's Role and ClusterRole, the RuntimeClass of network none and its containerd handler) to the cluster, set pod_pids_limit in [kubernetes] of arizukod.toml to the kubelets' podPidsLimit, and node_selector and tolerations to the labels and taints of the nodes for turns")},
	{"runtime", checkRuntimes, fixed("register the runtime the error names with the engine (README, gVisor), or take it out of limits.runtime and limits.allowed_runtimes of arizukod.toml")},
	{"allowlist", checkAllowlist, fixed("correct the entry the error names (the format: arizukod.toml(5), allowlist), or remove the file: without it groups get no extra mounts")},
	{"model", checkModel, fixed("echo KEY > /etc/arizuko/anthropic-api-key && chmod 0640 it, and [model] api_key_file = \"/etc/arizuko/anthropic-api-key\" in arizukod.toml   (or ANTHROPIC_API_KEY in the daemon's environment or env file)")},
	{"upstream", checkUpstream, fixed("let this host reach the model API over HTTPS (DNS, firewall, HTTPS_PROXY in the daemon's environment), or set upstream in [model] of arizukod.toml")},
}

func checkNames() []string {
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.name
	}
	return names
}

func cmdDoctor(ctx context.Context, args []string) error {
	fs := newFlags("doctor", "[--check NAME]... [--config FILE] [--data-dir DIR] [--engine-socket URI] [--socket S]")
	o := doctorOpts{host: probeHost()}
	socket := socketFlag(fs)
	var only multiFlag
	o.ef.register(fs)
	fs.StringVar(&o.dataDir, "data-dir", "", "data directory (default: the configuration's data_dir, or $DATA_DIR)")
	fs.StringVar(&o.configPath, "config", "", "the configuration file the daemon reads (default: as arizukod serve)")
	fs.Var(&only, "check", "run only this check (repeatable): "+strings.Join(checkNames(), ", "))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	for _, name := range only {
		if !slices.Contains(checkNames(), name) {
			fmt.Fprintf(fs.Output(), "arizukod doctor: --check %q: no such check; the checks are %s\n", name, strings.Join(checkNames(), ", "))
			fs.Usage()
			return errUsage
		}
	}
	o.socket = *socket
	o.askDaemon(ctx)
	if o.daemon != nil {
		fmt.Printf("      arizukod %s answers on %s: the checks marked (daemon) are of what it runs with\n", safeLine(o.daemon.Version), safeLine(o.socket))
	}
	failed := 0
	var needEngine []string // checks not made: they need the engine, whose FAIL said why
	engineSaid := false
	for _, c := range checks {
		if len(only) > 0 && !slices.Contains(only, c.name) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		detail, err := c.run(cctx, &o)
		cancel()
		if o.daemon != nil && slices.Contains(daemonChecks, c.name) {
			detail = "(daemon) " + detail
			if err != nil {
				err = fmt.Errorf("(daemon) %w", err)
			}
		}
		switch {
		case err != nil && engineSaid && o.engErr != nil && errors.Is(err, o.engErr):
			needEngine = append(needEngine, c.name)
			fmt.Printf("skip  %-9s needs the engine, which did not answer (engine, above)\n", c.name)
			continue
		case err != nil:
			failed++
			engineSaid = engineSaid || c.name == "engine"
			fmt.Printf("FAIL  %-9s %v\n      fix: %s\n", c.name, indent(err.Error()), c.fix(&o))
			continue
		}
		fmt.Printf("ok    %-9s %s\n", c.name, indent(detail))
	}
	if failed > 0 {
		if len(needEngine) > 0 {
			return fmt.Errorf("%d check(s) failed; %s not made until the engine answers", failed, strings.Join(needEngine, ", "))
		}
		return fmt.Errorf("%d check(s) failed", failed)
	}
	return nil
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n      ") }

func checkConfig(_ context.Context, o *doctorOpts) (string, error) {
	cfg, err := config.Load(o.host.mode, o.configPath, os.Getenv)
	if err != nil {
		return "", err
	}
	if cfg.Source == config.SourceDefaults {
		return "no configuration file: the defaults of a " + o.host.mode.String() + " service", nil
	}
	return cfg.Source + " loads", nil
}

func checkEngine(ctx context.Context, o *doctorOpts) (string, error) {
	if o.daemon != nil && !o.daemon.Engine.Up {
		return "", fmt.Errorf("the daemon has no engine: %s", cmp.Or(o.daemon.Engine.Error, "none answers"))
	}
	_, info, err := o.engine(ctx)
	if err != nil {
		return "", err
	}
	mode := "rootful"
	if info.Rootless {
		mode = "rootless"
	}
	return fmt.Sprintf("%s %s (API %s, %s) at %s, from %s", info.Name, info.Version, info.APIVersion, mode, info.Socket, o.engFrom), nil
}

// dataDirPath is the data directory the daemon would use.
func (o *doctorOpts) dataDirPath() (string, error) {
	if o.dataDir != "" {
		return o.dataDir, nil
	}
	cfg, err := o.config()
	if err != nil {
		return "", err
	}
	return cfg.DataDir, nil
}

// checkDataDir: the data directory is a directory this user can write, or, missing, one
// `arizukod serve` can make (it makes it, as its nearest existing parent allows).
func checkDataDir(_ context.Context, o *doctorOpts) (string, error) {
	dir, err := o.dataDirPath()
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		parent := filepath.Dir(dir)
		for {
			if _, err := os.Stat(parent); err == nil || parent == filepath.Dir(parent) {
				break
			}
			parent = filepath.Dir(parent)
		}
		if err := unix.Access(parent, unix.W_OK|unix.X_OK); err != nil {
			return "", fmt.Errorf("%s does not exist, and this user cannot make it in %s: %w", dir, parent, err)
		}
		return fmt.Sprintf("%s does not exist yet: arizukod serve makes it (in %s, which this user can write)", dir, parent), nil
	}
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		return "", fmt.Errorf("%s is not writable: %w", dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return dir + " is writable", nil
}

// dataDirFix makes the data directory the daemon would use, for this user.
func dataDirFix(o *doctorOpts) string {
	const other = "   (or name another: data_dir in arizukod.toml, $DATA_DIR, --data-dir)"
	dir, err := o.dataDirPath()
	if err != nil {
		return "correct the configuration first (the config check says why)"
	}
	sudo := "sudo "
	if os.Geteuid() == 0 {
		sudo = ""
	}
	q := shellQuote(dir)
	return fmt.Sprintf("%smkdir -p %s && %schown $(id -u):$(id -g) %s", sudo, q, sudo, q) + other
}

// shellQuote is s as one word of a POSIX shell.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@%", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func checkJournald(context.Context, *doctorOpts) (string, error) {
	const sock = "/run/systemd/journal/socket"
	if _, err := os.Stat(sock); err != nil {
		return "", errors.New("no journald socket at " + sock)
	}
	return "journald socket at " + sock, nil
}

// checkAllowlist says whether the mount allowlist the daemon reads parses.
func checkAllowlist(_ context.Context, o *doctorOpts) (string, error) {
	cfg, err := o.config()
	if err != nil {
		return "", err
	}
	a, err := mountsec.LoadAllowlist(cfg.Allowlist, mountsec.Options{Protected: []string{cfg.DataDir}})
	if errors.Is(err, mountsec.ErrNoAllowlist) {
		return fmt.Sprintf("no allowlist at %s: groups get no extra mounts", cfg.Allowlist), nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s parses: %d allowed root(s)", cfg.Allowlist, len(a.Roots)), nil
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
