package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/runtime/engine"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// systemDefaults is the system service's configuration without a file.
func systemDefaults() *Config {
	return &Config{
		DataDir:          "/var/lib/arizuko",
		Image:            "localhost/arizuko-agent:latest",
		RunTimeout:       20 * time.Minute,
		StopGrace:        10 * time.Second,
		MaxRunning:       5,
		Prepared:         5,
		WarmAgents:       2,
		WarmMinAvailable: 2 << 30,
		Listen:           "/run/arizuko/arizukod.sock",
		SocketMode:       0o660,
		SkillsDir:        "/usr/share/arizuko/skills",
		EnvFile:          "/etc/arizuko/env",
		Allowlist:        mountsec.SystemAllowlistPath,
		Instance:         "9a469ee87085", // printf /var/lib/arizuko | sha256sum | cut -c1-12
		Location:         time.Local,
		RetryMax:         5,
		RetryBackoff:     10 * time.Second,
		Limits:           Limits{Limits: engine.Limits{MemoryBytes: 1 << 30, NanoCPUs: 2e9, PidsLimit: 512, Network: "none"}},
		Memory:           MemoryConf{DiaryMax: 14, EpisodesMax: 5},
		Model:            ModelConf{Upstream: DefaultModelUpstream, CredentialsDir: "/etc/arizuko/credentials", GiveUp: DefaultModelGiveUp},
		Delivery:         DeliveryConf{VisibilityTimeout: 60 * time.Second, MaxAttempts: 5},
		Retention: Retention{Interval: time.Hour, RunsMaxAge: 2160 * time.Hour, RunsMaxCount: 10000,
			InboxMaxAge: 2160 * time.Hour, InboxMaxCount: 10000, OutboxMaxAge: 2160 * time.Hour,
			OutboxMaxCount: 10000, LogsMaxAge: 720 * time.Hour, LogsMaxCount: 1000},
		Kubernetes: KubeConf{Namespace: "arizuko", NoNetworkClass: "arizuko-nonet"},
		Source:     SourceDefaults,
	}
}

func userDefaults(dataDir, listen, envFile, allowlist string) *Config {
	c := systemDefaults()
	c.DataDir, c.Listen, c.EnvFile, c.Allowlist = dataDir, listen, envFile, allowlist
	// The credentials live beside env_file (both under $XDG_CONFIG_HOME/arizuko).
	c.Model.CredentialsDir = ""
	if envFile != "" {
		c.Model.CredentialsDir = filepath.Join(filepath.Dir(envFile), "credentials")
	}
	sum := sha256.Sum256([]byte(dataDir))
	c.Instance = hex.EncodeToString(sum[:])[:12]
	return c
}

// missing is a default path that does not exist.
func missing(t *testing.T) string { return filepath.Join(t.TempDir(), "arizukod.toml") }

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "arizukod.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	runUser := filepath.Join("/run/user", strconv.Itoa(os.Getuid()), "arizuko/arizukod.sock")
	for _, tc := range []struct {
		name   string
		mode   Mode
		getenv func(string) string
		want   *Config
	}{
		{"system", ModeSystem, env(), systemDefaults()},
		{"system ignores XDG", ModeSystem, env("HOME", "/home/u", "XDG_DATA_HOME", "/x", "XDG_RUNTIME_DIR", "/run/user/7"), systemDefaults()},
		{"user from HOME", ModeUser, env("HOME", "/home/u", "XDG_RUNTIME_DIR", "/run/user/1000"),
			userDefaults("/home/u/.local/share/arizuko", "/run/user/1000/arizuko/arizukod.sock",
				"/home/u/.config/arizuko/env", "/home/u/.config/pub/arizuko/mount-allowlist.json")},
		{"user from XDG", ModeUser, env("HOME", "/home/u", "XDG_DATA_HOME", "/d", "XDG_CONFIG_HOME", "/c", "XDG_RUNTIME_DIR", "/r"),
			userDefaults("/d/arizuko", "/r/arizuko/arizukod.sock", "/c/arizuko/env", "/c/pub/arizuko/mount-allowlist.json")},
		{"user ignores relative XDG", ModeUser, env("HOME", "/home/u", "XDG_DATA_HOME", "d", "XDG_CONFIG_HOME", "c", "XDG_RUNTIME_DIR", "r"),
			userDefaults("/home/u/.local/share/arizuko", runUser,
				"/home/u/.config/arizuko/env", "/home/u/.config/pub/arizuko/mount-allowlist.json")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := load(tc.mode, missing(t), false, tc.getenv)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestUserWithoutHome(t *testing.T) {
	_, err := load(ModeUser, "", false, env("XDG_RUNTIME_DIR", "/r"))
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "data_dir" || !strings.Contains(err.Error(), "HOME") {
		t.Fatalf("err = %v, want a data_dir error naming HOME", err)
	}
	c, err := load(ModeUser, "", false, env("DATA_DIR", "/d", "XDG_CONFIG_HOME", "/c"))
	if err != nil {
		t.Fatalf("with DATA_DIR and XDG_CONFIG_HOME: %v", err)
	}
	if c.DataDir != "/d" || c.EnvFile != "/c/arizuko/env" {
		t.Errorf("got %+v", c)
	}
}

func TestDefaultPath(t *testing.T) {
	for _, tc := range []struct {
		mode   Mode
		getenv func(string) string
		want   string
	}{
		{ModeSystem, env("HOME", "/home/u"), "/etc/arizuko/arizukod.toml"},
		{ModeUser, env("HOME", "/home/u"), "/home/u/.config/arizuko/arizukod.toml"},
		{ModeUser, env("HOME", "/home/u", "XDG_CONFIG_HOME", "/c"), "/c/arizuko/arizukod.toml"},
		{ModeUser, env("HOME", "/home/u", "XDG_CONFIG_HOME", "rel"), "/home/u/.config/arizuko/arizukod.toml"},
		{ModeUser, env(), ""},
	} {
		if got := DefaultPath(tc.mode, tc.getenv); got != tc.want {
			t.Errorf("DefaultPath(%v) = %q, want %q", tc.mode, got, tc.want)
		}
	}
}

func TestEveryKey(t *testing.T) {
	prague, err := time.LoadLocation("Europe/Prague")
	if err != nil {
		if os.Getenv("ARIZUKO_REQUIRE_ENGINES") == "1" {
			t.Fatal("no time zone database (the suite requires tzdata):", err)
		}
		t.Skip("no time zone database:", err)
	}
	for _, tc := range []struct {
		toml string
		want func(c *Config)
	}{
		{`data_dir = "/srv/arizuko/"`, func(c *Config) { c.DataDir = "/srv/arizuko"; c.Instance = "" }},
		{`image = "registry.example/agents/claude:1.2@sha256:abc"`, func(c *Config) { c.Image = "registry.example/agents/claude:1.2@sha256:abc" }},
		{`run_timeout = "1h30m"`, func(c *Config) { c.RunTimeout = 90 * time.Minute }},
		{`run_timeout = "10s"`, func(c *Config) { c.RunTimeout = 10 * time.Second }},
		{`stop_grace = "3s"`, func(c *Config) { c.StopGrace = 3 * time.Second }},
		{`max_running = 1000`, func(c *Config) { c.MaxRunning, c.Prepared = 1000, 1000 }},
		{`prepared = 0`, func(c *Config) { c.Prepared = 0 }},
		{`warm_agents = 0`, func(c *Config) { c.WarmAgents = 0 }},
		{`warm_agents = 8`, func(c *Config) { c.WarmAgents = 8 }},
		{`warm_min_available = "512m"`, func(c *Config) { c.WarmMinAvailable = 512 << 20 }},
		{`warm_min_available = "0"`, func(c *Config) { c.WarmMinAvailable = 0 }},
		{`engine = "docker"`, func(c *Config) { c.Engine = "docker" }},
		{`engine = "podman"`, func(c *Config) { c.Engine = "podman" }},
		{`engine_socket = "unix:///run/podman/podman.sock"`, func(c *Config) { c.EngineSocket = "unix:///run/podman/podman.sock" }},
		{`engine_socket = "tcp://10.0.0.2:2375"`, func(c *Config) { c.EngineSocket = "tcp://10.0.0.2:2375" }},
		{`listen = "/run/a/b.sock"`, func(c *Config) { c.Listen = "/run/a/b.sock" }},
		{`listen = "unix:/run/a/b.sock"`, func(c *Config) { c.Listen = "/run/a/b.sock" }},
		{`listen = "unix:///run/a/b.sock"`, func(c *Config) { c.Listen = "/run/a/b.sock" }},
		{`socket_mode = "0600"`, func(c *Config) { c.SocketMode = 0o600 }},
		{`socket_mode = "0o666"`, func(c *Config) { c.SocketMode = 0o666 }},
		{`allow_group = "arizuko"`, func(c *Config) { c.AllowGroup = "arizuko" }},
		{`allow_group = "_svc.team-1"`, func(c *Config) { c.AllowGroup = "_svc.team-1" }},
		{`skills_dir = "/opt/skills"`, func(c *Config) { c.SkillsDir = "/opt/skills" }},
		{`web_dir = "/usr/share/arizuko/web"`, func(c *Config) { c.WebDir = "/usr/share/arizuko/web" }},
		{`env_file = "/etc/arizuko/other.env"`, func(c *Config) { c.EnvFile = "/etc/arizuko/other.env" }},
		{`env_file = ""`, func(c *Config) { c.EnvFile = "" }},
		{`env_allow = ["MY_TOKEN", "Other_2"]`, func(c *Config) { c.EnvAllow = []string{"MY_TOKEN", "Other_2"} }},
		{`env_allow = []`, func(c *Config) { c.EnvAllow = []string{} }},
		{`allowlist = "/etc/arizuko/mounts.json"`, func(c *Config) { c.Allowlist = "/etc/arizuko/mounts.json" }},
		{`instance = "prod-1"`, func(c *Config) { c.Instance = "prod-1" }},
		{`instance = ""`, func(*Config) {}},
		{`timezone = "Europe/Prague"`, func(c *Config) { c.Location = prague }},
		{`timezone = "UTC"`, func(c *Config) { c.Location = time.UTC }},
		{`retry_max = 0`, func(c *Config) { c.RetryMax = 0 }},
		{`retry_backoff = "1m"`, func(c *Config) { c.RetryBackoff = time.Minute }},
		{"[limits]\nmemory = \"512m\"", func(c *Config) { c.Limits.MemoryBytes = 512 << 20 }},
		{"[limits]\ncpus = 0.5", func(c *Config) { c.Limits.NanoCPUs = 5e8 }},
		{"[limits]\ncpus = 4", func(c *Config) { c.Limits.NanoCPUs = 4e9 }},
		{"[limits]\npids = 100", func(c *Config) { c.Limits.PidsLimit = 100 }},
		{"[limits]\nnetwork = \"bridge\"", func(c *Config) { c.Limits.Network = "bridge" }},
		{"[limits]\nnetwork = \"slirp\"", func(c *Config) { c.Limits.Network = "slirp4netns" }},
		{"[limits]\nnetwork = \"pasta\"", func(c *Config) { c.Limits.Network = "pasta" }},
		{"[limits]\nnetwork = \"agents\"\nallowed_networks = [\"agents\"]", func(c *Config) {
			c.Limits.Network, c.Limits.AllowedNetworks = "agents", []string{"agents"}
		}},
		{"limits.allowed_networks = [\"arizuko-net\", \"b.2\"]\nlimits.network = \"arizuko-net\"", func(c *Config) {
			c.Limits.Network, c.Limits.AllowedNetworks = "arizuko-net", []string{"arizuko-net", "b.2"}
		}},
		{"[limits]\nallowed_networks = []", func(c *Config) { c.Limits.AllowedNetworks = []string{} }},
		{"[limits]\nruntime = \"runsc\"\nallowed_runtimes = [\"runc\", \"runsc\"]", func(c *Config) {
			c.Limits.Runtime, c.Limits.AllowedRuntimes = "runsc", []string{"runc", "runsc"}
		}},
		{"[limits]\nallowed_runtimes = [\"runsc\"]", func(c *Config) { c.Limits.AllowedRuntimes = []string{"runsc"} }},
		{"[limits]\nallow_unlimited = true", func(c *Config) { c.Limits.AllowUnlimited = true }},
		{"[limits]\nallow_unlimited = false", func(*Config) {}},
		{"limits = { pids = 64 }", func(c *Config) { c.Limits.PidsLimit = 64 }},
		{"[memory]\ndiary_max = 30", func(c *Config) { c.Memory.DiaryMax = 30 }},
		{"[memory]\nepisodes_max = 1", func(c *Config) { c.Memory.EpisodesMax = 1 }},
		{"[limits]\n[memory]", func(*Config) {}},
		{"[model]\nupstream = \"http://127.0.0.1:8080/\"", func(c *Config) { c.Model.Upstream = "http://127.0.0.1:8080" }},
		{"[model]\napi_key_file = \"/etc/arizuko/anthropic-api-key\"", func(c *Config) { c.Model.APIKeyFile = "/etc/arizuko/anthropic-api-key" }},
		{"[model]\noauth_token_file = \"/etc/arizuko/oauth\"", func(c *Config) { c.Model.OAuthTokenFile = "/etc/arizuko/oauth" }},
		{"[model]\ncredentials_dir = \"/srv/creds\"", func(c *Config) { c.Model.CredentialsDir = "/srv/creds" }},
		{"[metrics]\nlisten = \"127.0.0.1:9464\"", func(c *Config) { c.Metrics.Listen = "127.0.0.1:9464" }},
		{"[metrics]\nlisten = \"[::1]:9464\"", func(c *Config) { c.Metrics.Listen = "[::1]:9464" }},
		{"[metrics]\nlisten = \"localhost:9464\"", func(c *Config) { c.Metrics.Listen = "127.0.0.1:9464" }},
		{"[metrics]\nlisten = \"\"", func(*Config) {}},
		{"[kubernetes]\nrelay_listen = \"0.0.0.0:7443\"", func(c *Config) { c.Kubernetes.RelayListen = "0.0.0.0:7443" }},
		{"[tracing]\nendpoint = \"http://127.0.0.1:4318\"", func(c *Config) { c.Tracing.Endpoint = "http://127.0.0.1:4318" }},
		{"[tracing]\nendpoint = \"https://otel.example.com/otlp/v1/traces\"", func(c *Config) { c.Tracing.Endpoint = "https://otel.example.com/otlp/v1/traces" }},
		{"[tracing]\nendpoint = \"\"", func(*Config) {}},
		{"engine = \"kubernetes\"", func(c *Config) { c.Engine = "kubernetes" }},
		{"[kubernetes]\nkubeconfig = \"/etc/arizuko/kubeconfig\"\nnamespace = \"turns-1\"\nno_network_class = \"nonet.arizuko.io\"\nnode_ipc_dir = \"/run/arizuko-node/ipc\"\npod_pids_limit = 512", func(c *Config) {
			c.Kubernetes = KubeConf{Kubeconfig: "/etc/arizuko/kubeconfig", Namespace: "turns-1", NoNetworkClass: "nonet.arizuko.io", NodeIPCDir: "/run/arizuko-node/ipc", PodPidsLimit: 512}
		}},
		{"[kubernetes]\nnode_selector = { type = \"kwok\", \"arizuko.io/turns\" = \"true\" }\ntolerations = [\"kwok.x-k8s.io/node=fake:NoSchedule\", \"arizuko.io/turns\"]", func(c *Config) {
			c.Kubernetes.NodeSelector = map[string]string{"type": "kwok", "arizuko.io/turns": "true"}
			c.Kubernetes.Tolerations = []string{"kwok.x-k8s.io/node=fake:NoSchedule", "arizuko.io/turns"}
		}},
		{"[kubernetes.node_selector]\n\"arizuko.io/turns\" = \"true\"", func(c *Config) { c.Kubernetes.NodeSelector = map[string]string{"arizuko.io/turns": "true"} }},
		{"[retention]\ninterval = \"0\"", func(c *Config) { c.Retention.Interval = 0 }},
		{"[retention]\ninterval = \"10m\"", func(c *Config) { c.Retention.Interval = 10 * time.Minute }},
		{"[retention]\nruns_max_age = \"7d\"\nruns_max_count = 0", func(c *Config) { c.Retention.RunsMaxAge, c.Retention.RunsMaxCount = 7*24*time.Hour, 0 }},
		{"[retention]\ninbox_max_age = \"0d\"\ninbox_max_count = 5", func(c *Config) { c.Retention.InboxMaxAge, c.Retention.InboxMaxCount = 0, 5 }},
		{"[retention]\noutbox_max_age = \"36h\"\noutbox_max_count = 1", func(c *Config) { c.Retention.OutboxMaxAge, c.Retention.OutboxMaxCount = 36*time.Hour, 1 }},
		{"[retention]\nlogs_max_age = \"0s\"\nlogs_max_count = 3", func(c *Config) { c.Retention.LogsMaxAge, c.Retention.LogsMaxCount = 0, 3 }},
	} {
		t.Run(tc.toml, func(t *testing.T) {
			p := writeFile(t, tc.toml+"\n")
			got, err := Load(ModeSystem, p, env())
			if err != nil {
				t.Fatal(err)
			}
			want := systemDefaults()
			want.Source = p
			tc.want(want)
			if want.Instance == "" {
				sum := sha256.Sum256([]byte(want.DataDir))
				want.Instance = hex.EncodeToString(sum[:6])
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestBadValues(t *testing.T) {
	for _, tc := range []struct {
		toml string
		key  string
		line int
		want string
	}{
		{"\n\nrun_timeout = \"5q\"", "run_timeout", 3, `"5q": not a duration`},
		{`run_timeout = "9s"`, "run_timeout", 1, "between 10s and 24h"},
		{`run_timeout = "25h"`, "run_timeout", 1, "between"},
		{`run_timeout = 600`, "run_timeout", 1, "want a string, not an integer"},
		{`stop_grace = "0s"`, "stop_grace", 1, "between 1s and 10m"},
		{`stop_grace = "-5s"`, "stop_grace", 1, "between"},
		{`max_running = 0`, "max_running", 1, "between 1 and 1000"},
		{`max_running = 1001`, "max_running", 1, "between 1 and 1000"},
		{`prepared = -1`, "prepared", 1, "between 0 and 1000"},
		{`warm_agents = -1`, "warm_agents", 1, "between 0 and 1000"},
		{`warm_min_available = "lots"`, "warm_min_available", 1, "lots"},
		{`warm_min_available = 2`, "warm_min_available", 1, "want a string"},
		{`max_running = "5"`, "max_running", 1, "want an integer, not a string"},
		{`max_running = 5.0`, "max_running", 1, "want an integer, not a float"},
		{`data_dir = "var/lib/arizuko"`, "data_dir", 1, "not an absolute path"},
		{`data_dir = ""`, "data_dir", 1, "must not be empty"},
		{`data_dir = "/"`, "data_dir", 1, "root directory"},
		{`data_dir = "/a\nb"`, "data_dir", 1, "control character"},
		{`data_dir = ["/x"]`, "data_dir", 1, "want a string, not an array"},
		{`data_dir = 1979-05-27`, "data_dir", 1, "want a string, not a date-time"},
		{`image = ""`, "image", 1, "must not be empty"},
		{`image = "--privileged"`, "image", 1, "starts with a letter or a digit"},
		{`image = "a b"`, "image", 1, "not an image reference"},
		{`engine = "containerd"`, "engine", 1, `"containerd": must be "podman", "docker", "kubernetes"`},
		{`engine_socket = "/run/podman/podman.sock"`, "engine_socket", 1, "scheme must be unix:// or tcp://"},
		{`engine_socket = "ssh://host/run/podman.sock"`, "engine_socket", 1, "scheme must be"},
		{`engine_socket = "unix://run/podman.sock"`, "engine_socket", 1, "three slashes"},
		{`engine_socket = "unix:///"`, "engine_socket", 1, "socket's absolute path"},
		{`engine_socket = "unix:"`, "engine_socket", 1, "socket's absolute path"},
		{`engine_socket = "unix:///run/x.sock?a=b"`, "engine_socket", 1, "want unix:///PATH"},
		{`engine_socket = "tcp://host"`, "engine_socket", 1, "tcp://HOST:PORT"},
		{`engine_socket = "tcp://host:99999"`, "engine_socket", 1, "not a port"},
		{`engine_socket = "tcp://host:2375/x"`, "engine_socket", 1, "no path"},
		{`listen = ":8080"`, "listen", 1, "TCP address; the API is local only"},
		{`listen = "tcp://127.0.0.1:80"`, "listen", 1, "TCP address"},
		{`listen = "localhost:80"`, "listen", 1, "TCP address"},
		{`listen = "arizukod.sock"`, "listen", 1, "not an absolute path"},
		{`listen = "unix:rel.sock"`, "listen", 1, "not an absolute path"},
		{`listen = "/` + strings.Repeat("x", 107) + `"`, "listen", 1, "longer than 107 bytes"},
		{`socket_mode = "660x"`, "socket_mode", 1, "not an octal permission mode"},
		{`socket_mode = "01777"`, "socket_mode", 1, "not an octal permission mode"},
		{`socket_mode = "0460"`, "socket_mode", 1, "owner must have read and write"},
		{`socket_mode = 0o660`, "socket_mode", 1, "want a string, not an integer"},
		{`allow_group = "1group"`, "allow_group", 1, "not a group name"},
		{`allow_group = "a b"`, "allow_group", 1, "not a group name"},
		{`allow_group = "` + strings.Repeat("g", 33) + `"`, "allow_group", 1, "not a group name"},
		{`skills_dir = "skills"`, "skills_dir", 1, "not an absolute path"},
		{`skills_dir = ""`, "skills_dir", 1, "must not be empty"},
		{`web_dir = "web"`, "web_dir", 1, "not an absolute path"},
		{`env_file = "env"`, "env_file", 1, "not an absolute path"},
		{`env_allow = "A"`, "env_allow", 1, "want an array of strings, not a string"},
		{`env_allow = ["A", 1]`, "env_allow", 1, "element 2: want a string"},
		{`env_allow = ["PATH"]`, "env_allow", 1, "PATH would change how the container runs"},
		{`env_allow = ["LD_PRELOAD"]`, "env_allow", 1, "LD_PRELOAD"},
		{`env_allow = ["A-B"]`, "env_allow", 1, "not a variable name"},
		{`allowlist = ""`, "allowlist", 1, "must not be empty"},
		{`instance = "-x"`, "instance", 1, "starting with a letter or digit"},
		{`instance = "a/b"`, "instance", 1, "want letters"},
		{`timezone = "Mars/Olympus"`, "timezone", 1, "unknown time zone"},
		{`timezone = "../etc/passwd"`, "timezone", 1, "unknown time zone"},
		{`timezone = ""`, "timezone", 1, "must not be empty"},
		{`retry_max = -1`, "retry_max", 1, "between 0 and 100"},
		{`retry_max = 101`, "retry_max", 1, "between 0 and 100"},
		{`retry_backoff = "500ms"`, "retry_backoff", 1, "between 1s and 24h"},
		{"[limits]\nmemory = \"1x\"", "limits.memory", 2, `"1x": not a memory size`},
		{"[limits]\nmemory = \"1m\"", "limits.memory", 2, "below the minimum of 6m"},
		{"[limits]\nmemory = 1073741824", "limits.memory", 2, "want a string, not an integer"},
		{"[limits]\ncpus = 0", "limits.cpus", 2, "between 0.01 and 1024"},
		{"[limits]\ncpus = 2000", "limits.cpus", 2, "between 0.01 and 1024"},
		{"[limits]\ncpus = nan", "limits.cpus", 2, "between 0.01 and 1024"},
		{"[limits]\ncpus = inf", "limits.cpus", 2, "between 0.01 and 1024"},
		{"[limits]\ncpus = \"2\"", "limits.cpus", 2, "want a number, not a string"},
		{"[limits]\npids = 8", "limits.pids", 2, "between 16 and 4194304"},
		{"[limits]\nnetwork = \"host\"", "limits.network", 2, "host's network"},
		{"[limits]\nnetwork = \"container:abc\"", "limits.network", 2, "share another network namespace"},
		{"[limits]\nnetwork = \"ns:/proc/1/ns/net\"", "limits.network", 2, "share another network namespace"},
		{"[limits]\nnetwork = \"\"", "limits.network", 2, "must not be empty"},
		{"[limits]\nnetwork = \"a b\"", "limits.network", 2, "want \"none\", \"bridge\""},
		{"\n[limits]\nnetwork = \"agents\"", "limits.network", 3, "not in limits.allowed_networks"},
		{"[limits]\nnetwork = \"agents\"\nallowed_networks = [\"other\"]", "limits.network", 2, "it lists other"},
		{"\n[limits]\nruntime = \"runsc\"", "limits.runtime", 3, "not in limits.allowed_runtimes"},
		{"[limits]\nruntime = \"runsc\"\nallowed_runtimes = [\"runc\"]", "limits.runtime", 2, "it lists runc"},
		{"[limits]\nruntime = \"/usr/bin/runsc\"", "limits.runtime", 2, "not a path"},
		{"[limits]\nallowed_runtimes = [\"runsc\", \"runsc\"]", "limits.allowed_runtimes", 2, "listed twice"},
		{"[limits]\nallowed_runtimes = [\"a b\"]", "limits.allowed_runtimes", 2, "OCI runtime's name"},
		{"[limits]\nallowed_networks = \"agents\"", "limits.allowed_networks", 2, "want an array of strings, not a string"},
		{"[limits]\nallowed_networks = [\"host\"]", "limits.allowed_networks", 2, "element 1: \"host\": an engine's reserved word"},
		{"[limits]\nallowed_networks = [\"a\", \"Bridge\"]", "limits.allowed_networks", 2, "element 2: \"Bridge\": an engine's reserved word"},
		{"[limits]\nallowed_networks = [\"container:x\"]", "limits.allowed_networks", 2, "element 1: \"container:x\": a network name is"},
		{"[limits]\nallowed_networks = [\"a\", \"a\"]", "limits.allowed_networks", 2, "listed twice"},
		{"[limits]\nallowed_networks = [1]", "limits.allowed_networks", 2, "element 1: want a string, not an integer"},
		{"[limits]\nallow_unlimited = \"yes\"", "limits.allow_unlimited", 2, "want true or false, not a string"},
		{"[limits]\nallow_unlimited = 1", "limits.allow_unlimited", 2, "want true or false, not an integer"},
		{"[memory]\ndiary_max = 0", "memory.diary_max", 2, "between 1 and 365"},
		{"[model]\nupstream = \"ftp://x\"", "model.upstream", 2, "want an http(s) URL"},
		{"[model]\nupstream = \"https://user:sk@x\"", "model.upstream", 2, "no user, query or fragment"},
		{"[model]\napi_key_file = \"key\"", "model.api_key_file", 2, "absolute"},
		{"[model]\nkey = \"sk-x\"", "model.key", 2, "unknown key"},
		{"[memory]\nepisodes_max = 101", "memory.episodes_max", 2, "between 1 and 100"},
		{"[metrics]\nlisten = \"0.0.0.0:9464\"", "metrics.listen", 2, "not a loopback address"},
		{"[metrics]\nlisten = \"192.168.1.2:9464\"", "metrics.listen", 2, "not a loopback address"},
		{"[metrics]\nlisten = \":9464\"", "metrics.listen", 2, "not a loopback address"},
		{"[metrics]\nlisten = \"example.com:9464\"", "metrics.listen", 2, "not a loopback address"},
		{"[metrics]\nlisten = \"127.0.0.1\"", "metrics.listen", 2, "want a loopback address and port"},
		{"[metrics]\nlisten = \"127.0.0.1:0\"", "metrics.listen", 2, "not a port"},
		{"[kubernetes]\nrelay_listen = \"7443\"", "kubernetes.relay_listen", 2, "want an address and port"},
		{"[kubernetes]\nrelay_listen = \":99999\"", "kubernetes.relay_listen", 2, "not a port"},
		{"[metrics]\nlisten = 9464", "metrics.listen", 2, "want a string, not an integer"},
		{"[tracing]\nendpoint = \"127.0.0.1:4318\"", "tracing.endpoint", 2, "want the collector's OTLP/HTTP URL"},
		{"[tracing]\nendpoint = \"grpc://127.0.0.1:4317\"", "tracing.endpoint", 2, "want the collector's OTLP/HTTP URL"},
		{"[tracing]\nendpoint = \"https://user:key@otel.example.com\"", "tracing.endpoint", 2, "OTEL_EXPORTER_OTLP_HEADERS"},
		{"[tracing]\nurl = \"http://127.0.0.1:4318\"", "tracing.url", 2, "unknown key"},
		{"engine = \"k8s\"", "engine", 1, `"kubernetes"`},
		{"[kubernetes]\nnamespace = \"Turns\"", "kubernetes.namespace", 2, "DNS label"},
		{"[kubernetes]\nno_network_class = \"\"", "kubernetes.no_network_class", 2, "must not be empty"},
		{"[kubernetes]\nno_network_class = \"a..b\"", "kubernetes.no_network_class", 2, "DNS subdomain"},
		{"[kubernetes]\nkubeconfig = \"kube/config\"", "kubernetes.kubeconfig", 2, "not an absolute path"},
		{"[kubernetes]\nnode_ipc_dir = \"ipc\"", "kubernetes.node_ipc_dir", 2, "not an absolute path"},
		{"[kubernetes]\npod_pids_limit = -1", "kubernetes.pod_pids_limit", 2, "must be between"},
		{"[kubernetes]\ncontext = \"x\"", "kubernetes.context", 2, "unknown key"},
		{"[kubernetes]\nnode_selector = \"type=kwok\"", "kubernetes.node_selector", 2, "want a table of node labels"},
		{"[kubernetes]\nnode_selector = { type = 1 }", "kubernetes.node_selector", 2, "type: want a string, not an integer"},
		{"[kubernetes]\nnode_selector = { \"a b\" = \"x\" }", "kubernetes.node_selector", 2, `key "a b"`},
		{"[kubernetes]\ntolerations = \"k=v:NoSchedule\"", "kubernetes.tolerations", 2, "want an array of strings"},
		{"[kubernetes]\ntolerations = [\"k=v:Never\"]", "kubernetes.tolerations", 2, `element 1: "k=v:Never": effect "Never"`},
		{"[kubernetes]\ntolerations = [\"=v\"]", "kubernetes.tolerations", 2, `want key[=value][:effect]: key ""`},
		{"[retention]\ninterval = \"1s\"", "retention.interval", 2, "must be 0 (never) or between 1m and 36500d"},
		{"[retention]\nruns_max_age = \"forever\"", "retention.runs_max_age", 2, "not a duration"},
		{"[retention]\nruns_max_age = \"99999d\"", "retention.runs_max_age", 2, "at most 36500d"},
		{"[retention]\nlogs_max_count = -1", "retention.logs_max_count", 2, "between 0 and 1073741824"},
		{"[retention]\nmax_age = \"1d\"", "retention.max_age", 2, "unknown key"},
		{"limits = 5", "limits", 1, "want a table, not an integer"},
		{"memory = \"1g\"", "memory", 1, "want a table, not a string"},
		{"[[limits]]\npids = 64", "limits", 1, "want a table, not an array of tables"},
		// Unknown keys, in any case spelling, at any level.
		{"image = \"x\"\nimgae = \"y\"", "imgae", 2, "unknown key"},
		{"Data_Dir = \"/x\"", "Data_Dir", 1, "unknown key"},
		{"DATA_DIR = \"/x\"", "DATA_DIR", 1, "unknown key"},
		{"\n[server]\nport = 1", "server", 2, "unknown key"},
		{"[limits]\nswap = \"1g\"", "limits.swap", 2, "unknown key"},
		{"[limits]\nMemory = \"1g\"", "limits.Memory", 2, "unknown key"},
		{"[limits.extra]\nx = 1", "limits.extra", 1, "unknown key"},
		// The first mistake in file order is the one reported.
		{"max_running = 0\nrun_timeout = \"x\"\nstop_grace = \"y\"", "max_running", 1, "between"},
	} {
		t.Run(tc.toml, func(t *testing.T) {
			p := writeFile(t, tc.toml+"\n")
			_, err := Load(ModeSystem, p, env())
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
			}
			if ce.Source != p || ce.Key != tc.key || ce.Line != tc.line {
				t.Errorf("err = %v: source %q key %q line %d, want %q %q %d", err, ce.Source, ce.Key, ce.Line, p, tc.key, tc.line)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, p+":"+strconv.Itoa(tc.line)+": "+tc.key+": ") || !strings.Contains(msg, tc.want) {
				t.Errorf("err = %q, want %q at line %d of %s, key %s", msg, tc.want, tc.line, p, tc.key)
			}
		})
	}
}

func TestBadFile(t *testing.T) {
	for _, tc := range []struct {
		toml string
		line int
		want string
	}{
		{"data_dir = ", 1, "invalid TOML"},
		{"\n\nimage = \"a\"\nimage = \"b\"", 4, "invalid TOML"},
		{"[limits]\n[limits]", 2, "invalid TOML"},
		{"image = \"\xff\"", 1, "invalid TOML"},
	} {
		p := writeFile(t, tc.toml+"\n")
		_, err := Load(ModeSystem, p, env())
		var ce *Error
		if !errors.As(err, &ce) || ce.Source != p || ce.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %s at %s:%d", tc.toml, err, tc.want, p, tc.line)
		}
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	gone := filepath.Join(dir, "gone.toml")

	_, err := Load(ModeSystem, gone, env())
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), gone) {
		t.Errorf("missing explicit file: err = %v, want ErrNotExist naming %s", err, gone)
	}
	c, err := load(ModeSystem, gone, false, env())
	if err != nil || c.Source != SourceDefaults {
		t.Errorf("missing default file: %v, %+v", err, c)
	}
	c, err = Load(ModeUser, "", env("HOME", dir, "XDG_RUNTIME_DIR", "/r"))
	if err != nil || c.Source != SourceDefaults {
		t.Errorf("missing user default file: %v, %+v", err, c)
	}
	userFile := filepath.Join(dir, ".config/arizuko/arizukod.toml")
	if err := os.MkdirAll(filepath.Dir(userFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(userFile, []byte("max_running = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = Load(ModeUser, "", env("HOME", dir, "XDG_RUNTIME_DIR", "/r"))
	if err != nil || c.Source != userFile || c.MaxRunning != 2 {
		t.Errorf("user default file: %v, %+v", err, c)
	}

	_, err = Load(ModeSystem, dir, env())
	var ce *Error
	if !errors.As(err, &ce) || ce.Source != dir || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: err = %v", err)
	}
	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, []byte(strings.Repeat("#\n", MaxFileSize)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err = Load(ModeSystem, big, env()); !errors.As(err, &ce) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: err = %v", err)
	}
	if _, err := Load(Mode(7), "", env()); err == nil {
		t.Error("Mode(7) accepted")
	}
}

func TestEnvironment(t *testing.T) {
	file := writeFile(t, `data_dir = "/from/file"
image = "file/image:1"
run_timeout = "5m"
listen = "/from/file.sock"
max_running = 3
`)
	for _, tc := range []struct {
		name   string
		getenv func(string) string
		want   func(c *Config)
	}{
		{"file only", env(), func(*Config) {}},
		{"empty variables are unset", env("DATA_DIR", "", "LISTEN_ADDR", ""), func(*Config) {}},
		{"DATA_DIR", env("DATA_DIR", "/srv/env/"), func(c *Config) { c.DataDir = "/srv/env" }},
		{"CONTAINER_IMAGE", env("CONTAINER_IMAGE", "env/image:2"), func(c *Config) { c.Image = "env/image:2" }},
		{"RUNED_RUN_TIMEOUT", env("RUNED_RUN_TIMEOUT", "45m"), func(c *Config) { c.RunTimeout = 45 * time.Minute }},
		{"LISTEN_ADDR path", env("LISTEN_ADDR", "/run/env.sock"), func(c *Config) { c.Listen = "/run/env.sock" }},
		{"LISTEN_ADDR unix:", env("LISTEN_ADDR", "unix:/run/env.sock"), func(c *Config) { c.Listen = "/run/env.sock" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Load(ModeSystem, file, tc.getenv)
			if err != nil {
				t.Fatal(err)
			}
			want := systemDefaults()
			want.Source = file
			want.DataDir, want.Image, want.RunTimeout, want.Listen, want.MaxRunning, want.Prepared = "/from/file", "file/image:1", 5*time.Minute, "/from/file.sock", 3, 3
			tc.want(want)
			sum := sha256.Sum256([]byte(want.DataDir))
			want.Instance = hex.EncodeToString(sum[:6])
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestEnvironmentErrors(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
	}{
		{"DATA_DIR", "relative/dir", "not an absolute path"},
		{"CONTAINER_IMAGE", "-x", "starts with a letter or a digit"},
		{"RUNED_RUN_TIMEOUT", "20", "not a duration"},
		{"RUNED_RUN_TIMEOUT", "1s", "between 10s"},
		{"LISTEN_ADDR", ":8080", "TCP address; the API is local only"},
		{"LISTEN_ADDR", "0.0.0.0:8080", "TCP address"},
		{"LISTEN_ADDR", "tcp://localhost:8080", "TCP address"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			_, err := load(ModeSystem, missing(t), false, env(tc.name, tc.value))
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != tc.name || ce.Source != "environment" ||
				!strings.HasPrefix(err.Error(), "environment: "+tc.name+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q naming %s", err, tc.want, tc.name)
			}
		})
	}
}

// settingLine is a commented-out setting of the sample: "#key = value".
var settingLine = regexp.MustCompile(`(?m)^#([a-z_]+ = .*)$`)

// TestSample keeps testdata/arizukod.toml, shipped as the default file,
// accurate: it documents every key exactly once with its system default.
func TestSample(t *testing.T) {
	data, err := os.ReadFile("testdata/arizukod.toml")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	table := ""
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "[") {
			table = strings.Trim(line, "[]") + "."
		}
		if m := settingLine.FindStringSubmatch(line); m != nil {
			keys = append(keys, table+strings.SplitN(m[1], " ", 2)[0])
		}
	}
	var all []string
	for k := range fileKeys {
		all = append(all, k)
	}
	slices.Sort(all)
	slices.Sort(keys)
	if !slices.Equal(keys, all) {
		t.Errorf("sample documents %v\nwant exactly %v", keys, all)
	}
	for name, text := range map[string]string{
		"as shipped":  string(data),
		"uncommented": settingLine.ReplaceAllString(string(data), "$1"),
	} {
		p := writeFile(t, text)
		got, err := Load(ModeSystem, p, env())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := systemDefaults()
		want.Source = p
		if name == "uncommented" {
			want.EnvAllow = []string{}
			want.Limits.AllowedNetworks = []string{}
			want.Limits.AllowedRuntimes = []string{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", name, got, want)
		}
	}
}
