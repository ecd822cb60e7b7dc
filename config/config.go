// Package config loads arizukod's configuration: built-in defaults, then a
// TOML file (the system or user default, or the one named with --config),
// then the seed's environment variables (DATA_DIR, CONTAINER_IMAGE,
// RUNED_RUN_TIMEOUT, LISTEN_ADDR), which beat the file.
//
// It owns the file format, the defaults and the validation of every value:
// an unknown key or a bad value is an *Error naming the file (or the
// environment variable), the key and, when the TOML library knows it, the
// line. It must not touch anything beyond reading that one file: it creates
// no directory, opens no socket, looks up no user or group and talks to no
// engine.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/pricing"
	"github.com/arizuko/arizukod/runtime/engine"
)

// Mode says which service the configuration is for. The caller decides: the
// system service runs as root or as a system user started by the system
// manager; everything else is a user service.
type Mode int

const (
	// ModeSystem is the system service (/etc/arizuko, /var/lib/arizuko, /run/arizuko).
	ModeSystem Mode = iota
	// ModeUser is a user service or a user's command line (the XDG directories).
	ModeUser
)

func (m Mode) String() string {
	switch m {
	case ModeSystem:
		return "system"
	case ModeUser:
		return "user"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

const (
	// SystemPath is the system service's configuration file.
	SystemPath = "/etc/arizuko/arizukod.toml"
	// DefaultImage is the agent image used when none is configured.
	DefaultImage = "localhost/arizuko-agent:latest"
	// DefaultWarmAgents is how many folders keep a warm agent: an idle Claude Code holds
	// about 200 to 300 MB, so two (a chat and the group it delegates to, or the two
	// busiest chats) cost well under a gigabyte and serve the common case of a host with one
	// or two active conversations; more is the operator's choice.
	DefaultWarmAgents = 2
	// DefaultWarmMinAvailable keeps warm agents off a host with less than 2 GiB available:
	// that memory is the turns' (each may use limits.memory, 1 GiB by default).
	DefaultWarmMinAvailable = 2 << 30
	// DefaultRunTimeout is the run ceiling when none is configured.
	DefaultRunTimeout = 20 * time.Minute
	// DefaultStopGrace is how long a stopped container gets between SIGTERM and SIGKILL.
	DefaultStopGrace = 10 * time.Second
	// SourceDefaults is Config.Source when no file was read.
	SourceDefaults = "defaults"
	// MaxFileSize bounds the configuration file.
	MaxFileSize = 1 << 20
)

// Config is the daemon's validated configuration. Load fills every field.
type Config struct {
	DataDir    string        // absolute, clean
	Image      string        // agent image; runs never pull
	RunTimeout time.Duration // the run ceiling, at least 10s
	StopGrace  time.Duration // SIGTERM to SIGKILL when a container is stopped
	MaxRunning int           // turns running at once, all folders together
	// Prepared is how many folders may have their next container made ahead at once
	// (Podman only); 0 makes none. Its default is MaxRunning.
	Prepared int
	// WarmAgents is how many of those folders (the most recently active) keep a warm
	// agent: started, with its session, prompt and MCP servers, waiting for its turn (an
	// image that declares contract.PrepareLabel only); 0 keeps none.
	WarmAgents int
	// WarmMinAvailable: below this MemAvailable (bytes) no agent is warmed and the warm
	// ones are removed; 0 does not look.
	WarmMinAvailable int64
	Engine           string      // "" (detect), "podman", "docker" or "kubernetes"
	EngineSocket     string      // "" (detect), unix:///PATH or tcp://HOST:PORT
	Listen           string      // the API's unix socket path
	SocketMode       os.FileMode // permission bits of the API socket
	AllowGroup       string      // group allowed on the API besides the service's user and root; "" for none
	SkillsDir        string      // the bundled skills
	WebDir           string      // "" for none
	EnvFile          string      // the credentials env file; "" for none
	EnvAllow         []string    // variables passed on from EnvFile besides mountsec's defaults
	Allowlist        string      // the mount allowlist
	Instance         string      // the io.arizuko.instance label
	Location         *time.Location
	RetryMax         int           // retries of a failed turn before its messages are parked
	RetryBackoff     time.Duration // wait before the first retry
	Limits           Limits
	Memory           MemoryConf
	Model            ModelConf
	Delivery         DeliveryConf
	Webhooks         []Webhook // [[webhook]] tables, in file order
	// Prices are the [prices."MODEL"] tables: each replaces the shipped price of its
	// model (pricing.Defaults); nil when the file has none.
	Prices  map[string]pricing.Price
	Metrics MetricsConf
	Tracing TracingConf
	// Kubernetes is the cluster of engine = "kubernetes" ([kubernetes]).
	Kubernetes KubeConf
	Retention  Retention
	Source     string // the file read, or SourceDefaults
}

// ModelConf is where the model gateway forwards a turn's model traffic, and with which
// credential. The credential never reaches a container.
type ModelConf struct {
	Upstream       string // the Messages API base URL
	APIKeyFile     string // "" to look further (systemd credential, environment, env_file)
	OAuthTokenFile string // a CLAUDE_CODE_OAUTH_TOKEN in a file, sent as a bearer token
	CredentialsDir string // the groups' own credentials, by name
	// GiveUp is how long the upstream may keep failing before a turn is given up (the
	// agent's SDK would retry for minutes); 0 never gives up.
	GiveUp time.Duration
}

// DefaultModelGiveUp is [model] give_up's default.
const DefaultModelGiveUp = 30 * time.Second

// DefaultModelUpstream is the Anthropic API.
const DefaultModelUpstream = "https://api.anthropic.com"

// Limits are the default resource limits of an agent container, and what the
// operator allows beyond them.
type Limits struct {
	engine.Limits // the defaults; Network as engine.CheckNetwork returns it, never "host"
	// AllowedNetworks are the named engine networks a container may join
	// (limits.allowed_networks); the modes of engine.CheckNetwork need no listing.
	AllowedNetworks []string
	// AllowedRuntimes are the OCI runtimes a container may run under besides the
	// engine's default (limits.allowed_runtimes); Runtime, the default, is one of them.
	AllowedRuntimes []string
	// AllowUnlimited lets turns run where the engine cannot apply the memory, CPU and
	// pids limits (limits.allow_unlimited); otherwise such turns are refused.
	AllowUnlimited bool
}

// MemoryConf bounds what the prompt assembly reads.
type MemoryConf struct {
	DiaryMax    int
	EpisodesMax int
}

// ErrInvalid matches (errors.Is) every *Error.
var ErrInvalid = errors.New("invalid configuration")

// Error is a configuration mistake: a file that does not parse, an unknown
// key, a bad value. It prints as "SOURCE[:LINE]: KEY: what is wrong".
type Error struct {
	Source string // the file, SourceDefaults, or "environment"
	Line   int    // 1-based; 0 when unknown
	Key    string // the TOML key or the environment variable; "" for the whole file
	Err    error
}

func (e *Error) Error() string {
	s := e.Source
	if e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
	}
	if e.Key != "" {
		s += ": " + e.Key
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// DefaultPath is the configuration file read when none is named: SystemPath,
// or $XDG_CONFIG_HOME/arizuko/arizukod.toml (normally
// ~/.config/arizuko/arizukod.toml) for a user. It is "" for a user when
// neither XDG_CONFIG_HOME nor HOME is an absolute path. A nil getenv means
// os.Getenv.
func DefaultPath(mode Mode, getenv func(string) string) string {
	if mode == ModeSystem {
		return SystemPath
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	return joinOrEmpty(xdgDir(getenv, "XDG_CONFIG_HOME", ".config"), "arizuko", "arizukod.toml")
}

// Load builds the configuration: defaults, then the file explicitPath (an
// error when missing) or DefaultPath (defaults when missing), then the
// environment read through getenv (os.Getenv when nil).
func Load(mode Mode, explicitPath string, getenv func(string) string) (*Config, error) {
	if mode != ModeSystem && mode != ModeUser {
		return nil, fmt.Errorf("config: unknown mode %v", mode)
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	if explicitPath != "" {
		return load(mode, explicitPath, true, getenv)
	}
	return load(mode, DefaultPath(mode, getenv), false, getenv)
}

// load is Load with the file decided: path ("" for none) must exist when
// explicit.
func load(mode Mode, path string, explicit bool, getenv func(string) string) (*Config, error) {
	l := &loader{c: &Config{
		Image:            DefaultImage,
		RunTimeout:       DefaultRunTimeout,
		StopGrace:        DefaultStopGrace,
		MaxRunning:       5,
		WarmAgents:       DefaultWarmAgents,
		WarmMinAvailable: DefaultWarmMinAvailable,
		SocketMode:       0o660,
		SkillsDir:        "/usr/share/arizuko/skills",
		Location:         time.Local,
		RetryMax:         5,
		RetryBackoff:     10 * time.Second,
		Limits:           Limits{Limits: engine.DefaultLimits()},
		Memory:           MemoryConf{DiaryMax: 14, EpisodesMax: 5},
		Model:            ModelConf{Upstream: DefaultModelUpstream, GiveUp: DefaultModelGiveUp},
		Delivery:         DeliveryConf{VisibilityTimeout: DefaultVisibilityTimeout, MaxAttempts: DefaultMaxAttempts},
		Retention:        DefaultRetention,
		Kubernetes:       KubeConf{Namespace: DefaultKubeNamespace, NoNetworkClass: DefaultKubeNoNetworkClass},
		Source:           SourceDefaults,
	}, set: map[string]bool{}, lines: map[string]int{}}
	if path != "" {
		data, err := readFile(path)
		switch {
		case err == nil:
			l.c.Source = path
			if err := l.decode(path, data); err != nil {
				return nil, err
			}
		case !explicit && errors.Is(err, fs.ErrNotExist):
		default:
			return nil, err
		}
	}
	if err := l.environment(getenv); err != nil {
		return nil, err
	}
	if err := l.defaults(mode, getenv); err != nil {
		return nil, err
	}
	if !l.set["prepared"] {
		l.c.Prepared = l.c.MaxRunning
	}
	// The network may name a network listed further down the file: checked once both are read.
	network, err := engine.CheckNetwork(l.c.Limits.Network, l.c.Limits.AllowedNetworks)
	if err != nil {
		return nil, &Error{Source: l.c.Source, Line: l.lines["limits.network"], Key: "limits.network", Err: err}
	}
	l.c.Limits.Network = network
	if err := engine.CheckRuntime(l.c.Limits.Runtime, l.c.Limits.AllowedRuntimes); err != nil {
		return nil, &Error{Source: l.c.Source, Line: l.lines["limits.runtime"], Key: "limits.runtime", Err: err}
	}
	return l.c, nil
}

// loader fills one Config and remembers which keys the file or the
// environment set, and the line of each key of the file.
type loader struct {
	c     *Config
	set   map[string]bool
	lines map[string]int
}

// envVars are the seed's variables, each overriding one key.
var envVars = []struct {
	name, key string
	set       textSetter
}{
	{"DATA_DIR", "data_dir", setDataDir},
	{"CONTAINER_IMAGE", "image", setImage},
	{"RUNED_RUN_TIMEOUT", "run_timeout", setRunTimeout},
	{"LISTEN_ADDR", "listen", setListen},
	{"ARIZUKO_MODEL_UPSTREAM", "model.upstream", setModelUpstream},
}

func (l *loader) environment(getenv func(string) string) error {
	for _, e := range envVars {
		v := getenv(e.name)
		if v == "" {
			continue
		}
		if err := e.set(l.c, v); err != nil {
			return &Error{Source: "environment", Key: e.name, Err: err}
		}
		l.set[e.key] = true
	}
	return nil
}

// defaults fills the keys whose default depends on the mode and the
// environment, unless the file or the environment set them. A user's socket
// falls back to /run/user/UID when XDG_RUNTIME_DIR is not set.
func (l *loader) defaults(mode Mode, getenv func(string) string) error {
	configHome := xdgDir(getenv, "XDG_CONFIG_HOME", ".config")
	runtimeDir := absEnv(getenv, "XDG_RUNTIME_DIR")
	if runtimeDir == "" {
		runtimeDir = filepath.Join("/run/user", strconv.Itoa(os.Getuid()))
	}
	for _, d := range []struct {
		key          string
		set          textSetter
		system, user string
		from         string // what the user default needs
	}{
		{"data_dir", setDataDir, "/var/lib/arizuko", joinOrEmpty(xdgDir(getenv, "XDG_DATA_HOME", ".local/share"), "arizuko"), "XDG_DATA_HOME or HOME"},
		{"listen", setListen, "/run/arizuko/arizukod.sock", filepath.Join(runtimeDir, "arizuko", "arizukod.sock"), ""},
		{"env_file", setEnvFile, "/etc/arizuko/env", joinOrEmpty(configHome, "arizuko", "env"), "XDG_CONFIG_HOME or HOME"},
		{"allowlist", setAllowlist, mountsec.SystemAllowlistPath, joinOrEmpty(configHome, "pub", "arizuko", "mount-allowlist.json"), "XDG_CONFIG_HOME or HOME"},
		{"model.credentials_dir", path(false, func(c *Config) *string { return &c.Model.CredentialsDir }), "/etc/arizuko/credentials", joinOrEmpty(configHome, "arizuko", "credentials"), "XDG_CONFIG_HOME or HOME"},
	} {
		if l.set[d.key] {
			continue
		}
		v := d.system
		if mode == ModeUser {
			v = d.user
		}
		if v == "" {
			return &Error{Source: SourceDefaults, Key: d.key, Err: fmt.Errorf("no default for a user service: neither %s is an absolute path; set %s", d.from, d.key)}
		}
		if err := d.set(l.c, v); err != nil {
			return &Error{Source: SourceDefaults, Key: d.key, Err: err}
		}
	}
	if l.c.Instance == "" {
		sum := sha256.Sum256([]byte(filepath.Clean(l.c.DataDir)))
		l.c.Instance = hex.EncodeToString(sum[:6])
	}
	return nil
}

// readFile reads a regular file of at most MaxFileSize bytes.
func readFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{Source: path, Err: errors.New("not a regular file")}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, &Error{Source: path, Err: fmt.Errorf("larger than %d bytes", MaxFileSize)}
	}
	return data, nil
}

// absEnv is the variable's value when it is an absolute path: the XDG base
// directory specification says to ignore relative ones.
func absEnv(getenv func(string) string, name string) string {
	if v := getenv(name); filepath.IsAbs(v) {
		return v
	}
	return ""
}

// xdgDir is $name, else $HOME/fallback, else "".
func xdgDir(getenv func(string) string, name, fallback string) string {
	if v := absEnv(getenv, name); v != "" {
		return v
	}
	return joinOrEmpty(absEnv(getenv, "HOME"), fallback)
}

func joinOrEmpty(base string, elem ...string) string {
	if base == "" {
		return ""
	}
	return filepath.Join(append([]string{base}, elem...)...)
}
