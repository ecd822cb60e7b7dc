package config

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/runtime/engine"
)

// setter checks one decoded TOML value and stores it in the Config.
type setter func(c *Config, v any) error

// textSetter checks one string (from the file or the environment) and
// stores it in the Config.
type textSetter func(c *Config, s string) error

// fileKeys are the file's value keys, each with its setter; the testdata
// sample documents every one.
var fileKeys = map[string]setter{
	"data_dir":                text(setDataDir),
	"image":                   text(setImage),
	"run_timeout":             text(setRunTimeout),
	"stop_grace":              text(duration(time.Second, 10*time.Minute, func(c *Config) *time.Duration { return &c.StopGrace })),
	"max_running":             integer(1, 1000, func(c *Config) *int { return &c.MaxRunning }),
	"prepared":                integer(0, 1000, func(c *Config) *int { return &c.Prepared }),
	"warm_agents":             integer(0, 1000, func(c *Config) *int { return &c.WarmAgents }),
	"warm_min_available":      text(setWarmMinAvailable),
	"engine":                  text(setEngine),
	"engine_socket":           text(setEngineSocket),
	"listen":                  text(setListen),
	"socket_mode":             text(setSocketMode),
	"allow_group":             text(setAllowGroup),
	"skills_dir":              text(path(false, func(c *Config) *string { return &c.SkillsDir })),
	"web_dir":                 text(path(true, func(c *Config) *string { return &c.WebDir })),
	"env_file":                text(setEnvFile),
	"env_allow":               setEnvAllow,
	"allowlist":               text(setAllowlist),
	"instance":                text(setInstance),
	"timezone":                text(setTimezone),
	"retry_max":               integer(0, 100, func(c *Config) *int { return &c.RetryMax }),
	"retry_backoff":           text(duration(time.Second, 24*time.Hour, func(c *Config) *time.Duration { return &c.RetryBackoff })),
	"limits.memory":           text(setMemory),
	"limits.cpus":             setCPUs,
	"limits.pids":             integer(MinPids, MaxPids, func(c *Config) *int64 { return &c.Limits.PidsLimit }),
	"limits.network":          text(setNetwork),
	"limits.allowed_networks": setAllowedNetworks,
	"limits.runtime":          text(setRuntime),
	"limits.allowed_runtimes": setAllowedRuntimes,
	"limits.allow_unlimited":  boolean(func(c *Config) *bool { return &c.Limits.AllowUnlimited }),
	"memory.diary_max":        integer(1, 365, func(c *Config) *int { return &c.Memory.DiaryMax }),
	"memory.episodes_max":     integer(1, 100, func(c *Config) *int { return &c.Memory.EpisodesMax }),
	"model.upstream":          text(setModelUpstream),
	"model.api_key_file":      text(path(true, func(c *Config) *string { return &c.Model.APIKeyFile })),
	"model.oauth_token_file":  text(path(true, func(c *Config) *string { return &c.Model.OAuthTokenFile })),
	"model.credentials_dir":   text(path(false, func(c *Config) *string { return &c.Model.CredentialsDir })),
	"model.give_up":           text(duration(0, time.Hour, func(c *Config) *time.Duration { return &c.Model.GiveUp })),

	// The outbox stream ([delivery]); the [[webhook]] tables are read by webhooks().
	"delivery.visibility_timeout": text(duration(time.Second, time.Hour, func(c *Config) *time.Duration { return &c.Delivery.VisibilityTimeout })),
	"delivery.max_attempts":       integer(1, 1000, func(c *Config) *int { return &c.Delivery.MaxAttempts }),
	"metrics.listen":              text(setMetricsListen),
	"kubernetes.relay_listen":     text(setRelayListen),
	"tracing.endpoint":            text(setTracingEndpoint),
	"retention.interval":          text(age(func(c *Config) *time.Duration { return &c.Retention.Interval })),
	"retention.runs_max_age":      text(age(func(c *Config) *time.Duration { return &c.Retention.RunsMaxAge })),
	"retention.runs_max_count":    integer(0, maxKeep, func(c *Config) *int { return &c.Retention.RunsMaxCount }),
	"retention.inbox_max_age":     text(age(func(c *Config) *time.Duration { return &c.Retention.InboxMaxAge })),
	"retention.inbox_max_count":   integer(0, maxKeep, func(c *Config) *int { return &c.Retention.InboxMaxCount }),
	"retention.outbox_max_age":    text(age(func(c *Config) *time.Duration { return &c.Retention.OutboxMaxAge })),
	"retention.outbox_max_count":  integer(0, maxKeep, func(c *Config) *int { return &c.Retention.OutboxMaxCount }),
	"retention.logs_max_age":      text(age(func(c *Config) *time.Duration { return &c.Retention.LogsMaxAge })),
	"retention.logs_max_count":    integer(0, maxKeep, func(c *Config) *int { return &c.Retention.LogsMaxCount }),

	// The cluster of engine = "kubernetes".
	"kubernetes.kubeconfig":       text(path(true, func(c *Config) *string { return &c.Kubernetes.Kubeconfig })),
	"kubernetes.namespace":        text(setKubeNamespace),
	"kubernetes.no_network_class": text(setKubeNoNetworkClass),
	"kubernetes.node_ipc_dir":     text(path(true, func(c *Config) *string { return &c.Kubernetes.NodeIPCDir })),
	"kubernetes.pod_pids_limit":   integer(0, MaxPids, func(c *Config) *int64 { return &c.Kubernetes.PodPidsLimit }),
	"kubernetes.node_selector":    setKubeNodeSelector,
	"kubernetes.tolerations":      setKubeTolerations,
}

// Bounds of the values whose limits callers may want to show or reuse.
const (
	MinRunTimeout = 10 * time.Second
	MaxRunTimeout = 24 * time.Hour
	MinNanoCPUs   = 1e7 // 0.01 CPU
	MaxNanoCPUs   = 1024e9
	MinPids       = 16
	MaxPids       = 1 << 22 // the kernel's largest pid_max
	maxSocketPath = 107     // sun_path is 108 bytes with its NUL
)

func text(set textSetter) setter {
	return func(c *Config, v any) error {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("want a string, not %s", typeName(v))
		}
		return set(c, s)
	}
}

func integer[T int | int64](lo, hi T, field func(*Config) *T) setter {
	return func(c *Config, v any) error {
		n, ok := v.(int64)
		if !ok {
			return fmt.Errorf("want an integer, not %s", typeName(v))
		}
		if n < int64(lo) || n > int64(hi) {
			return fmt.Errorf("%d: must be between %d and %d", n, lo, hi)
		}
		*field(c) = T(n)
		return nil
	}
}

func boolean(field func(*Config) *bool) setter {
	return func(c *Config, v any) error {
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("want true or false, not %s", typeName(v))
		}
		*field(c) = b
		return nil
	}
}

func duration(lo, hi time.Duration, field func(*Config) *time.Duration) textSetter {
	return func(c *Config, s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q: not a duration (like \"90s\" or \"20m\")", s)
		}
		if d < lo || d > hi {
			return fmt.Errorf("%q: must be between %v and %v", s, lo, hi)
		}
		*field(c) = d
		return nil
	}
}

// path accepts an absolute path (cleaned), or "" when optional.
func path(optional bool, field func(*Config) *string) textSetter {
	return func(c *Config, s string) error {
		if s == "" && optional {
			*field(c) = ""
			return nil
		}
		p, err := absPath(s)
		if err != nil {
			return err
		}
		*field(c) = p
		return nil
	}
}

func absPath(s string) (string, error) {
	if s == "" {
		return "", errors.New("must not be empty")
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("%q: contains a control character", s)
	}
	if !filepath.IsAbs(s) {
		return "", fmt.Errorf("%q: not an absolute path", s)
	}
	return filepath.Clean(s), nil
}

var (
	setEnvFile    = path(true, func(c *Config) *string { return &c.EnvFile })
	setAllowlist  = path(false, func(c *Config) *string { return &c.Allowlist })
	setRunTimeout = duration(MinRunTimeout, MaxRunTimeout, func(c *Config) *time.Duration { return &c.RunTimeout })
)

func setDataDir(c *Config, s string) error {
	p, err := absPath(s)
	if err != nil {
		return err
	}
	if p == "/" {
		return errors.New(`"/": the data directory must not be the root directory`)
	}
	c.DataDir = p
	return nil
}

// setImage checks the shape of an image reference loosely: the engine
// checks the rest, but nothing it could read as an option or a second word
// gets through.
func setImage(c *Config, s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > 512 {
		return fmt.Errorf("%q: longer than 512 bytes", s[:32]+"...")
	}
	if !isAlnum(s[0]) {
		return fmt.Errorf("%q: an image reference starts with a letter or a digit", s)
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && !strings.ContainsRune("._-:/@", rune(s[i])) {
			return fmt.Errorf("%q: not an image reference (like %q)", s, DefaultImage)
		}
	}
	c.Image = s
	return nil
}

func setEngine(c *Config, s string) error {
	switch s {
	case "", "podman", "docker", "kubernetes":
		c.Engine = s
		return nil
	}
	return fmt.Errorf("%q: must be \"podman\", \"docker\", \"kubernetes\" or \"\" (detect)", s)
}

// setEngineSocket accepts "", unix:///ABSOLUTE/PATH or tcp://HOST:PORT.
func setEngineSocket(c *Config, s string) error {
	if s == "" {
		c.EngineSocket = ""
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q: not a URI", s)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("%q: want unix:///PATH or tcp://HOST:PORT", s)
	}
	switch u.Scheme {
	case "unix":
		if u.Host != "" {
			return fmt.Errorf("%q: a unix URI has three slashes: unix:///PATH", s)
		}
		if p, err := absPath(u.Path); err != nil || p == "/" {
			return fmt.Errorf("%q: want unix:///PATH with the socket's absolute path", s)
		}
	case "tcp":
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" {
			return fmt.Errorf("%q: want tcp://HOST:PORT", s)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: %q is not a port", s, port)
		}
		if u.Path != "" && u.Path != "/" {
			return fmt.Errorf("%q: a tcp URI has no path", s)
		}
	default:
		return fmt.Errorf("%q: the scheme must be unix:// or tcp://", s)
	}
	c.EngineSocket = s
	return nil
}

// setListen accepts a unix socket path, plain or as unix:PATH or
// unix://PATH. The API is local only: a TCP address is refused.
func setListen(c *Config, s string) error {
	p := s
	if rest, ok := strings.CutPrefix(s, "unix://"); ok {
		p = rest
	} else if rest, ok := strings.CutPrefix(s, "unix:"); ok {
		p = rest
	}
	if !filepath.IsAbs(p) && (strings.HasPrefix(s, "tcp") || strings.Contains(p, ":")) {
		return fmt.Errorf("%q: a TCP address; the API is local only: give a unix socket path (like /run/arizuko/arizukod.sock)", s)
	}
	p, err := absPath(p)
	if err != nil {
		return fmt.Errorf("want a unix socket path: %w", err)
	}
	if len(p) > maxSocketPath {
		return fmt.Errorf("%q: longer than %d bytes, the limit of a unix socket path", p, maxSocketPath)
	}
	c.Listen = p
	return nil
}

// setSocketMode accepts octal permission bits as a string ("0660"); the
// owner must keep read and write, or the service could not use its socket.
func setSocketMode(c *Config, s string) error {
	digits := strings.TrimPrefix(s, "0o")
	m, err := strconv.ParseUint(digits, 8, 32)
	if err != nil || digits == "" || m > 0o777 {
		return fmt.Errorf("%q: not an octal permission mode (like \"0660\")", s)
	}
	if m&0o600 != 0o600 {
		return fmt.Errorf("%q: the owner must have read and write permission (0600)", s)
	}
	c.SocketMode = os.FileMode(m)
	return nil
}

// setAllowGroup accepts "" or a group name as shadow's groupadd allows it.
func setAllowGroup(c *Config, s string) error {
	if s != "" && !isGroupName(s) {
		return fmt.Errorf("%q: not a group name (a letter or '_', then letters, digits, '_', '.', '-', at most 32)", s)
	}
	c.AllowGroup = s
	return nil
}

func isGroupName(s string) bool {
	name := strings.TrimSuffix(s, "$")
	if name == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		letter := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch == '_'
		if !letter && (i == 0 || !(ch >= '0' && ch <= '9' || ch == '.' || ch == '-')) {
			return false
		}
	}
	return true
}

// setEnvAllow takes an array of variable names, checked by mountsec's own
// rules (which also refuse PATH, LD_* and the like).
func setEnvAllow(c *Config, v any) error {
	names, err := stringArray(v)
	if err != nil {
		return err
	}
	if _, err := mountsec.BuildEnvFile(context.Background(), "", names, nil); err != nil {
		return err
	}
	c.EnvAllow = names
	return nil
}

// setInstance accepts a label value; "" derives it from the data directory.
func setInstance(c *Config, s string) error {
	if s != "" && !engine.ValidName(s) {
		return fmt.Errorf("%q: want letters, digits, '_', '.', '-', starting with a letter or digit, at most 63", s)
	}
	c.Instance = s
	return nil
}

func setTimezone(c *Config, s string) error {
	if s == "" {
		return errors.New(`must not be empty (use "Local" or "UTC")`)
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		return fmt.Errorf("%q: unknown time zone (like \"Local\", \"UTC\" or \"Europe/Prague\")", s)
	}
	c.Location = loc
	return nil
}

// setWarmMinAvailable takes a memory size ("2g", "512m"), or "0" for no floor.
func setWarmMinAvailable(c *Config, s string) error {
	if s == "0" {
		c.WarmMinAvailable = 0
		return nil
	}
	n, err := engine.ParseMemory(s)
	if err != nil {
		return err
	}
	c.WarmMinAvailable = n
	return nil
}

func setMemory(c *Config, s string) error {
	n, err := engine.ParseMemory(s)
	if err != nil {
		return err
	}
	c.Limits.MemoryBytes = n
	return nil
}

// setCPUs takes a number of CPUs, integer or fractional.
func setCPUs(c *Config, v any) error {
	var f float64
	switch n := v.(type) {
	case int64:
		f = float64(n)
	case float64:
		f = n
	default:
		return fmt.Errorf("want a number, not %s", typeName(v))
	}
	nano := math.Round(f * 1e9)
	if math.IsNaN(f) || nano < MinNanoCPUs || nano > MaxNanoCPUs {
		return fmt.Errorf("%v: must be between 0.01 and 1024", f)
	}
	c.Limits.NanoCPUs = int64(nano)
	return nil
}

// setNetwork accepts the network modes and names CheckNetwork accepts. A named
// network must be in limits.allowed_networks, which may come later in the file: Load
// checks it against that list once the whole file is read.
func setNetwork(c *Config, s string) error {
	if s == "" {
		return errors.New(`must not be empty (use "none" for no network)`)
	}
	if _, err := engine.CheckNetwork(s, []string{s}); err != nil {
		return err
	}
	c.Limits.Network = s
	return nil
}

// setAllowedNetworks takes an array of network names, each at most once.
func setAllowedNetworks(c *Config, v any) error {
	names, err := stringArray(v)
	if err != nil {
		return err
	}
	for i, s := range names {
		if err := engine.CheckNetworkName(s); err != nil {
			return fmt.Errorf("element %d: %w", i+1, err)
		}
		if slices.Contains(names[:i], s) {
			return fmt.Errorf("element %d: %q is listed twice", i+1, s)
		}
	}
	c.Limits.AllowedNetworks = names
	return nil
}

// setRuntime takes an OCI runtime's name, "" for the engine's default. It must be in limits.allowed_runtimes, which
// may come later in the file: Load checks it against that list once the whole file is read.
func setRuntime(c *Config, s string) error {
	if s == "" {
		c.Limits.Runtime = ""
		return nil
	}
	if err := engine.CheckRuntimeName(s); err != nil {
		return err
	}
	c.Limits.Runtime = s
	return nil
}

// setAllowedRuntimes takes an array of OCI runtime names, each at most once.
func setAllowedRuntimes(c *Config, v any) error {
	names, err := stringArray(v)
	if err != nil {
		return err
	}
	for i, s := range names {
		if err := engine.CheckRuntimeName(s); err != nil {
			return fmt.Errorf("element %d: %w", i+1, err)
		}
		if slices.Contains(names[:i], s) {
			return fmt.Errorf("element %d: %q is listed twice", i+1, s)
		}
	}
	c.Limits.AllowedRuntimes = names
	return nil
}

// stringArray takes a TOML array whose every element is a string.
func stringArray(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want an array of strings, not %s", typeName(v))
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("element %d: want a string, not %s", i+1, typeName(e))
		}
		out = append(out, s)
	}
	return out, nil
}

// setModelUpstream accepts an http(s) URL without credentials, query or fragment.
func setModelUpstream(c *Config, s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("%q: not a URL: %v", s, err)
	case u.Scheme != "https" && u.Scheme != "http" || u.Host == "":
		return fmt.Errorf("%q: want an http(s) URL such as %q", s, DefaultModelUpstream)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q: no user, query or fragment: the credential is configured apart (api_key_file)", s)
	}
	c.Model.Upstream = strings.TrimSuffix(s, "/")
	return nil
}

func isAlnum(ch byte) bool {
	return ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9'
}
