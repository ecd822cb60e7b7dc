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
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/enginetest"
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
// the units `arizukod quadlet` wrote for it into out.
type quadletFixture struct {
	data, out string
	files     []string // file names in out, sorted
}

func writeQuadlet(t *testing.T) quadletFixture {
	t.Helper()
	fx := quadletFixture{data: filepath.Join(t.TempDir(), "data"), out: filepath.Join(t.TempDir(), "units")}
	if err := os.MkdirAll(fx.data, 0o750); err != nil {
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
	err = runQuadlet(ctx, []string{"--folder", "main/research", "--data-dir", fx.data, "-o", fx.out,
		"--image", "localhost/arizuko-agent:1", "--user", "1000:1000", "--skills-dir", "/usr/share/arizuko/skills",
		"--allowlist", filepath.Join(fx.data, "no-allowlist.json")}, &stdout, &stderr)
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

// TestQuadletGolden: the units for a group with a sidecar from fields (with a secret
// env) and one from a Quadlet unit, paths and the instance label made stable.
func TestQuadletGolden(t *testing.T) {
	fx := writeQuadlet(t)
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
	got := strings.NewReplacer(fx.data, "/srv/arizuko", fx.out, "/etc/containers/systemd", instanceLabel(fx.data), "INSTANCE").Replace(b.String())
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
	fx := writeQuadlet(t)
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
		"arizuko-main-research-quadlet.service": {"--memory=536870912", "--cpus=1.5", "--pids-limit 512", "--user 1000:1000",
			"--label io.arizuko.role=agent", "--mount type=bind,source=" + fx.data + "/groups/main/research,destination=/workspace,rw",
			"--mount type=bind,source=/usr/share/arizuko/skills,destination=/skills,ro", " localhost/arizuko-agent:1"},
		"arizuko-sc-main-research-echo.service": {"--memory=64m", "--cpus=0.5", "--pids-limit 256", "--user 1000:1000",
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
}
