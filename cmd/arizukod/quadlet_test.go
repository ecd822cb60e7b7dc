package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/quadlet"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

var update = flag.Bool("update", false, "rewrite golden files")

const weatherUnit = `[Unit]
Description=Weather MCP server

[Container]
Image=localhost/weather-mcp:1.2
Exec=--log-level "debug mode"
Environment=TZ=UTC
PodmanArgs=--memory=512m --cpus 2
PidsLimit=128
`

// quadletFixture is a data directory whose group main/research has two sidecars, and
// the units `arizukod quadlet` wrote for it into out, with user and skills as given.
type quadletFixture struct {
	data, out string
	config    string   // the daemon's configuration file: defaults only
	user      string   // --user
	skills    string   // --skills-dir
	files     []string // file names in out, sorted
}

func writeQuadlet(t *testing.T, user, skills string) quadletFixture {
	t.Helper()
	fx := quadletFixture{data: filepath.Join(t.TempDir(), "data"), out: filepath.Join(t.TempDir(), "units"),
		config: filepath.Join(t.TempDir(), "arizukod.toml"), user: user, skills: skills}
	if err := os.MkdirAll(fx.data, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fx.config, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(fx.data, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := json.Marshal(turn.ContainerConfig{Memory: "512m", CPUs: 1.5, Network: "none", Timeout: 600000, Sidecars: []sidecar.Config{
		{Name: "echo", Image: "localhost/arizuko-sidecar:1", Env: map[string]string{"API_KEY": "s3cr3t"}, Memory: "64m", CPUs: 0.5},
		{Name: "weather", Quadlet: weatherUnit},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []store.Group{{Folder: "main"}, {Folder: "main/research", Parent: "main", ContainerConfig: cc}} {
		if _, err := st.UpsertGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	// The CA certificate a daemon or run --local made in the data dir, which every turn's
	// container gets read-only: the unit must carry it too.
	layout, err := groupfolder.NewLayout(fx.data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.OpenEgressCA(layout, "quadlet-test"); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err = runQuadlet(ctx, append(fx.flags(), "--folder", "main/research", "-o", fx.out, "--user", fx.user), &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v (stderr %s)", err, stderr.String())
	}
	entries, err := os.ReadDir(fx.out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fx.files = append(fx.files, e.Name())
	}
	var want []string
	for _, n := range fx.files {
		want = append(want, filepath.Join(fx.out, n))
	}
	if got := strings.Fields(stdout.String()); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("stdout lists %v, want %v", got, want)
	}
	return fx
}

// bundledSkills is the repository's skills bundle: quadlet, like a turn, seeds the
// session from it.
func bundledSkills(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "container", "skills"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// flags are the flags a local command gets for the fixture's data directory.
func (fx quadletFixture) flags() []string {
	return []string{"--config", fx.config, "--data-dir", fx.data, "--image", "localhost/arizuko-agent:1", "--skills-dir", fx.skills,
		"--allowlist", filepath.Join(fx.data, "no-allowlist.json")}
}

// instance is the instance label the daemon has for the fixture's data directory.
func (fx quadletFixture) instance(t *testing.T) string {
	t.Helper()
	cfg, err := config.Load(serviceMode(), fx.config, func(k string) string {
		if k == "DATA_DIR" {
			return fx.data
		}
		return os.Getenv(k)
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Instance
}

// TestQuadletGolden: the units for a group with a sidecar from fields (with a secret
// env) and one from a Quadlet unit, paths, the instance label and its tag in the
// sidecars' names made stable.
func TestQuadletGolden(t *testing.T) {
	fx := writeQuadlet(t, "1000:1000", bundledSkills(t))
	var b strings.Builder
	for _, n := range fx.files {
		fi, err := os.Stat(filepath.Join(fx.out, n))
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(fx.out, n))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "==> %s (%v) <==\n%s\n", n, fi.Mode().Perm(), data)
	}
	instance := fx.instance(t)
	got := strings.NewReplacer(fx.data, "/srv/arizuko", fx.out, "/etc/containers/systemd", fx.skills, "/usr/share/arizuko/skills",
		sidecar.NamePrefix(instance), "arizuko-sc-TAG-", instance, "INSTANCE").Replace(b.String())
	path := filepath.Join("testdata", "quadlet", "main-research.golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/arizukod -run TestQuadletGolden -update writes it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs (go test ./cmd/arizukod -run TestQuadletGolden -update rewrites it):\n%s", path, got)
	}
}

func TestQuadletErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want error
		text string
	}{
		{[]string{}, nil, "--folder"},
		{[]string{"--folder", "Main"}, nil, "--folder"},
		{[]string{"--folder", "main", "--user", "root"}, nil, `--user "root"`},
		{[]string{"--folder", "main", "stray"}, errUsage, ""},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"--data-dir", t.TempDir(), "-o", t.TempDir()}, tc.args...)
		err := runQuadlet(context.Background(), args, &stdout, &stderr)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%v: error %v, want %v with %q", tc.args, err, tc.want, tc.text)
		}
	}
}

// TestQuadletHardening: the agent's unit carries every part of engine.Hardened, as a unit
// and as the podman command line it makes.
func TestQuadletHardening(t *testing.T) {
	c := agentContainer(engine.Spec{Image: "localhost/arizuko-agent:1", Name: "arizuko-main-quadlet", Network: engine.NetworkNone,
		Tmpfs: []engine.Tmpfs{{Target: "/tmp", Options: "rw,size=64m"}}}, "d")
	args, err := c.PodmanRunArgs()
	if err != nil {
		t.Fatal(err)
	}
	want := engine.Hardened()
	for _, r := range []struct {
		rendering string
		got       engine.Hardening
	}{
		{"unit", enginetest.QuadletHardening(c)},
		{"podman command line", enginetest.ArgvHardening(append([]string{"podman", "run"}, args...))},
	} {
		if !reflect.DeepEqual(r.got, want) {
			t.Errorf("%s: hardening %+v, want %+v", r.rendering, r.got, want)
		}
	}
}

// TestQuadletDaemonConfig: `arizukod quadlet` reads the daemon's arizukod.toml, so the
// agent unit has the data directory, image, instance label, query timeout and limits
// that `arizukod serve` with the same file gives a turn.
func TestQuadletDaemonConfig(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "arizukod.toml")
	toml := fmt.Sprintf("data_dir = %q\nimage = \"localhost/arizuko-agent:7\"\ninstance = \"inst-quadlet\"\nrun_timeout = \"5m\"\n\n[limits]\nmemory = \"768m\"\npids = 300\n",
		filepath.Join(base, "data"))
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(base, "units")
	var stdout, stderr bytes.Buffer
	err := runQuadlet(context.Background(), []string{"--config", path, "--folder", "main", "-o", out,
		"--allowlist", filepath.Join(base, "no-allowlist.json")}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v (stderr %s)", err, stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(out, "arizuko-main-quadlet.container"))
	if err != nil {
		t.Fatal(err)
	}
	unit, err := quadlet.ParseContainer(data)
	if err != nil {
		t.Fatal(err)
	}
	// What `arizukod serve` reads.
	cfg, err := config.Load(serviceMode(), path, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, got, want string }{
		{"instance label", unit.Label[engine.LabelInstance], cfg.Instance},
		{"query timeout", unit.Environment["ARIZUKO_QUERY_TIMEOUT_MS"], strconv.FormatInt(runner.QueryTimeout(cfg.RunTimeout).Milliseconds(), 10)},
		{"image", unit.Image, cfg.Image},
		{"memory", unit.Memory, strconv.FormatInt(cfg.Limits.MemoryBytes, 10)},
		{"pids", unit.PidsLimit, strconv.FormatInt(cfg.Limits.PidsLimit, 10)},
		{"workspace", strings.Split(unit.Mount[0], ",")[1], "source=" + filepath.Join(cfg.DataDir, "groups", "main")},
	} {
		if c.got != c.want {
			t.Errorf("%s: unit %q, daemon %q", c.what, c.got, c.want)
		}
	}
	if cfg.Instance != "inst-quadlet" || cfg.RunTimeout != 5*time.Minute {
		t.Errorf("the daemon read instance %q, run timeout %s: not the file", cfg.Instance, cfg.RunTimeout)
	}
}

// TestQuadletRuntime: the agent's unit runs under the turn's OCI runtime: a Quadlet unit
// runs the local podman, which takes --runtime (the API does not).
func TestQuadletRuntime(t *testing.T) {
	for _, rt := range []string{"", "runsc"} {
		c := agentContainer(engine.Spec{Image: "localhost/arizuko-agent:1", Name: "arizuko-main-quadlet", Network: engine.NetworkNone, Runtime: rt}, "d")
		args, err := c.PodmanRunArgs()
		if err != nil {
			t.Fatal(err)
		}
		has := slices.Contains(args, "--runtime=runsc")
		if has != (rt != "") {
			t.Errorf("runtime %q: podman run %q", rt, args)
		}
	}
}
