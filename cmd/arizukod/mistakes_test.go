package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/store"
)

// awayHealth is a daemon whose engine answers the first `up` times it is asked, then not.
type awayHealth struct {
	up    int32
	calls atomic.Int32
}

func (h *awayHealth) Health(context.Context) apiwire.HealthReport {
	if h.calls.Add(1) <= h.up {
		return apiwire.HealthReport{Status: "ok", Engine: apiwire.EngineHealth{Up: true, Name: "podman"}}
	}
	return apiwire.HealthReport{Status: "degraded", Engine: apiwire.EngineHealth{Error: "no container engine answered; tried: podman unix:///run/podman/podman.sock: no such file or directory"}}
}

// cliDaemon serves the API over a unix socket in dir, with a real store and a queue that
// never runs anything, and returns the socket and the store.
func cliDaemon(t *testing.T, dir string, h api.Health) (string, *store.Store) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), filepath.Join(dir, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.UpsertGroup(context.Background(), store.Group{Folder: "main"}); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.New(st, stillQueue{}, h, slog.New(slog.NewTextHandler(io.Discard, nil)))}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return socket, st
}

// runCLI runs the command line args in this process and returns what it printed and its
// exit status.
func runCLI(t *testing.T, args []string) (stdout, stderr string, code int) {
	t.Helper()
	dir := t.TempDir()
	outF, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errF, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outF, errF
	code = runMain(context.Background(), args)
	os.Stdout, os.Stderr = oldOut, oldErr
	outF.Close()
	errF.Close()
	o, _ := os.ReadFile(outF.Name())
	e, _ := os.ReadFile(errF.Name())
	return string(o), string(e), code
}

var (
	systemdHost   = host{systemd: true, mode: config.ModeSystem}
	userHost      = host{userManager: true, mode: config.ModeUser}
	noSystemdHost = host{mode: config.ModeSystem}
	demoHost      = host{mode: config.ModeSystem, demoSocket: "unix:///var/tmp/arizuko-demo/podman.sock"}
)

// TestCLIMistakes: every mistake on the command line says what to do next, and its
// output is the golden file's (go test ./cmd/arizukod -run TestCLIMistakes -update
// rewrites them). The host (systemd or not) is set per case, so the hints are the ones
// that would work there.
func TestCLIMistakes(t *testing.T) {
	// The defaults printed in usage come from the environment: make them the system
	// service's on every machine.
	for k, v := range map[string]string{
		"ARIZUKO_MODE": "system", "DATA_DIR": "", "CONTAINER_IMAGE": "", "RUNED_RUN_TIMEOUT": "",
		"ARIZUKO_ENGINE": "", "ARIZUKO_ENGINE_SOCKET": "", "CONTAINER_HOST": "", "DOCKER_HOST": "",
		"HOME": "/home/operator", "XDG_CONFIG_HOME": "", "XDG_DATA_HOME": "", "XDG_RUNTIME_DIR": "",
		"ANTHROPIC_API_KEY": "", "CLAUDE_CODE_OAUTH_TOKEN": "", "ARIZUKO_CACHE_DIR": "/var/cache/arizuko",
	} {
		t.Setenv(k, v)
	}
	if os.Geteuid() != 0 {
		// The allowlist's default in usage is root's path for root only.
		skipUnlessRequired(t, "the golden usage texts are root's (hack/test.sh runs as root)")
	}
	tmp := t.TempDir()
	// A daemon whose engine is away, and one whose engine goes away while a run waits.
	awaySocket, awayStore := cliDaemon(t, filepath.Join(tmp, "away"), &awayHealth{})
	goneSocket, goneStore := cliDaemon(t, filepath.Join(tmp, "gone"), &awayHealth{up: 1})
	noSocket := filepath.Join(tmp, "none.sock")
	badConfig := filepath.Join(tmp, "bad.toml")
	writeFile(t, badConfig, "image = \"x\"\n[limits]\nmemory = \"lots\"\n")
	badAllow := filepath.Join(tmp, "allow.toml")
	writeFile(t, badAllow, fmt.Sprintf("allowlist = %q\ndata_dir = %q\n", filepath.Join(tmp, "allow.json"), filepath.Join(tmp, "data")))
	writeFile(t, filepath.Join(tmp, "allow.json"), `{"allowedRoots":[{"path":"relative/dir"}]}`)
	cg := filepath.Join(tmp, "cgroup")
	writeFile(t, filepath.Join(cg, "cgroup.controllers"), "cpuset io\n")
	oldCg := cgroupRoot
	cgroupRoot = cg
	t.Cleanup(func() { cgroupRoot = oldCg })

	for _, tc := range []struct {
		name string
		host host
		args []string
	}{
		{"image-unknown-verb", systemdHost, []string{"image", "bogus"}},
		{"runs-unknown-verb", systemdHost, []string{"runs", "bogus"}},
		{"groups-unknown-verb", systemdHost, []string{"groups", "bogus"}},
		{"routes-unknown-verb", systemdHost, []string{"routes", "bogus"}},
		{"inbox-unknown-verb", systemdHost, []string{"inbox", "bogus"}},
		{"inbox-no-verb", systemdHost, []string{"inbox"}},
		{"inbox-flag-first", systemdHost, []string{"inbox", "--message", "hi"}},
		{"inbox-add-no-folder", systemdHost, []string{"inbox", "add", "--message", "hi"}},
		{"image-no-verb", systemdHost, []string{"image"}},
		{"image-build-unknown", systemdHost, []string{"image", "build", "bogus"}},
		{"image-build-help", systemdHost, []string{"image", "build", "--help"}},
		{"image-import-static-help", systemdHost, []string{"image", "import-static", "--help"}},
		{"run-timeout-no-unit", systemdHost, []string{"run", "--folder", "main", "--message", "hi", "--timeout", "5"}},
		{"runs-show-no-id", systemdHost, []string{"runs", "show"}},
		{"groups-add-no-folder", systemdHost, []string{"groups", "add", "--name", "x"}},
		{"groups-project-no-path", systemdHost, []string{"groups", "project", "set", "main"}},
		{"groups-project-unknown-verb", systemdHost, []string{"groups", "project", "bogus"}},
		{"run-no-message", systemdHost, []string{"run", "--folder", "main"}},
		{"run-bad-folder", systemdHost, []string{"run", "--folder", "../x", "--message", "hi"}},
		{"unknown-flag", systemdHost, []string{"runs", "--bogus"}},
		{"doctor-unknown-check", systemdHost, []string{"doctor", "--check", "bogus"}},
		{"run-daemon-image", systemdHost, []string{"run", "--folder", "main", "--message", "hi", "--image", "x"}},
		{"run-daemon-engine-socket", systemdHost, []string{"run", "--folder", "main", "--message", "hi", "--engine-socket", "unix:///x.sock"}},
		{"run-daemon-data-dir", systemdHost, []string{"run", "--folder", "main", "--message", "hi", "--data-dir", "/srv/x"}},
		{"no-daemon-system", systemdHost, []string{"runs", "--socket", noSocket}},
		{"no-daemon-user", userHost, []string{"groups", "--socket", noSocket}},
		{"no-daemon-no-systemd", noSystemdHost, []string{"run", "--folder", "main", "--message", "hi", "--socket", noSocket}},
		{"run-engine-away", noSystemdHost, []string{"run", "--folder", "main", "--message", "hi", "--socket", awaySocket}},
		{"run-engine-away-systemd", systemdHost, []string{"run", "--folder", "main", "--message", "hi", "--socket", awaySocket}},
		{"run-engine-gone-while-queued", demoHost, []string{"run", "--folder", "main", "--message", "hi", "--socket", goneSocket}},
		{"doctor-engine-no-systemd", noSystemdHost, []string{"doctor", "--check", "engine", "--engine-socket", "unix://" + noSocket}},
		{"doctor-engine-demo", demoHost, []string{"doctor", "--check", "engine", "--engine-socket", "unix://" + noSocket}},
		{"doctor-engine-user", userHost, []string{"doctor", "--check", "engine", "--engine-socket", "unix://" + noSocket}},
		{"doctor-bad-config", systemdHost, []string{"doctor", "--check", "config", "--check", "allowlist", "--config", badConfig}},
		{"doctor-bad-allowlist", systemdHost, []string{"doctor", "--check", "allowlist", "--config", badAllow}},
		{"doctor-data-dir-of-config", systemdHost, []string{"doctor", "--check", "data-dir", "--config", badAllow}},
		{"doctor-cgroups", systemdHost, []string{"doctor", "--check", "cgroups", "--engine-socket", "unix://" + noSocket}},
		{"doctor-no-engine", noSystemdHost, []string{"doctor", "--check", "engine", "--check", "subids", "--check", "cgroups", "--check", "limits", "--check", "image", "--engine-socket", "unix://" + noSocket, "--socket", noSocket}},
		{"doctor-data-dir-not-made", systemdHost, []string{"doctor", "--check", "data-dir", "--data-dir", filepath.Join(tmp, "allow.json", "data dir")}},
		{"doctor-data-dir-to-make", systemdHost, []string{"doctor", "--check", "data-dir", "--data-dir", filepath.Join(tmp, "new", "data")}},
		{"run-local-no-engine", noSystemdHost, []string{"run", "--local", "--folder", "main", "--message", "hi", "--engine-socket", "unix://" + noSocket, "--data-dir", filepath.Join(tmp, "local")}},
		{"image-build-no-engine", systemdHost, []string{"image", "build", "claude", "--engine-socket", "unix://" + noSocket}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := probeHost
			probeHost = func() host { return tc.host }
			defer func() { probeHost = old }()
			stdout, stderr, code := runCLI(t, tc.args)
			got := fmt.Sprintf("$ arizukod %s\n--- exit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(tc.args, " "), code, stdout, stderr)
			golden(t, filepath.Join("testdata", "cli", tc.name+".golden"), normalize(got, tmp))
		})
	}

	// The image command makes Claude Code's image too, and its line says so.
	if _, stderr, _ := runCLI(t, []string{"--help"}); !regexp.MustCompile(`(?m)^  image +.*Claude Code`).MatchString(stderr) {
		t.Errorf("arizukod --help: the image line does not name Claude Code:\n%s", stderr)
	}

	// The command table grows with every command: only its first line is checked here.
	if _, stderr, code := runCLI(t, []string{"bogus"}); code != 2 || !strings.HasPrefix(stderr, "arizukod: unknown command \"bogus\"\n\nusage: arizukod <command> [flags]\n") {
		t.Errorf("arizukod bogus: exit %d, stderr:\n%s", code, stderr)
	}

	// A turn for a daemon without an engine is not sent; one that was queued before the
	// engine went away stays queued for when it comes back.
	if runs, err := awayStore.ListRuns(context.Background(), store.RunFilter{}); err != nil || len(runs) != 0 {
		t.Errorf("runs of the daemon without an engine: %+v (%v), want none", runs, err)
	}
	if runs, err := goneStore.ListRuns(context.Background(), store.RunFilter{}); err != nil || len(runs) != 1 || runs[0].State != store.RunQueued {
		t.Errorf("runs of the daemon whose engine went away: %+v (%v), want one queued", runs, err)
	}
}

var runID = regexp.MustCompile(`\br_[0-9a-z]+\b`)

// normalize replaces what differs between runs: the test's directory and run ids.
func normalize(s, tmp string) string {
	return runID.ReplaceAllString(strings.ReplaceAll(s, tmp, "$TMP"), "r_ID")
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		writeFile(t, path, got)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/arizukod -run TestCLIMistakes -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test ./cmd/arizukod -run TestCLIMistakes -update rewrites it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSubidCount: the ranges of a user are found by name or uid and added up; other
// users' and malformed lines are not counted.
func TestSubidCount(t *testing.T) {
	u := &user.User{Username: "arizuko", Uid: "998"}
	for _, tc := range []struct {
		name, file string
		want       int
	}{
		{"by name", "arizuko:100000:65536\n", 65536},
		{"by uid", "998:100000:65536\n", 65536},
		{"two ranges", "arizuko:100000:1000\nother:0:99999\n998:200000:64536\n", 65536},
		{"another user's", "other:100000:65536\n", 0},
		{"malformed", "arizuko:100000\narizuko:1:x\narizuko:1:-5\n\n", 0},
		{"no file", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "subuid")
			if tc.file != "" {
				writeFile(t, path, tc.file)
			}
			got, err := subidCount(path, u)
			if err != nil || got != tc.want {
				t.Errorf("subidCount = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// TestCheckCgroups: the cgroup whose controllers count is the root's for a rootful engine
// and the user's systemd service's for a rootless one (the owner of the engine's socket);
// each missing controller the limits need is named.
func TestCheckCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		skipUnlessRequired(t, "the rootless cases chown the engine's socket to nobody, which needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "podman.sock")
	writeFile(t, sock, "")
	uid, _ := strconv.Atoi(nobody.Uid)
	if err := os.Chown(sock, uid, -1); err != nil {
		t.Fatal(err)
	}
	userCg := filepath.Join("user.slice", "user-"+nobody.Uid+".slice", "user@"+nobody.Uid+".service", "cgroup.controllers")
	for _, tc := range []struct {
		name     string
		rootless bool
		files    map[string]string
		want     string // the detail, or the error with "error: " before it
	}{
		{"v1 rootful", false, map[string]string{"memory/tasks": ""}, "cgroups v1: a rootful engine applies the limits there"},
		{"v1 rootless", true, map[string]string{"memory/tasks": ""}, "error: cgroups v1 (no $CG/cgroup.controllers): a rootless engine cannot apply the memory, CPU and pids limits; boot with systemd.unified_cgroup_hierarchy=1"},
		{"v2 rootful", false, map[string]string{"cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n"}, "cgroups v2; the root cgroup (rootful engine) has the memory, pids, cpu controllers"},
		{"v2 rootful without pids", false, map[string]string{"cgroup.controllers": "cpuset cpu io memory\n"}, "error: the root cgroup (rootful engine) lacks the pids controller(s) (it has: cpuset cpu io memory): the limits cannot apply there"},
		{"v2 rootless delegated", true, map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n", userCg: "cpu memory pids\n"}, "cgroups v2; nobody's systemd service (rootless engine) has the memory, pids, cpu controllers"},
		{"v2 rootless not delegated", true, map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n", userCg: "\n"}, "error: nobody's systemd service (rootless engine) lacks the memory, pids, cpu controller(s) (it has: ): the limits cannot apply there"},
		{"v2 rootless no user service", true, map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n"}, "error: no cgroup delegated to nobody's systemd service (rootless engine): open $CG/" + userCg + ": no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg := t.TempDir()
			for name, content := range tc.files {
				writeFile(t, filepath.Join(cg, name), content)
			}
			old := cgroupRoot
			cgroupRoot = cg
			defer func() { cgroupRoot = old }()
			o := &doctorOpts{opened: true, info: engine.Info{Name: "podman", Rootless: tc.rootless, Socket: "unix://" + sock}}
			detail, err := checkCgroups(context.Background(), o)
			got := detail
			if err != nil {
				got = "error: " + err.Error()
			}
			if got = strings.ReplaceAll(got, cg, "$CG"); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// skipUnlessRequired skips a test that cannot run as this user, and fails it where the suite
// is required to run whole (ARIZUKO_REQUIRE_ENGINES=1, as in make test and CI, as root).
func skipUnlessRequired(t *testing.T, why string) {
	t.Helper()
	if enginetest.Required() {
		t.Fatalf("%s; ARIZUKO_REQUIRE_ENGINES=1 requires it: run the suite as root", why)
	}
	t.Skip(why)
}
