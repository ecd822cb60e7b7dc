package daemon_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	daemontest.RemoveBinary()
	os.Exit(code)
}

// fakeGit puts a `git` first on a PATH that writes its environment to dir/git-env.PID: the
// daemon runs git (for the git identity of the env file) and nothing else, so it shows what
// a child of the daemon inherits.
func fakeGit(t *testing.T, dir string) string {
	bin := filepath.Join(dir, "fakebin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nenv > %s/git-env.$$\nexit 1\n", dir)
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// childEnvs reads what fakeGit recorded.
func childEnvs(t *testing.T, dir string) map[string]string {
	files, err := filepath.Glob(filepath.Join(dir, "git-env.*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = string(b)
	}
	return out
}

func listenVars(env []byte, sep byte) []string {
	var out []string
	for _, kv := range bytes.Split(env, []byte{sep}) {
		if bytes.HasPrefix(kv, []byte("LISTEN_")) {
			out = append(out, string(kv))
		}
	}
	return out
}

// TestSocketActivation starts arizukod under systemd-socket-activate, which execs it on the
// first connection with LISTEN_FDS: the daemon serves that socket, and no child of the
// daemon inherits LISTEN_*.
func TestSocketActivation(t *testing.T) {
	if _, err := exec.LookPath("systemd-socket-activate"); err != nil {
		enginetest.Missing(t, "systemd-socket-activate: %v", err)
	}
	d := daemontest.New(t, daemontest.Config{Engine: daemontest.Podman4(t), EnvFile: "GH_TOKEN=ghp_test_" + daemontest.RandHex(8) + "\n"})
	bin := fakeGit(t, d.Dir)
	d.StartWith(t, []string{"systemd-socket-activate", "-l", d.Socket,
		"-E", "PATH=" + bin + ":" + os.Getenv("PATH"), "-E", "HOME=" + os.Getenv("HOME")}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(d.Socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("systemd-socket-activate made no socket in 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t0 := time.Now()
	code, body, err := d.Do(http.MethodGet, "/health", "", nil)
	first := time.Since(t0)
	if err != nil {
		t.Fatalf("first connection: %v\n%s", err, d.Output())
	}
	h := d.WaitHealthy(t, 30*time.Second)
	t.Logf("socket activation: first answer (HTTP %d) %s after the first connection, healthy after %s; engine %s %s",
		code, first.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), h.Engine.Name, h.Engine.Version)
	if code != http.StatusOK {
		t.Logf("the first answer was not ok: %s", body)
	}

	// The daemon is systemd-socket-activate's process, exec'd: its pid.
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", d.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if cmdline := mustRead(t, fmt.Sprintf("/proc/%d/cmdline", d.Pid())); !bytes.HasPrefix(cmdline, []byte(d.Bin+"\x00serve")) {
		t.Fatalf("pid %d is not arizukod: %q", d.Pid(), cmdline)
	}
	// /proc/PID/environ is the block the process was started with; unsetenv never rewrites
	// it, so it shows LISTEN_* whatever the daemon did. What counts is what children get.
	t.Logf("/proc/%d/environ (the environment at exec): %v", d.Pid(), listenVars(environ, 0))
	children := childEnvs(t, d.Dir)
	if len(children) == 0 {
		t.Fatal("the daemon ran no git: nothing shows what its children inherit")
	}
	for name, env := range children {
		if v := listenVars([]byte(env), '\n'); len(v) > 0 {
			t.Errorf("child %s of the daemon inherited %v", name, v)
		}
	}
	t.Logf("%d children of the daemon checked for LISTEN_*", len(children))

	d.AddGroup(t, "main")
	word := "activated-" + daemontest.RandHex(4)
	if r := d.Turn(t, "main", "reply "+word); r.Status != "ok" || r.Result != word {
		t.Fatalf("turn through the activated socket: %+v", r)
	}
}

// TestSocketActivationFirstHealth: the first GET /health of a socket-activated daemon is
// 200 ok once the engine answers a ping, with the limits "pending" rather than a degraded
// status while its details are asked; the details follow, and a turn runs.
func TestSocketActivationFirstHealth(t *testing.T) {
	if _, err := exec.LookPath("systemd-socket-activate"); err != nil {
		enginetest.Missing(t, "systemd-socket-activate: %v", err)
	}
	d := daemontest.New(t, daemontest.Config{Engine: daemontest.Podman4(t)})
	d.StartWith(t, []string{"systemd-socket-activate", "-l", d.Socket, "-E", "PATH=" + os.Getenv("PATH"), "-E", "HOME=" + os.Getenv("HOME")}, nil)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(d.Socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("systemd-socket-activate made no socket in 10s")
		}
	}
	first, code, err := d.Health()
	if err != nil {
		t.Fatalf("first connection: %v\n%s", err, d.Output())
	}
	if code != http.StatusOK || first.Status != "ok" || !first.Engine.Up {
		t.Fatalf("first /health: HTTP %d %+v, want 200 ok with the engine up", code, first)
	}
	if first.Engine.Limits != apiwire.LimitsPending && first.Engine.Limits != "applied" {
		t.Fatalf("first /health: limits %q, want %q or applied", first.Engine.Limits, apiwire.LimitsPending)
	}
	h := d.WaitHealthy(t, 30*time.Second)
	if h.Engine.Limits != "applied" || h.Engine.Name != "podman" || h.Engine.Version == "" {
		t.Fatalf("health once the details are known: %+v, want podman with its version and limits applied", h)
	}
	t.Logf("first /health: %s %q; then %s %s, limits %s", first.Status, first.Engine.Limits, h.Engine.Name, h.Engine.Version, h.Engine.Limits)
	d.AddGroup(t, "main")
	word := "first-" + daemontest.RandHex(4)
	if r := d.Turn(t, "main", "reply "+word); r.Status != "ok" || r.Result != word {
		t.Fatalf("turn after the first answer: %+v", r)
	}
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSystemdUserSocket installs a .socket and a Type=notify .service in the test host's
// real systemd user manager: the first connection starts arizukod, which becomes active only
// with READY=1, says how it is in STATUS=, runs a turn and logs it to journald under its unit.
func TestSystemdUserSocket(t *testing.T) {
	if os.Getenv("ARIZUKO_TEST_SYSTEMD_USER") != "1" {
		enginetest.Missing(t, "ARIZUKO_TEST_SYSTEMD_USER is not set: no systemd user manager")
	}
	daemontest.JournalOn(t)
	rt := os.Getenv("ARIZUKO_TEST_SYSTEMD_RUNTIME_DIR")
	if rt == "" {
		rt = "/run/user/" + strconv.Itoa(os.Getuid())
	}
	systemctl := func(args ...string) (string, error) {
		cmd := exec.Command("systemctl", append([]string{"--user"}, args...)...)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	show := func(unit, prop string) string {
		out, _ := systemctl("show", "-p", prop, "--value", unit)
		return out
	}
	if out, err := systemctl("is-system-running"); err != nil && out != "degraded" {
		enginetest.Missing(t, "systemd user manager at %s: %s %v", rt, out, err)
	}
	d := daemontest.New(t, daemontest.Config{Engine: daemontest.Podman4(t)})
	unit := "arizukod-test-" + daemontest.RandHex(4)
	unitDir := filepath.Join(rt, "systemd", "user")
	if err := os.MkdirAll(unitDir, 0o755); err != nil {
		t.Fatal(err)
	}
	socketUnit := fmt.Sprintf("[Unit]\nDescription=arizukod test socket (%s)\n\n[Socket]\nListenStream=%s\nSocketMode=0600\nRemoveOnStop=yes\n", t.Name(), d.Socket)
	serviceUnit := fmt.Sprintf("[Unit]\nDescription=arizukod test service (%s)\nRequires=%s.socket\nAfter=%s.socket\n\n"+
		"[Service]\nType=notify\nNotifyAccess=main\nExecStart=%s serve --config %s\nTimeoutStopSec=30\n", t.Name(), unit, unit, d.Bin, d.ConfigPath)
	files := map[string]string{unit + ".socket": socketUnit, unit + ".service": serviceUnit}
	t.Cleanup(func() {
		if err := d.Drain(60 * time.Second); err != nil {
			t.Errorf("before stopping the unit: %v", err)
		}
		if out, err := systemctl("stop", unit+".service", unit+".socket"); err != nil {
			t.Errorf("systemctl stop: %v: %s", err, out)
		}
		if st := show(unit+".service", "ActiveState"); st != "inactive" && st != "failed" {
			t.Errorf("after stop the service is %s", st)
		}
		for name := range files {
			os.Remove(filepath.Join(unitDir, name))
		}
		systemctl("reset-failed", unit+".service", unit+".socket")
		systemctl("daemon-reload")
		if _, err := os.Stat(d.Socket); err == nil {
			t.Errorf("socket %s still there after the socket unit stopped", d.Socket)
		}
	})
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(unitDir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := systemctl("daemon-reload"); err != nil {
		t.Fatalf("daemon-reload: %v: %s", err, out)
	}
	if out, err := systemctl("start", unit+".socket"); err != nil {
		t.Fatalf("start %s.socket: %v: %s", unit, err, out)
	}
	if st := show(unit+".service", "ActiveState"); st != "inactive" {
		t.Fatalf("before the first connection the service is %s, want inactive", st)
	}

	t0 := time.Now()
	code, body, err := d.Do(http.MethodGet, "/health", "", nil)
	first := time.Since(t0)
	if err != nil {
		t.Fatalf("first connection: %v", err)
	}
	pid, _ := strconv.Atoi(show(unit+".service", "MainPID"))
	d.AddPid(pid)
	d.WaitHealthy(t, 30*time.Second)
	healthy := time.Since(t0)
	var state, status string
	for deadline := time.Now().Add(30 * time.Second); ; {
		state, status = show(unit+".service", "ActiveState"), show(unit+".service", "StatusText")
		if state == "active" && strings.Contains(status, "running") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s: first answer (HTTP %d) %s after the first connection, healthy after %s, MainPID %d, %s, STATUS=%q",
		unit, code, first.Round(time.Millisecond), healthy.Round(time.Millisecond), pid, state, status)
	if code != http.StatusOK {
		t.Logf("the first answer was not ok: %s", body)
	}
	if state != "active" {
		t.Fatalf("the Type=notify service is %s, want active (READY=1)", state)
	}
	if !strings.Contains(status, "running") || !strings.Contains(status, "podman") {
		t.Errorf("StatusText %q: want the running count and the engine", status)
	}

	d.AddGroup(t, "main")
	word := "hello-" + daemontest.RandHex(4)
	run := d.Turn(t, "main", "stderr "+word)
	if run.Status != "ok" {
		t.Fatalf("turn through the systemd-started daemon: %+v", run)
	}
	es := daemontest.WaitJournal(t, 5*time.Second, func(es []daemontest.Entry) bool {
		return daemontest.Find(es, "turn finished") != nil && daemontest.Find(es, word) != nil
	}, "ARIZUKO_RUN_ID="+run.ID)
	end := daemontest.Find(es, "turn finished")
	want := map[string]string{"SYSLOG_IDENTIFIER": "arizukod", "ARIZUKO_RUN_ID": run.ID, "ARIZUKO_FOLDER": "main",
		"ARIZUKO_CONTAINER": run.Container, "ARIZUKO_STATUS": "ok", "ARIZUKO_EXIT_CODE": "0", "_PID": strconv.Itoa(pid)}
	for k, v := range want {
		if end[k] != v {
			t.Errorf("journal %s = %q, want %q", k, end[k], v)
		}
	}
	if ms, err := strconv.Atoi(end["ARIZUKO_DURATION_MS"]); err != nil || ms <= 0 {
		t.Errorf("ARIZUKO_DURATION_MS %q", end["ARIZUKO_DURATION_MS"])
	}
	svc := unit + ".service"
	switch {
	case end["_SYSTEMD_USER_UNIT"] == svc:
		t.Logf("journald recorded _SYSTEMD_USER_UNIT=%s", svc)
	case end["_SYSTEMD_UNIT"] == svc:
		t.Logf("journald recorded _SYSTEMD_UNIT=%s", svc)
	case end["_SYSTEMD_USER_UNIT"] != "" || end["_SYSTEMD_UNIT"] != "":
		t.Errorf("journald names another unit: _SYSTEMD_UNIT=%q _SYSTEMD_USER_UNIT=%q, want %s", end["_SYSTEMD_UNIT"], end["_SYSTEMD_USER_UNIT"], svc)
	default:
		t.Logf("journald recorded no unit for pid %d (_SYSTEMD_CGROUP=%q): the user manager's cgroups are not visible to it here", pid, end["_SYSTEMD_CGROUP"])
	}
	t.Logf("journal: %d entries for run %s", len(es), run.ID)
}
