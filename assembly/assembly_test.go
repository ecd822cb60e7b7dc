package assembly

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/fakeengine"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/kube"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// secretValue is a value of the fixture's env file, which every part redacts.
const secretValue = "ghp_assemblyFixtureSecret0123456789"

// fixture writes a configuration file that sets every part a System wires (image,
// instance, timeout, limits, networks, memory, zone, skills, web, env file, allowlist) and
// returns its path, loaded as the daemon loads it.
func fixture(t *testing.T) (path string, load func() *config.Config) {
	t.Helper()
	t.Setenv("ARIZUKO_MODE", "user")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	for _, k := range []string{"DATA_DIR", "CONTAINER_IMAGE", "RUNED_RUN_TIMEOUT", "LISTEN_ADDR", "ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	extra := filepath.Join(dir, "extra")
	write("extra/note.txt", "note\n")
	write("skills/MIGRATION_VERSION", "1\n")
	write("skills/hello/SKILL.md", "---\nname: hello\ndescription: says hello\n---\nhello\n")
	write("web/index.html", "<p>web</p>\n")
	allow := write("allowlist/allow.json", fmt.Sprintf(`{"allowedRoots":[{"path":%q}]}`, extra))
	env := write("env", "GH_TOKEN="+secretValue+"\n")
	path = write("arizukod.toml", fmt.Sprintf(`data_dir = %q
image = "localhost/arizuko-agent:assembly"
instance = "assembly-test"
run_timeout = "7m"
stop_grace = "3s"
skills_dir = %q
web_dir = %q
env_file = %q
env_allow = ["GH_TOKEN"]
allowlist = %q
timezone = "Asia/Tokyo"
[limits]
memory = "768m"
pids = 300
allowed_networks = ["assembly-net"]
[memory]
diary_max = 3
episodes_max = 2
[model]
upstream = "http://127.0.0.1:9"
`, filepath.Join(dir, "data"), filepath.Join(dir, "skills"), filepath.Join(dir, "web"), env, allow))
	return path, func() *config.Config {
		t.Helper()
		cfg, err := config.Load(config.ModeUser, path, os.Getenv)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
}

// turnOf builds the System of mode over a fresh fake engine, runs one turn of main on
// it (the container says the secret on stderr), and returns the spec the engine got, the
// System (closed) and what the turn returned.
func turnOf(t *testing.T, cfg *config.Config, mode Mode) (engine.Spec, *System, string) {
	t.Helper()
	ctx := context.Background()
	eng := fakeengine.New(fakeengine.Script{Stdout: fakeengine.Answer(contract.Output{Status: contract.StatusOK, Result: "done"}),
		Stderr: "the agent says " + secretValue + "\n"})
	info, _ := eng.Info(ctx)
	o := Options{Mode: mode, Engine: eng, Folder: "main"}
	if mode == Serve {
		o.InfoFunc = func() engine.Info { return info }
	}
	s, err := New(ctx, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	extra := filepath.Join(filepath.Dir(cfg.DataDir), "extra")
	cc := fmt.Sprintf(`{"additional_mounts":[{"host_path":%q,"container_path":"notes","readonly":true}]}`, extra)
	if _, err := s.Store.UpsertGroup(ctx, store.Group{Folder: "main", ContainerConfig: []byte(cc)}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Builder.Run(ctx, turn.Request{RunID: "run-1", Folder: "main", Messages: []contract.Message{{Role: "user", Content: "hi"}}},
		s.Runner, turn.Watch{})
	if err != nil || res.Output.Status != contract.StatusOK {
		t.Fatalf("turn: %+v %v", res, err)
	}
	specs := eng.Specs()
	if len(specs) != 1 {
		t.Fatalf("%d containers created, want 1", len(specs))
	}
	log, err := os.ReadFile(res.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	return specs[0], s, string(log)
}

// TestServeAndLocalTurnsAreEqual: the daemon's turn and run --local's turn, built from the
// same file, are the same turn: the same container spec (but its name, which carries the
// time, and the model token minted for that name, in two variables), the same builder settings, the same
// redaction of the run log. What the daemon has besides (the listener, the queue) is not
// part of a System.
func TestServeAndLocalTurnsAreEqual(t *testing.T) {
	_, load := fixture(t)
	serveSpec, serve, serveLog := turnOf(t, load(), Serve)
	localSpec, local, localLog := turnOf(t, load(), Local)
	norm := func(s engine.Spec) engine.Spec {
		s.Name = ""
		s.Env = slices.Clone(s.Env)
		for i, e := range s.Env {
			if k, v, _ := strings.Cut(e, "="); strings.HasPrefix(v, "arz-") {
				s.Env[i] = k + "=<the container's model token>"
			}
		}
		return s
	}
	if a, b := norm(serveSpec), norm(localSpec); !reflect.DeepEqual(a, b) {
		t.Errorf("the container specs differ:\nserve %+v\nlocal %+v", a, b)
	}
	for _, want := range []string{"/skills", "/workspace/web", "/workspace/extra/"} {
		if !slices.ContainsFunc(serveSpec.Mounts, func(m engine.Mount) bool { return strings.HasPrefix(m.Target, want) }) {
			t.Errorf("no mount at %s in %+v: the fixture does not exercise it", want, serveSpec.Mounts)
		}
	}
	if serveSpec.MemoryBytes != 768<<20 || serveSpec.PidsLimit != 300 || serveSpec.Image != "localhost/arizuko-agent:assembly" ||
		serveSpec.Labels[engine.LabelInstance] != "assembly-test" {
		t.Errorf("the spec is not the file's: %+v", serveSpec)
	}
	settings := func(s *System) turn.Builder {
		b := *s.Builder
		b.Store, b.Services, b.Logger = nil, nil, nil
		if b.Projects != nil {
			p := *b.Projects
			p.Store, p.Logger = nil, nil
			b.Projects = &p
		}
		return b
	}
	if a, b := settings(serve), settings(local); !reflect.DeepEqual(a, b) {
		t.Errorf("the builders differ:\nserve %+v\nlocal %+v", a, b)
	}
	if serve.Builder.DiaryMax != 3 || serve.Builder.Location.String() != "Asia/Tokyo" || serve.Builder.Allowlist == nil {
		t.Errorf("the builder is not the file's: %+v", settings(serve))
	}
	if serve.Builder.Services.Location.String() != local.Builder.Services.Location.String() {
		t.Errorf("services' zone: serve %v, local %v", serve.Builder.Services.Location, local.Builder.Services.Location)
	}
	for name, log := range map[string]string{"serve": serveLog, "local": localLog} {
		if strings.Contains(log, secretValue) || !strings.Contains(log, "[REDACTED:GH_TOKEN]") {
			t.Errorf("%s's run log is not redacted:\n%s", name, log)
		}
	}
}

// TestOfflineNeedsNoEngine: an Offline System has the builder of the file, no engine and
// no services, and creates nothing in a data directory that is not there.
func TestOfflineNeedsNoEngine(t *testing.T) {
	_, load := fixture(t)
	cfg := load()
	s, err := New(context.Background(), cfg, Options{Mode: Offline, EngineFlags: EngineFlags{Socket: "unix:///nonexistent.sock"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Engine != nil || s.Runner != nil || s.Builder.Services != nil || s.Store != nil {
		t.Errorf("offline: engine %v, runner %v, services %v, store %v", s.Engine, s.Runner, s.Builder.Services, s.Store)
	}
	if s.Builder.DiaryMax != 3 || s.Builder.Allowlist == nil || s.Builder.Limits.MemoryBytes != 768<<20 {
		t.Errorf("offline builder is not the file's: %+v", *s.Builder)
	}
	if _, err := os.Stat(cfg.DataDir); !os.IsNotExist(err) {
		t.Errorf("offline made the data directory: %v", err)
	}
}

// TestReload: the next System has the settings a reload applies, keeps those only a
// restart changes (and names them), and shares the parts made once.
func TestReload(t *testing.T) {
	path, load := fixture(t)
	ctx := context.Background()
	s, err := New(ctx, load(), Options{Mode: Serve, Engine: fakeengine.New(fakeengine.Script{})})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.NewReplacer("diary_max = 3", "diary_max = 5", `instance = "assembly-test"`, `instance = "other"`).Replace(string(text))
	if err := os.WriteFile(path, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	next, ch, err := s.Reload(ctx, load())
	if err != nil {
		t.Fatal(err)
	}
	if next.Builder.DiaryMax != 5 || s.Builder.DiaryMax != 3 {
		t.Errorf("diary_max: next %d, previous %d; want 5 and 3", next.Builder.DiaryMax, s.Builder.DiaryMax)
	}
	if next.Config.Instance != "assembly-test" || !slices.Equal(ch.Restart, []string{"instance"}) || !slices.Equal(ch.Applied, []string{"memory"}) {
		t.Errorf("instance %q, changes %+v; want the running instance kept, named as needing a restart, memory applied", next.Config.Instance, ch)
	}
	if next.Store != s.Store || next.Runner != s.Runner || next.Secrets != s.Secrets || next.Sidecars != s.Sidecars {
		t.Error("the next System made again a part made once")
	}
	if next.Builder.Services.Model != next.Model || next.Model == s.Model {
		t.Error("the next System's turns do not use its model gateway")
	}
}

// TestChooseEngine: the flags, then the file, then the environment, then the default
// sockets; each setting on its own, and the source says which won.
func TestChooseEngine(t *testing.T) {
	file := &config.Config{Source: "/etc/arizuko/arizukod.toml", Engine: "docker", EngineSocket: "unix:///file.sock"}
	env := map[string]string{"ARIZUKO_ENGINE": "podman", "ARIZUKO_ENGINE_SOCKET": "unix:///env.sock"}
	for _, c := range []struct {
		name               string
		flags              EngineFlags
		cfg                *config.Config
		env                map[string]string
		kind, sock, source string
	}{
		{"flags", EngineFlags{"podman", "unix:///flag.sock"}, file, env, "podman", "unix:///flag.sock", "--engine-socket"},
		{"file", EngineFlags{}, file, env, "docker", "unix:///file.sock", "engine_socket in /etc/arizuko/arizukod.toml"},
		{"flag kind, file socket", EngineFlags{Kind: "podman"}, file, nil, "podman", "unix:///file.sock", "engine_socket in /etc/arizuko/arizukod.toml"},
		{"environment", EngineFlags{}, &config.Config{Source: "defaults"}, env, "podman", "unix:///env.sock", "$ARIZUKO_ENGINE_SOCKET"},
		{"defaults", EngineFlags{}, &config.Config{Source: "defaults"}, nil, "", "", "the default sockets"},
		{"default sockets of a kind", EngineFlags{}, &config.Config{Source: "f.toml", Engine: "docker"}, nil, "docker", "",
			"the default sockets of docker (engine from engine in f.toml)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ChooseEngine(c.flags, c.cfg, func(k string) string { return c.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind != c.kind || got.Socket != c.sock || got.Source() != c.source {
				t.Errorf("got %s at %q from %q; want %s at %q from %q", got.Kind, got.Socket, got.Source(), c.kind, c.sock, c.source)
			}
		})
	}
	if _, err := ChooseEngine(EngineFlags{Kind: "lxc"}, &config.Config{}, nil); err == nil || !strings.Contains(err.Error(), `--engine "lxc"`) {
		t.Errorf("--engine lxc: %v, want an error naming the flag", err)
	}
}

// TestChooseKubernetes: engine = "kubernetes" is the cluster of [kubernetes] with the
// daemon's stop grace, and a socket for it is refused, naming where it came from.
func TestChooseKubernetes(t *testing.T) {
	cfg := &config.Config{Source: "f.toml", Engine: "kubernetes", StopGrace: 3 * time.Second,
		Kubernetes: config.KubeConf{Kubeconfig: "/etc/k", Namespace: "ns", NoNetworkClass: "nonet", NodeIPCDir: "/run/n", PodPidsLimit: 256,
			NodeSelector: map[string]string{"arizuko.io/turns": "true"}, Tolerations: []string{"arizuko.io/turns:NoSchedule"}}}
	got, err := ChooseEngine(EngineFlags{}, cfg, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := kube.Config{Kubeconfig: "/etc/k", Namespace: "ns", NoNetworkClass: "nonet", NodeIPCDir: "/run/n", PodPidsLimit: 256, StopGrace: 3 * time.Second,
		NodeSelector: map[string]string{"arizuko.io/turns": "true"}, Tolerations: []string{"arizuko.io/turns:NoSchedule"}}
	if got.Kind != Kubernetes || !reflect.DeepEqual(got.Kube, want) || got.Source() != "kubeconfig /etc/k (engine from engine in f.toml)" {
		t.Errorf("got %s %+v from %q", got.Kind, got.Kube, got.Source())
	}
	_, err = ChooseEngine(EngineFlags{Socket: "unix:///x.sock"}, cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "--engine-socket") || !strings.Contains(err.Error(), "[kubernetes]") {
		t.Errorf("a socket for kubernetes: %v, want an error naming the flag and [kubernetes]", err)
	}
}
