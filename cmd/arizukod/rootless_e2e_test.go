package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/arizuko/arizukod/internal/enginetest"
)

// TestRootlessPodman runs `arizukod run --local` as the unprivileged test user against that
// user's rootless Podman: the deployment the system service uses. It checks the sandbox
// from inside and that the agent's files belong to that user on the host. The limits
// cannot be applied there: the turn runs only once the configuration allows that.
func TestRootlessPodman(t *testing.T) {
	e := enginetest.Rootless(t)
	eng, info := e.Open(t)
	image := enginetest.EnsureAgentImage(t, e, eng)
	u, err := user.Lookup(e.User)
	if err != nil {
		t.Fatalf("user %s: %v", e.User, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)

	// The user's own temporary directory holds the binary and the data dir, so the user can
	// reach both and the test leaves nothing behind.
	base, err := os.MkdirTemp(u.HomeDir, "arizuko-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	bin := filepath.Join(base, "arizukod")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build arizukod: %v\n%s", err, out)
	}
	dataDir := filepath.Join(base, "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{base, dataDir} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	// The configuration run --local reads: the test user's, under base.
	confDir := filepath.Join(base, "config", "arizuko")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(confDir), confDir} {
		os.Chown(p, uid, gid)
	}
	attempt := func(message string) map[string]any {
		t.Helper()
		cmd := exec.Command("runuser", "-u", e.User, "--", bin, "run", "--local",
			"--engine", "podman", "--engine-socket", e.URI, "--image", image,
			"--data-dir", dataDir, "--folder", "main", "--message", message)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.HomeDir, "XDG_RUNTIME_DIR=/run/user/" + u.Uid,
			"XDG_CONFIG_HOME=" + filepath.Join(base, "config")}
		out, err := cmd.Output()
		var res map[string]any
		if jerr := json.Unmarshal(out, &res); jerr != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("run %q as %s: %v\n%s\n%s", message, e.User, err, out, stderr)
		}
		return res
	}
	run := func(message string) map[string]any {
		t.Helper()
		res := attempt(message)
		if res["status"] != "ok" {
			t.Fatalf("run %q: %v", message, res)
		}
		return res
	}

	// Where rootless Podman cannot apply the memory, CPU and pids limits (this host's
	// cgroups v1), a turn without allow_unlimited is refused with the reason.
	if info.NoLimits != "" {
		res := attempt("reply unlimited")
		if msg, _ := res["error"].(string); res["failure"] != "misconfig" || res["terminal"] != true ||
			!strings.Contains(msg, info.NoLimits) || !strings.Contains(msg, "allow_unlimited = true") {
			t.Fatalf("a turn without allow_unlimited: %v, want a terminal misconfig with the reason", res)
		}
		t.Logf("refused: %s", res["error"])
	}
	conf := filepath.Join(confDir, "arizukod.toml")
	if err := os.WriteFile(conf, []byte("[limits]\nallow_unlimited = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var s struct {
		UID        int               `json:"uid"`
		Caps       map[string]string `json:"caps"`
		NoNewPrivs string            `json:"noNewPrivs"`
		Writable   map[string]bool   `json:"writable"`
		Interfaces []string          `json:"interfaces"`
	}
	if err := json.Unmarshal([]byte(run("sandbox")["result"].(string)), &s); err != nil {
		t.Fatal(err)
	}
	for k, v := range s.Caps {
		if strings.Trim(v, "0") != "" {
			t.Errorf("%s = %s, want no capabilities", k, v)
		}
	}
	if s.NoNewPrivs != "1" {
		t.Errorf("NoNewPrivs = %q", s.NoNewPrivs)
	}
	if s.Writable["/"] || s.Writable["/etc"] || !s.Writable["/workspace"] || !s.Writable["/root"] {
		t.Errorf("writable = %v", s.Writable)
	}
	if len(s.Interfaces) != 1 || s.Interfaces[0] != "lo" {
		t.Errorf("interfaces = %v, want only lo", s.Interfaces)
	}

	run("write out/note.txt from a rootless agent")
	p := filepath.Join(dataDir, "groups", "main", "out", "note.txt")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("%s owned by %d:%d, want the service user %d:%d", p, st.Uid, st.Gid, uid, gid)
	}

	// gVisor asked of the rootless service, whose own runtime is runc (Podman's API has no
	// runtime per container): the turn fails closed, naming the runtime, the engine and
	// the rootless user's containers.conf.
	gvisor := "[limits]\nallow_unlimited = true\nruntime = \"runsc\"\nallowed_runtimes = [\"runsc\"]\n"
	if err := os.WriteFile(conf, []byte(gvisor), 0o644); err != nil {
		t.Fatal(err)
	}
	res := attempt("reply under gVisor")
	if msg, _ := res["error"].(string); res["failure"] != "misconfig" || res["terminal"] != true || !strings.Contains(msg, `not "runsc"`) ||
		!strings.Contains(msg, info.String()) || !strings.Contains(msg, "~/.config/containers/containers.conf") {
		t.Errorf("runsc on the rootless runc service: %v, want a terminal misconfig naming runtime, engine and fix", res)
	}
}
