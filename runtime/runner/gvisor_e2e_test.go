package runner_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
)

// gvisorReport is the part of the example agent's Sandbox that tells gVisor apart.
type gvisorReport struct {
	sandboxReport
	NoNewPrivsPrctl int      `json:"noNewPrivsPrctl"`
	Kernel          string   `json:"kernel"`
	Dmesg           []string `json:"dmesg"`
	MemTotal        int64    `json:"memTotal"`
}

// underRunsc makes a turn run under gVisor.
func underRunsc(t *runner.Turn) { t.Limits.Runtime = engine.RuntimeRunsc }

// TestGVisorSandboxFromInside runs the sandbox probe under runsc on the engines of the
// test host that have it (enginetest.GVisor, hack/testhost/up.sh), and checks from inside that
// gVisor's kernel ran it, with every promise of TestSandboxFromInside still holding: no
// capabilities, no_new_privs (by prctl: gVisor's /proc/self/status has no NoNewPrivs
// line), a read-only root, loopback only, the rlimits, the memory limit (gVisor's kernel
// has exactly that much; it shows no cgroup files), and, read on the host while the agent
// runs, the pids and CPU limits on the sandbox's cgroup.
func TestGVisorSandboxFromInside(t *testing.T) {
	for _, e := range enginetest.GVisor(t) {
		t.Run(e.Name, func(t *testing.T) {
			h := newHarness(t, e, func(c *runner.Config) { c.Runtimes = []string{engine.RuntimeRunsc} })
			res := h.turn("main", "sandbox", underRunsc)
			if res.Output.Status != contract.StatusOK {
				t.Fatalf("sandbox turn under runsc: %+v", res)
			}
			var s gvisorReport
			if err := json.Unmarshal([]byte(res.Output.Result), &s); err != nil {
				t.Fatalf("decode report: %v\n%s", err, res.Output.Result)
			}
			if !strings.HasPrefix(s.Kernel, "Linux version 4.4.0 ") {
				t.Errorf("kernel %q, want gVisor's (Linux version 4.4.0)", s.Kernel)
			}
			if !slices.ContainsFunc(s.Dmesg, func(l string) bool { return strings.Contains(l, "gVisor") }) {
				t.Errorf("dmesg %q, want gVisor's", s.Dmesg)
			}
			for k, v := range s.Caps {
				if strings.Trim(v, "0") != "" {
					t.Errorf("%s = %s, want no capabilities", k, v)
				}
			}
			if s.NoNewPrivsPrctl != 1 {
				t.Errorf("prctl(PR_GET_NO_NEW_PRIVS) = %d, want 1", s.NoNewPrivsPrctl)
			}
			if s.UID != os.Getuid() || s.GID != os.Getgid() {
				t.Errorf("runs as %d:%d, want the daemon's %d:%d", s.UID, s.GID, os.Getuid(), os.Getgid())
			}
			wantWritable := map[string]bool{"/": false, "/etc": false, "/skills": false,
				"/workspace": true, "/workspace/share": true, "/root": true, "/tmp": true, "/var/run/pub/arizuko": true}
			for p, want := range wantWritable {
				if got, seen := s.Writable[p]; !seen || got != want {
					t.Errorf("writable %s = %v (seen %v), want %v", p, got, seen, want)
				}
			}
			if len(s.Interfaces) != 1 || s.Interfaces[0] != "lo" {
				t.Errorf("interfaces = %v, want only lo", s.Interfaces)
			}
			if s.MemTotal != 1<<30 {
				t.Errorf("MemTotal = %d, want the 1 GiB limit", s.MemTotal)
			}
			if s.Rlimits["nofile"] != 1024 || s.Rlimits["nproc"] != 4096 {
				t.Errorf("rlimits = %v, want nofile 1024, nproc 4096", s.Rlimits)
			}
			for _, m := range s.Mounts {
				if m.Target == "/" && !m.RO || m.Target == "/skills" && !m.RO {
					t.Errorf("mount %s is writable", m.Target)
				}
			}
			h.checkSandboxCgroup(t)
		})
	}
}

// checkSandboxCgroup runs a turn that sleeps under runsc and reads the pids and CPU limits
// of its sandbox's cgroup on the host (cgroups v1, as the engines of the test host use
// them): what gVisor's kernel does not show inside.
func (h *harness) checkSandboxCgroup(t *testing.T) {
	done := make(chan runner.Result, 1)
	go func() { done <- h.turn("main", "sleep 4s", underRunsc) }()
	var id string
	for deadline := time.Now().Add(20 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		list, err := h.eng.List(context.Background(), map[string]string{engine.LabelInstance: h.cfg.Instance})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			if c.Running {
				id = c.ID
			}
		}
	}
	if id == "" {
		t.Fatalf("no running container of the sleep turn: %+v", <-done)
	}
	want := map[string]string{"pids/pids.max": "512", "cpu/cpu.cfs_quota_us": "200000", "memory/memory.limit_in_bytes": "1073741824"}
	for file, v := range want {
		controller, name, _ := strings.Cut(file, "/")
		dir := cgroupOf(filepath.Join("/sys/fs/cgroup", controller), id)
		if dir == "" {
			t.Errorf("no %s cgroup of container %s on the host", controller, id)
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if got := strings.TrimSpace(string(b)); err != nil || got != v {
			t.Errorf("%s of the sandbox = %q (%v), want %s", filepath.Join(dir, name), got, err, v)
		}
	}
	if res := <-done; res.Output.Status != contract.StatusOK {
		t.Errorf("sleep turn under runsc: %+v", res)
	}
}

// cgroupOf is the directory under root whose name holds id, "" when none does.
func cgroupOf(root, id string) string {
	var found string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found != "" {
			return fs.SkipDir
		}
		if d.IsDir() && strings.Contains(d.Name(), id) {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	return found
}

// TestRuntimeMissingFailsClosed: a turn under an OCI runtime the operator allowed but the
// engine cannot give fails before anything runs, as a terminal misconfiguration that names
// the runtime, the engine and the fix: on Podman whose service runs runc, runsc (its API
// has no runtime per container); on Docker, a runtime it has not registered. One the
// operator did not allow fails the same way, naming limits.allowed_runtimes.
func TestRuntimeMissingFailsClosed(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			rt, fix := engine.RuntimeRunsc, "containers.conf"
			if e.Kind == "docker" {
				rt, fix = "arizuko-absent", "daemon.json"
			}
			h := newHarness(t, e, func(c *runner.Config) { c.Runtimes = []string{rt} })
			res := h.turn("main", "reply never", func(t *runner.Turn) { t.Limits.Runtime = rt })
			msg := res.Output.Error
			for _, want := range []string{`"` + rt + `"`, h.info.String(), fix} {
				if res.Failure != runner.FailMisconfig || !res.Terminal || !strings.Contains(msg, want) {
					t.Errorf("runtime %s: %+v, want a terminal misconfig naming %q", rt, res, want)
				}
			}
			t.Logf("%s", msg)
			res = h.turn("main", "reply never", func(t *runner.Turn) { t.Limits.Runtime = "crun" })
			if res.Failure != runner.FailMisconfig || !res.Terminal || !strings.Contains(res.Output.Error, "limits.allowed_runtimes") {
				t.Errorf("runtime not allowed: %+v, want a terminal misconfig naming limits.allowed_runtimes", res)
			}
		})
	}
}
