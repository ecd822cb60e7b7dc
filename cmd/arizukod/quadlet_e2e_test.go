package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/assembly"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakeengine"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/turn"
)

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
	instance := fx.instance(t)
	echo, weather := sidecar.ContainerName(instance, "main/research", "echo"), sidecar.ContainerName(instance, "main/research", "weather")
	common := []string{"--cap-drop all", "--security-opt=no-new-privileges", "--read-only", "--read-only-tmpfs=false",
		"--network none", "--pull never", "--ulimit nofile=1024:1024", "--ulimit nproc=4096:4096", "--tmpfs /tmp:rw,nosuid,nodev,size="}
	for svc, flags := range map[string][]string{
		"arizuko-main-research-quadlet.service": {"--memory=536870912", "--cpus=1.5", "--pids-limit 512", "--user " + fx.user,
			"--label io.arizuko.role=agent", "--mount type=bind,source=" + fx.data + "/groups/main/research,destination=/workspace,rw",
			"--mount type=bind,source=" + fx.skills + ",destination=/skills,ro", " localhost/arizuko-agent:1"},
		echo + ".service": {"--memory=64m", "--cpus=0.5", "--pids-limit 256", "--user " + fx.user,
			"--label io.arizuko.role=sidecar", "--env-file " + fx.out + "/" + echo + ".env",
			"--mount type=bind,source=" + fx.data + "/ipc/main-research/sidecars,destination=/var/run/pub/arizuko/sidecars,rw", " localhost/arizuko-sidecar:1"},
		weather + ".service": {"--memory=512m", "--cpus=2", "--pids-limit 128", "--label io.arizuko.sidecar=weather",
			"--env-file " + fx.out + "/" + weather + ".env",
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
		if got, want := enginetest.ArgvHardening(strings.Fields(line)), engine.Hardened(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the generator's command line has hardening %+v, want %+v", svc, got, want)
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
