package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/assembly"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakeengine"
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
// env) and one from a Quadlet unit, paths and the instance label made stable.
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
	got := strings.NewReplacer(fx.data, "/srv/arizuko", fx.out, "/etc/containers/systemd", fx.skills, "/usr/share/arizuko/skills", fx.instance(t), "INSTANCE").Replace(b.String())
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

// TestQuadletPodmanGenerator feeds the units to Podman 5's real Quadlet generator: the
// `podman run` line it generates for each carries every hardening flag.
func TestQuadletPodmanGenerator(t *testing.T) {
	bin := os.Getenv("ARIZUKO_TEST_PODMAN5_QUADLET")
	if bin == "" {
		enginetest.Missing(t, "no Podman 5 Quadlet generator: ARIZUKO_TEST_PODMAN5_QUADLET is not set")
	}
	fx := writeQuadlet(t, fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()), bundledSkills(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-dryrun")
	cmd.Env = append(os.Environ(), "QUADLET_UNIT_DIRS="+fx.out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s -dryrun: %v\n%s", bin, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "unsupported") || strings.Contains(stderr.String(), "error") {
		t.Errorf("the generator complained:\n%s", stderr.String())
	}
	execStart := map[string]string{}
	service := ""
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		if n, ok := strings.CutPrefix(line, "---"); ok && strings.HasSuffix(n, "---") {
			service = strings.TrimSuffix(n, "---")
		}
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart[service] = v
		}
	}
	common := []string{"--cap-drop all", "--security-opt=no-new-privileges", "--read-only", "--read-only-tmpfs=false",
		"--network none", "--pull never", "--ulimit nofile=1024:1024", "--ulimit nproc=4096:4096", "--tmpfs /tmp:rw,nosuid,nodev,size="}
	for svc, flags := range map[string][]string{
		"arizuko-main-research-quadlet.service": {"--memory=536870912", "--cpus=1.5", "--pids-limit 512", "--user " + fx.user,
			"--label io.arizuko.role=agent", "--mount type=bind,source=" + fx.data + "/groups/main/research,destination=/workspace,rw",
			"--mount type=bind,source=" + fx.skills + ",destination=/skills,ro", " localhost/arizuko-agent:1"},
		"arizuko-sc-main-research-echo.service": {"--memory=64m", "--cpus=0.5", "--pids-limit 256", "--user " + fx.user,
			"--label io.arizuko.role=sidecar", "--env-file " + fx.out + "/arizuko-sc-main-research-echo.env",
			"--mount type=bind,source=" + fx.data + "/ipc/main-research/sidecars,destination=/var/run/pub/arizuko/sidecars,rw", " localhost/arizuko-sidecar:1"},
		"arizuko-sc-main-research-weather.service": {"--memory=512m", "--cpus=2", "--pids-limit 128", "--label io.arizuko.sidecar=weather",
			"--env-file " + fx.out + "/arizuko-sc-main-research-weather.env",
			" localhost/weather-mcp:1.2 --log-level \"debug mode\""},
	} {
		line, ok := execStart[svc]
		if !ok {
			t.Errorf("no %s in the generator's output:\n%s", svc, out)
			continue
		}
		for _, f := range append(common, flags...) {
			if !strings.Contains(line, f) {
				t.Errorf("%s: no %q in\n%s", svc, f, line)
			}
		}
		if strings.Contains(line, "s3cr3t") {
			t.Errorf("%s: the secret is on the command line", svc)
		}
	}
	t.Logf("%s -dryrun generated %d services with every hardening flag", bin, len(execStart))
	compareWithRunner(t, fx, execStart["arizuko-main-research-quadlet.service"])
}

// compareWithRunner runs the fixture's turn through the runner `run --local` makes, on the
// fake engine, and compares the spec the engine got with the agent's `podman run` line
// from the Quadlet generator, field by field. The turn is built with the run ID quadlet
// uses; only the name differs by design (the runner's carries the time).
func compareWithRunner(t *testing.T, fx quadletFixture, line string) {
	t.Helper()
	ctx := context.Background()
	lf := localFlags{config: fx.config, dataDir: fx.data, image: "localhost/arizuko-agent:1", skillsDir: fx.skills,
		allowlist: filepath.Join(fx.data, "no-allowlist.json")}
	cfg, err := lf.load()
	if err != nil {
		t.Fatal(err)
	}
	eng := fakeengine.New(fakeengine.Script{Stdout: fakeengine.Answer(contract.Output{Status: contract.StatusOK})})
	eng.SetInfo(engine.Info{Name: "fake"})
	sys, err := assembly.New(ctx, cfg, assembly.Options{Mode: assembly.Local, Engine: eng, Folder: "main/research"})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	tu, err := sys.Builder.Build(ctx, turn.Request{RunID: quadletRunID, Folder: "main/research"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sys.Runner.Run(ctx, tu); err != nil || res.Failure != runner.FailNone {
		t.Fatalf("run on the fake engine: %+v, %v", res, err)
	}
	specs := eng.Specs()
	if len(specs) != 1 {
		t.Fatalf("the runner created %d containers", len(specs))
	}
	s := specs[0]
	if !strings.HasPrefix(s.Name, "arizuko-main-research-") {
		t.Errorf("runner's container name %q", s.Name)
	}
	got := podmanRunFlags(t, line)
	mode := map[bool]string{false: "rw", true: "ro"}
	want := map[string][]string{
		"--name":            {"arizuko-main-research-quadlet"},
		"--user":            {s.User},
		"--workdir":         {s.WorkingDir},
		"--network":         {s.Network},
		"--memory":          {strconv.FormatInt(s.MemoryBytes, 10)},
		"--cpus":            {strconv.FormatFloat(float64(s.NanoCPUs)/1e9, 'f', -1, 64)},
		"--pids-limit":      {strconv.FormatInt(s.PidsLimit, 10)},
		"--pull":            {"never"},
		"--cap-drop":        {"all"},
		"--security-opt":    {"no-new-privileges"},
		"--read-only-tmpfs": {"false"},
		"--image":           {s.Image},
	}
	for _, e := range s.Env {
		want["--env"] = append(want["--env"], e)
	}
	for k, v := range s.Labels {
		want["--label"] = append(want["--label"], k+"="+v)
	}
	for _, m := range s.Mounts {
		want["--mount"] = append(want["--mount"], fmt.Sprintf("type=bind,source=%s,destination=%s,%s", m.Source, m.Target, mode[m.ReadOnly]))
	}
	for _, tm := range s.Tmpfs {
		want["--tmpfs"] = append(want["--tmpfs"], tm.Target+":"+tm.Options)
	}
	for _, rl := range s.Rlimits {
		want["--ulimit"] = append(want["--ulimit"], fmt.Sprintf("%s=%d:%d", rl.Type, rl.Soft, rl.Hard))
	}
	for _, k := range []string{"--env", "--label", "--ulimit"} {
		slices.Sort(want[k])
		slices.Sort(got[k])
	}
	for flag, w := range want {
		if !slices.Equal(got[flag], w) {
			t.Errorf("%s: quadlet %q, runner %q", flag, got[flag], w)
		}
	}
	if _, ok := got["--read-only"]; !ok {
		t.Error("no --read-only")
	}
	t.Logf("the agent unit and the runner's spec agree on %d flags", len(want))
}

// podmanRunFlags splits a generated `podman run` line into its flags and values (an
// "--image" entry for the image), keeping only the values of arizukod's own settings: the
// generator's own flags (--cidfile, --sdnotify, ...) are left out.
func podmanRunFlags(t *testing.T, line string) map[string][]string {
	t.Helper()
	words := strings.Fields(line)
	i := slices.Index(words, "run")
	if i < 0 {
		t.Fatalf("no podman run in %q", line)
	}
	valued := map[string]bool{"--name": true, "--user": true, "--workdir": true, "--network": true, "--pids-limit": true,
		"--pull": true, "--cap-drop": true, "--env": true, "--label": true, "--mount": true, "--tmpfs": true, "--ulimit": true}
	mine := map[string]bool{"--memory": true, "--cpus": true, "--security-opt": true, "--read-only-tmpfs": true, "--read-only": true}
	flags := map[string][]string{}
	rest := words[i+1:]
	for j := 0; j < len(rest); j++ {
		w := rest[j]
		if !strings.HasPrefix(w, "-") {
			flags["--image"] = append(flags["--image"], w)
			continue
		}
		k, v, hasValue := strings.Cut(w, "=")
		if !hasValue && valued[k] && j+1 < len(rest) {
			j++
			v = rest[j]
		}
		if valued[k] || mine[k] {
			flags[k] = append(flags[k], v)
		}
	}
	return flags
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
