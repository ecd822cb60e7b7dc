package sidecar

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/session"
)

var update = flag.Bool("update", false, "rewrite golden files")

const goodQuadlet = `# A sidecar as a Quadlet unit.
[Unit]
Description=Weather MCP server

[Container]
Image=localhost/weather-mcp:1.2
Exec=--log-level "debug mode"
Environment=TZ=UTC "GREETING=hello world"
Network=none
ReadOnly=true
DropCapability=all
NoNewPrivileges=true
PodmanArgs=--memory=512m --cpus 2
PidsLimit=128
Tmpfs=/cache:rw,size=16m
Label=org.example.team=weather
Pull=never
StopTimeout=10
`

func TestValidate(t *testing.T) {
	q := func(extra string) string { return "[Container]\nImage=localhost/x\n" + extra }
	for _, tc := range []struct {
		name string
		cs   []Config
		want string // a part of the error; empty: valid
	}{
		{"fields", []Config{{Name: "echo", Image: "localhost/echo:1", Command: []string{"-v"}, Env: map[string]string{"API_KEY": "x"}, Memory: "64m", CPUs: 0.5, Network: "bridge"}}, ""},
		{"quadlet", []Config{{Name: "weather", Quadlet: goodQuadlet}}, ""},
		{"none", nil, ""},
		{"two", []Config{{Name: "a", Image: "i"}, {Name: "b_2", Image: "i"}}, ""},
		{"duplicate", []Config{{Name: "a", Image: "i"}, {Name: "a", Image: "j"}}, `name "a" is used twice`},
		{"empty name", []Config{{Image: "i"}}, "must be 1-32 bytes"},
		{"long name", []Config{{Name: strings.Repeat("a", 33), Image: "i"}}, "must be 1-32 bytes"},
		{"dash", []Config{{Name: "web-search", Image: "i"}}, "names are [a-z0-9][a-z0-9_]*"},
		{"upper", []Config{{Name: "Echo", Image: "i"}}, "names are"},
		{"underscore first", []Config{{Name: "_x", Image: "i"}}, "names are"},
		{"no image", []Config{{Name: "a"}}, "image: required"},
		{"flag image", []Config{{Name: "a", Image: "--privileged"}}, "starts with '-'"},
		{"space image", []Config{{Name: "a", Image: "a b"}}, "printable ASCII"},
		{"lone semicolon", []Config{{Name: "a", Image: "i", Command: []string{";"}}}, "lone ';'"},
		{"nul arg", []Config{{Name: "a", Image: "i", Command: []string{"a\x00b"}}}, "command[0]"},
		{"env name", []Config{{Name: "a", Image: "i", Env: map[string]string{"1X": "v"}}}, `env "1X"`},
		{"env reserved", []Config{{Name: "a", Image: "i", Env: map[string]string{"ARIZUKO_SIDECAR_SOCKET": "/x"}}}, "ARIZUKO_ prefix"},
		{"env newline", []Config{{Name: "a", Image: "i", Env: map[string]string{"K": "a\nb"}}}, "one line"},
		{"memory", []Config{{Name: "a", Image: "i", Memory: "lots"}}, "memory:"},
		{"cpus", []Config{{Name: "a", Image: "i", CPUs: -1}}, "cpus: -1 is out of range"},
		{"host network", []Config{{Name: "a", Image: "i", Network: "host"}}, "network: network not allowed: \"host\" would give the agent the host's network"},
		{"container network", []Config{{Name: "a", Image: "i", Network: "container:x"}}, "share another network namespace"},
		{"namespace path", []Config{{Name: "a", Image: "i", Network: "ns:/proc/1/ns/net"}}, "share another network namespace"},
		{"allowed network", []Config{{Name: "a", Image: "i", Network: "agents"}}, ""},
		{"slirp", []Config{{Name: "a", Image: "i", Network: "slirp"}}, ""},
		{"pasta", []Config{{Name: "a", Image: "i", Network: "pasta"}}, ""},
		{"network not allowed", []Config{{Name: "a", Image: "i", Network: "lab"}}, "\"lab\" is not in limits.allowed_networks"},
		{"junk network", []Config{{Name: "a", Image: "i", Network: "a b"}}, "a network name is letters"},
		{"both", []Config{{Name: "a", Image: "i", Quadlet: goodQuadlet}}, "quadlet replaces the fields; remove image"},
		{"bad unit", []Config{{Name: "a", Quadlet: "[Container]\n"}}, "no Image"},
		{"unknown key", []Config{{Name: "a", Quadlet: q("Frobnicate=1\n")}}, "does not know the key Frobnicate"},
		{"unmodelled keys", []Config{{Name: "a", Quadlet: q("Secret=token\nAddDevice=/dev/fuse\n[Service]\nExecStartPre=/bin/true\n")}}, "unsupported keys: Container.AddDevice, Container.Secret, Service.ExecStartPre"},
		{"container name", []Config{{Name: "a", Quadlet: q("ContainerName=x\n")}}, "ContainerName is not allowed"},
		{"user", []Config{{Name: "a", Quadlet: q("User=1000\n")}}, "User is not allowed"},
		{"volume", []Config{{Name: "a", Quadlet: q("Volume=/etc:/etc\n")}}, "Volume is not allowed"},
		{"mount", []Config{{Name: "a", Quadlet: q("Mount=type=bind,source=/,destination=/host\n")}}, "Mount is not allowed"},
		{"env file", []Config{{Name: "a", Quadlet: q("EnvironmentFile=/etc/shadow\n")}}, "EnvironmentFile is not allowed"},
		{"add cap", []Config{{Name: "a", Quadlet: q("AddCapability=SYS_ADMIN\n")}}, "AddCapability is not allowed"},
		{"writable root", []Config{{Name: "a", Quadlet: q("ReadOnly=false\n")}}, "ReadOnly is not allowed"},
		{"new privileges", []Config{{Name: "a", Quadlet: q("NoNewPrivileges=no\n")}}, "NoNewPrivileges is not allowed"},
		{"pull", []Config{{Name: "a", Quadlet: q("Pull=always\n")}}, "Pull is not allowed"},
		{"ulimit", []Config{{Name: "a", Quadlet: q("Ulimit=nofile=99999:99999\n")}}, "Ulimit is not allowed"},
		{"podman args", []Config{{Name: "a", Quadlet: q("PodmanArgs=--privileged\n")}}, `PodmanArgs "--privileged" is not allowed`},
		{"restart", []Config{{Name: "a", Quadlet: q("[Service]\nRestart=always\n")}}, "Restart is not allowed"},
		{"install", []Config{{Name: "a", Quadlet: q("[Install]\nWantedBy=default.target\n")}}, "WantedBy is not allowed"},
		{"two networks", []Config{{Name: "a", Quadlet: q("Network=a\nNetwork=b\n")}}, "one network at most"},
		{"quadlet host network", []Config{{Name: "a", Quadlet: q("Network=host\n")}}, "host's network"},
		{"quadlet container network", []Config{{Name: "a", Quadlet: q("Network=container:abc\n")}}, "share another network namespace"},
		{"quadlet allowed network", []Config{{Name: "a", Quadlet: q("Network=agents\n")}}, ""},
		{"quadlet network not allowed", []Config{{Name: "a", Quadlet: q("Network=lab\n")}}, "not in limits.allowed_networks"},
		{"tmpfs over tmp", []Config{{Name: "a", Quadlet: q("Tmpfs=/tmp\n")}}, "Tmpfs /tmp"},
		{"tmpfs over sockets", []Config{{Name: "a", Quadlet: q("Tmpfs=/var/run/pub/arizuko\n")}}, "Tmpfs /var/run/pub/arizuko"},
		{"arizuko label", []Config{{Name: "a", Quadlet: q("Label=io.arizuko.role=agent\n")}}, "io.arizuko. labels"},
		{"pids", []Config{{Name: "a", Quadlet: q("PidsLimit=-1\n")}}, "PidsLimit"},
		{"quadlet memory", []Config{{Name: "a", Quadlet: q("PodmanArgs=--memory=1x\n")}}, "Memory:"},
		{"quadlet env", []Config{{Name: "a", Quadlet: q("Environment=ARIZUKO_FOLDER=x\n")}}, "ARIZUKO_ prefix"},
		{"too many", slices.Repeat([]Config{{Name: "a", Image: "i"}}, MaxSidecars+1), "at most 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.cs, []string{"agents"})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("no error, want one with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not say %q", err, tc.want)
			case err != nil && !errors.Is(err, ErrBadConfig):
				t.Fatalf("error %q is not ErrBadConfig", err)
			}
		})
	}
}

func testUnit(t *testing.T, c Config, rootless bool) *Unit {
	t.Helper()
	o := UnitOptions{Instance: "abc123", RunID: "run-1", SocketDir: "/srv/arizuko/ipc/main/research/sidecars"}
	if !rootless {
		o.User = "1000:1000"
	}
	u, err := NewUnit(groupfolder.Folder("main/research"), c, o)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestUnitNetwork: a unit gets the network as engine.CheckNetwork names it, and a named
// network only while the operator allows it.
func TestUnitNetwork(t *testing.T) {
	for _, tc := range []struct {
		network  string
		networks []string
		want     string // the unit's network; empty: refused
	}{
		{"", nil, "none"},
		{"slirp", nil, "slirp4netns"},
		{"bridge", nil, "bridge"},
		{"agents", []string{"agents"}, "agents"},
		{"agents", nil, ""},
		{"host", []string{"host"}, ""},
		{"container:abc", []string{"container:abc"}, ""},
	} {
		u, err := NewUnit("main", Config{Name: "echo", Image: "i", Network: tc.network},
			UnitOptions{Instance: "i", RunID: "r", SocketDir: "/srv/ipc/main/sidecars", Networks: tc.networks})
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%q with %v: a unit on %v, want a refusal", tc.network, tc.networks, u.Container.Network)
		case tc.want != "" && (err != nil || !slices.Equal(u.Container.Network, []string{tc.want})):
			t.Errorf("%q with %v: %v, want network %s", tc.network, tc.networks, err, tc.want)
		}
	}
}

// TestHardening: whatever the config says, the container has the agent's hardening, and
// every rendering of it carries every part of engine.Hardened: the Quadlet unit, and the
// podman and docker command lines a transient unit runs.
func TestHardening(t *testing.T) {
	for _, c := range []Config{
		{Name: "echo", Image: "localhost/echo:1"},
		{Name: "weather", Quadlet: goodQuadlet},
	} {
		u := testUnit(t, c, false)
		q := u.Container
		if q.ContainerName != NamePrefix("abc123")+"main-research-"+c.Name || u.Service != q.ContainerName+".service" {
			t.Errorf("%s: names %q %q", c.Name, q.ContainerName, u.Service)
		}
		if len(q.AddCapability) > 0 {
			t.Errorf("%s: capabilities added: %v", c.Name, q.AddCapability)
		}
		argv := func(kind, cli string) []string {
			a, err := u.CommandLine(kind, cli, "unix:///run/engine.sock", "/run/sc.env", "/run/sc.cid")
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		for _, r := range []struct {
			rendering string
			got       engine.Hardening
		}{
			{"quadlet unit", enginetest.QuadletHardening(q)},
			{"podman command line", enginetest.ArgvHardening(argv(kindPodman, "/usr/bin/podman"))},
			{"docker command line", enginetest.ArgvHardening(argv(kindDocker, "/usr/bin/docker"))},
		} {
			if want := engine.Hardened(); !reflect.DeepEqual(r.got, want) {
				t.Errorf("%s, %s: hardening %+v, want %+v", c.Name, r.rendering, r.got, want)
			}
		}
		if len(q.Mount) != 1 || len(q.Volume) > 0 || len(q.EnvironmentFile) > 0 || q.Pull != "never" || q.User != "1000:1000" {
			t.Errorf("%s: mounts, env files, pull or user: %+v", c.Name, q)
		}
		if q.Label[engine.LabelRole] != RoleSidecar || q.Label[engine.LabelInstance] != "abc123" || q.Label[engine.LabelFolder] != "main/research" || q.Label[engine.LabelRun] != "run-1" {
			t.Errorf("%s: labels %v", c.Name, q.Label)
		}
		if q.Environment[EnvSocket] != session.SidecarSocketDir+"/"+c.Name+".sock" || u.Socket() != "/srv/arizuko/ipc/main/research/sidecars/"+c.Name+".sock" {
			t.Errorf("%s: socket %q %q", c.Name, q.Environment[EnvSocket], u.Socket())
		}
		if !strings.HasSuffix(q.Description, " [instance abc123]") {
			t.Errorf("%s: description %q", c.Name, q.Description)
		}
	}
	u := testUnit(t, Config{Name: "weather", Quadlet: goodQuadlet}, true)
	if u.MemoryBytes != 512<<20 || u.NanoCPUs != 2e9 || u.PidsLimit != 128 || u.Container.User != "" {
		t.Errorf("quadlet limits: %d %d %d %q", u.MemoryBytes, u.NanoCPUs, u.PidsLimit, u.Container.User)
	}
	if u.Env["GREETING"] != "hello world" || u.Container.Environment["GREETING"] != "" {
		t.Errorf("the config's env must stay out of the container's Environment: %v / %v", u.Env, u.Container.Environment)
	}
	d := testUnit(t, Config{Name: "echo", Image: "i"}, true)
	if d.MemoryBytes != DefaultMemory || d.NanoCPUs != DefaultNanoCPUs || d.PidsLimit != DefaultPidsLimit || d.Container.Network[0] != "none" {
		t.Errorf("defaults: %d %d %d %v", d.MemoryBytes, d.NanoCPUs, d.PidsLimit, d.Container.Network)
	}
}

// TestNames: a sidecar's names carry its instance's tag (one length, hex, whatever the
// instance), so two instances never share one, nor do two folders or two sidecars; the
// longest folder with the longest sidecar name still makes a unit name systemd accepts.
func TestNames(t *testing.T) {
	if p := NamePrefix("abc123"); !regexp.MustCompile(`^arizuko-sc-[0-9a-f]{8}-$`).MatchString(p) {
		t.Fatalf("prefix %q", p)
	}
	long := func(last string) groupfolder.Folder {
		segs := []string{strings.Repeat("a", 63), strings.Repeat("b", 63), strings.Repeat("c", 63)}
		return groupfolder.Folder(strings.Join(append(segs, last), "/"))
	}
	longName := strings.Repeat("n", MaxNameLen)
	seen := map[string]string{}
	for _, tc := range []struct {
		instance string
		folder   groupfolder.Folder
		name     string
	}{
		{"abc123", "main", "echo"},
		{"def456", "main", "echo"},
		{"a-b", "c", "echo"},
		{"a", "b/c", "echo"},
		{"abc123", "main/research", "echo"},
		{"abc123", "main", "research_echo"},
		{"abc123", long(strings.Repeat("d", 63)), longName},
		{"abc123", long(strings.Repeat("d", 62) + "e"), longName},
		{"abc123", long("x"), longName},
	} {
		if err := tc.folder.Validate(); err != nil {
			t.Fatal(err)
		}
		n := ContainerName(tc.instance, tc.folder, tc.name)
		what := fmt.Sprintf("%s %s %s", tc.instance, tc.folder, tc.name)
		if !strings.HasPrefix(n, NamePrefix(tc.instance)) || !strings.HasSuffix(n, "-"+tc.name) || len(n+".service") > 255 {
			t.Errorf("%s: %q (%d bytes)", what, n, len(n))
		}
		if !regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`).MatchString(n) {
			t.Errorf("%s: %q is no container and unit name", what, n)
		}
		if other, ok := seen[n]; ok {
			t.Errorf("%s and %s share %q", what, other, n)
		}
		seen[n] = what
	}
	if n := ContainerName("abc123", "main/research", "echo"); n != NamePrefix("abc123")+"main-research-echo" {
		t.Errorf("a folder that fits is not cut: %q", n)
	}
}

// TestCommandLines: the command lines of a transient unit, per engine (golden), and the
// quadlet units they come from. The config's env never appears on them.
func TestCommandLines(t *testing.T) {
	var b strings.Builder
	for _, c := range []Config{
		{Name: "echo", Image: "localhost/echo:1", Command: []string{"--greeting", "hello world"}, Env: map[string]string{"API_KEY": "s3cr3t"}, Memory: "128m", CPUs: 0.5},
		{Name: "weather", Quadlet: goodQuadlet},
	} {
		u := testUnit(t, c, false)
		text, err := u.Container.Render()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("## " + c.Name + ".container\n" + string(text))
		for _, kind := range []string{"podman", "docker"} {
			files := "/srv/arizuko/sidecar-env/" + u.Container.ContainerName
			argv, err := u.CommandLine(kind, "/usr/bin/"+kind, "unix:///run/"+kind+".sock", files+".env", files+".cid")
			if err != nil {
				t.Fatalf("%s %s: %v", c.Name, kind, err)
			}
			line := strings.Join(argv, " ")
			if strings.Contains(line, "s3cr3t") || strings.Contains(line, "hello world\"") {
				t.Errorf("%s: the config's env is on the command line: %s", kind, line)
			}
			b.WriteString("## " + kind + "\n" + strings.Join(argv, "\n  ") + "\n")
			b.WriteString("## " + kind + " stop\n" + strings.Join(stopCommand(kind, "/usr/bin/"+kind, "unix:///run/"+kind+".sock", files+".cid", DefaultStopGrace), " ") + "\n")
			b.WriteString(strings.Join(removeCommand(kind, "/usr/bin/"+kind, "unix:///run/"+kind+".sock", files+".cid"), " ") + "\n")
		}
		b.WriteString("\n")
	}
	golden(t, "command-lines.txt", b.String())
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./sidecar -update)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs (go test ./sidecar -update rewrites it):\n%s", path, got)
	}
}

func TestEngineSpec(t *testing.T) {
	u := testUnit(t, Config{Name: "echo", Image: "localhost/echo:1", Env: map[string]string{"API_KEY": "k"}, Memory: "64m", CPUs: 0.25}, false)
	s, err := u.Spec()
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != NamePrefix("abc123")+"main-research-echo" || s.MemoryBytes != 64<<20 || s.NanoCPUs != 25e7 || s.PidsLimit != DefaultPidsLimit || s.Network != "none" || s.User != "1000:1000" {
		t.Errorf("spec %+v", s)
	}
	if !slices.Contains(s.Env, "API_KEY=k") || !slices.Contains(s.Env, EnvSocket+"=/var/run/pub/arizuko/sidecars/echo.sock") {
		t.Errorf("env %v", s.Env)
	}
	if len(s.Mounts) != 1 || s.Mounts[0].Target != session.SidecarSocketDir || s.Mounts[0].ReadOnly || len(s.Tmpfs) != 1 || s.Tmpfs[0].Target != "/tmp" {
		t.Errorf("mounts %v tmpfs %v", s.Mounts, s.Tmpfs)
	}
	_, err = testUnit(t, Config{Name: "echo", Image: "i", Command: []string{"-v"}}, false).Spec()
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "command (Exec)") {
		t.Errorf("a command on the engine: %v", err)
	}
}

func TestEnvFile(t *testing.T) {
	got := string(EnvFile(map[string]string{"B": "two words", "A": "x=y"}))
	if got != "A=x=y\nB=two words\n" {
		t.Fatalf("%q", got)
	}
}

// TestTarget: which systemd manager runs the sidecars' units. The packaged system
// service runs as the lingering user arizuko with INVOCATION_ID and no XDG_RUNTIME_DIR:
// its own user manager, in /run/user/UID, never the system manager (which refuses it).
func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		name       string
		service    bool
		runtimeDir string
		uid        int
		want       Mode
		runtime    string
	}{
		{"root system service", true, "", 0, ModeSystemdSystem, ""},
		{"root system service with a runtime dir", true, "/run/user/0", 0, ModeSystemdSystem, ""},
		{"packaged service as arizuko", true, "", 990, ModeSystemdUser, "/run/user/990"},
		{"user service", true, "/run/user/1000", 1000, ModeSystemdUser, "/run/user/1000"},
		{"user login", false, "/run/user/1000", 1000, ModeSystemdUser, "/run/user/1000"},
		{"user login, another runtime dir", false, "/srv/rt", 1000, ModeSystemdUser, "/srv/rt"},
		{"root login", false, "/run/user/0", 0, ModeSystemdUser, "/run/user/0"},
		{"runuser without a session", false, "", 990, ModeSystemdUser, ""},
		{"root without a session", false, "", 0, ModeSystemdUser, ""},
	} {
		mode, rt := target(tc.service, tc.runtimeDir, tc.uid)
		if mode != tc.want || rt != tc.runtime {
			t.Errorf("%s: %s %q, want %s %q", tc.name, mode, rt, tc.want, tc.runtime)
		}
	}
}

// TestDialNoManager: a runtime directory without a manager is ErrNoSystemd naming the
// socket it tried, at once; so is no runtime directory.
func TestDialNoManager(t *testing.T) {
	rt := t.TempDir()
	env := func(string) string { return "" }
	start := time.Now()
	_, err := dial(context.Background(), ModeSystemdUser, rt, env)
	if !errors.Is(err, ErrNoSystemd) || !strings.Contains(err.Error(), rt+"/systemd/private") {
		t.Fatalf("error %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %s", d)
	}
	if _, err := dial(context.Background(), ModeSystemdUser, "", env); !errors.Is(err, ErrNoSystemd) {
		t.Errorf("no runtime dir: %v", err)
	}
	if _, err := dial(context.Background(), ModeEngine, rt, env); err == nil || errors.Is(err, ErrNoSystemd) {
		t.Errorf("engine mode: %v", err)
	}
}

func TestRootJournal(t *testing.T) {
	if got := rootJournal(ModeSystemdUser, "arizuko-sc-main-echo.service"); got != "journalctl _SYSTEMD_USER_UNIT=arizuko-sc-main-echo.service" {
		t.Error(got)
	}
	if got := rootJournal(ModeSystemdSystem, "arizuko-sc-main-echo.service"); got != "journalctl -u arizuko-sc-main-echo.service" {
		t.Error(got)
	}
}

func TestUnavailable(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("sidecar x: %w", fmt.Errorf("%w (systemd-user): no socket", ErrNoSystemd)),
		fmt.Errorf("%w: denied", errDenied),
		fmt.Errorf("%w: exec: \"podman\": not found", errNoCLI),
	} {
		if !unavailable(err) {
			t.Errorf("%v: not unavailable", err)
		}
	}
	if unavailable(fmt.Errorf("%w: boom", ErrStart)) {
		t.Error("a failed start is not unavailability")
	}
}

func FuzzConfig(f *testing.F) {
	f.Add("echo", "localhost/echo:1", "-v", "K", "v", "64m", 0.5, "none", "")
	f.Add("weather", "", "", "", "", "", 0.0, "", goodQuadlet)
	f.Add("a", "", "", "", "", "", 0.0, "", "[Container]\nImage=x\nPodmanArgs=--cpus\n")
	f.Fuzz(func(t *testing.T, name, image, arg, envK, envV, memory string, cpus float64, network, unit string) {
		c := Config{Name: name, Image: image, Memory: memory, CPUs: cpus, Network: network, Quadlet: unit}
		if arg != "" {
			c.Command = []string{arg}
		}
		if envK != "" {
			c.Env = map[string]string{envK: envV}
		}
		if c.Validate([]string{"agents"}) != nil {
			return
		}
		u, err := NewUnit("main", c, UnitOptions{Instance: "i", RunID: "r", SocketDir: "/srv/ipc/main/sidecars", Networks: []string{"agents"}})
		if err != nil {
			t.Fatalf("valid config, no unit: %v", err)
		}
		if n := u.Container.Network[0]; n == "host" || strings.Contains(n, ":") {
			t.Fatalf("network %q", n)
		}
		if !isTrue(u.Container.ReadOnly) || !slices.Equal(u.Container.DropCapability, []string{"all"}) {
			t.Fatalf("not hardened: %+v", u.Container)
		}
		if _, err := u.CommandLine("podman", "/usr/bin/podman", "unix:///run/p.sock", "", "/run/sc.cid"); err != nil {
			t.Fatalf("valid config, no podman command line: %v", err)
		}
	})
}

func TestDBusErrors(t *testing.T) {
	wrap := func(name string) error { return fmt.Errorf("start transient unit x: %w", dbus.Error{Name: name}) }
	if !accessDenied(wrap("org.freedesktop.DBus.Error.AccessDenied")) || !accessDenied(wrap("org.freedesktop.DBus.Error.InteractiveAuthorizationRequired")) || accessDenied(wrap("org.freedesktop.systemd1.NoSuchUnit")) {
		t.Error("accessDenied")
	}
	if !noSuchUnit(wrap("org.freedesktop.systemd1.NoSuchUnit")) || noSuchUnit(errors.New("org.freedesktop.systemd1.NoSuchUnit")) {
		t.Error("noSuchUnit")
	}
}

// TestUnitRuntime: a sidecar runs under its group's OCI runtime: the docker command line
// of a transient unit and the engine's spec name it; the podman one cannot (the remote
// CLI has no --runtime: the service's own applies, which Start checks).
func TestUnitRuntime(t *testing.T) {
	for _, rt := range []string{"", "runsc"} {
		u, err := NewUnit("main", Config{Name: "echo", Image: "i"},
			UnitOptions{Instance: "i", RunID: "r", SocketDir: "/srv/ipc/main/sidecars", Runtime: rt})
		if err != nil {
			t.Fatal(err)
		}
		for kind, want := range map[string]string{"podman": "", "docker": "--runtime"} {
			argv, err := u.CommandLine(kind, kind, "unix:///run/e.sock", "", "/run/sc.cid")
			if err != nil {
				t.Fatal(err)
			}
			i := slices.Index(argv, want)
			switch {
			case (rt == "" || want == "") && slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "--runtime") }):
				t.Errorf("%s without a runtime: %q", kind, argv)
			case rt != "" && want != "" && (i < 0 || argv[i+1] != rt):
				t.Errorf("%s under %s: %q", kind, rt, argv)
			}
		}
		if s, err := u.Spec(); err != nil || s.Runtime != rt {
			t.Errorf("spec under %q: %+v, %v", rt, s, err)
		}
	}
}
