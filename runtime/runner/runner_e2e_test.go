package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
)

// harness is one engine with a runner over a fresh data directory.
type harness struct {
	t      *testing.T
	name   string
	eng    engine.Engine
	info   engine.Info
	runner *runner.Runner
	layout groupfolder.Layout
	cfg    runner.Config
	// turnMod, when set, changes every turn before the test's own change.
	turnMod func(*runner.Turn)
}

func newHarness(t *testing.T, e enginetest.Engine, mod func(*runner.Config)) *harness {
	t.Helper()
	eng, info := e.Open(t)
	return harnessOn(t, e.Name, eng, info, enginetest.EnsureAgentImage(t, e, eng), mod)
}

// harnessOn is a harness whose runner drives eng with image, over a data directory of its
// own; it checks at the end that nothing of its instance is left on the engine.
func harnessOn(t *testing.T, name string, eng engine.Engine, info engine.Info, image string, mod func(*runner.Config)) *harness {
	t.Helper()
	dataDir := enginetest.DataDir(t)
	layout, err := groupfolder.NewLayout(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	skills := filepath.Join(dataDir, "skills")
	if err := os.MkdirAll(filepath.Join(skills, "diary"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := runner.Config{
		Engine: eng, Info: info, Layout: layout, Image: image,
		Instance:  "test-" + filepath.Base(dataDir),
		SkillsDir: skills, StopGrace: time.Second, Timeout: time.Minute,
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := runner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, name: name, eng: eng, info: info, runner: r, layout: layout, cfg: cfg}
	t.Cleanup(h.assertNoLeftovers)
	return h
}

func (h *harness) assertNoLeftovers() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h.runner.Close()
	list, err := h.eng.List(ctx, map[string]string{engine.LabelInstance: h.cfg.Instance})
	if err != nil {
		h.t.Errorf("%s: list containers: %v", h.name, err)
		return
	}
	for _, c := range list {
		h.t.Errorf("%s: container %s left behind", h.name, c.Name)
		h.eng.Remove(ctx, c.ID)
	}
}

func (h *harness) turn(folder, message string, mod func(*runner.Turn)) runner.Result {
	h.t.Helper()
	f, err := groupfolder.Parse(folder)
	if err != nil {
		h.t.Fatal(err)
	}
	t := runner.Turn{RunID: "r-" + strings.ReplaceAll(h.t.Name(), "/", "-"), Folder: f,
		Input: contract.Input{Messages: []contract.Message{{Role: "user", Content: message}}}}
	if h.turnMod != nil {
		h.turnMod(&t)
	}
	if mod != nil {
		mod(&t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := h.runner.Run(ctx, t)
	if err != nil {
		h.t.Fatalf("%s: Run(%q): %v", h.name, message, err)
	}
	return res
}

// sandboxReport mirrors the example agent's Sandbox.
type sandboxReport struct {
	UID        int               `json:"uid"`
	GID        int               `json:"gid"`
	Caps       map[string]string `json:"caps"`
	NoNewPrivs string            `json:"noNewPrivs"`
	Seccomp    string            `json:"seccomp"`
	Writable   map[string]bool   `json:"writable"`
	Interfaces []string          `json:"interfaces"`
	Routes     []string          `json:"routes"`
	Cgroup     map[string]string `json:"cgroup"`
	Mounts     []struct {
		Target string `json:"target"`
		Root   string `json:"root"`
		RO     bool   `json:"ro"`
	} `json:"mounts"`
	Rlimits map[string]uint64 `json:"rlimits"`
}

// TestSandboxFromInside checks every hardening promise from inside a real container on
// every rootful engine of the test host.
func TestSandboxFromInside(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			h := newHarness(t, e, nil)
			res := h.turn("main", "sandbox", nil)
			if res.Output.Status != contract.StatusOK {
				t.Fatalf("sandbox turn: %+v", res)
			}
			checkSandbox(t, res, sandboxWant{interfaces: []string{"lo"}, pids: "512", rlimits: true})
		})
	}
}

// sandboxWant is what differs between engines in a sandbox report: the interfaces of
// network none, the pids limit of the container's own cgroup ("" where it is not there),
// whether the turn's rlimits apply.
type sandboxWant struct {
	interfaces []string
	pids       string
	rlimits    bool
}

// checkSandbox checks every hardening promise in the report of a "sandbox" turn.
func checkSandbox(t *testing.T, res runner.Result, w sandboxWant) sandboxReport {
	t.Helper()
	var s sandboxReport
	if err := json.Unmarshal([]byte(res.Output.Result), &s); err != nil {
		t.Fatalf("decode report: %v\n%s", err, res.Output.Result)
	}
	for k, v := range s.Caps {
		if strings.Trim(v, "0") != "" {
			t.Errorf("%s = %s, want no capabilities", k, v)
		}
	}
	if s.NoNewPrivs != "1" {
		t.Errorf("NoNewPrivs = %q, want 1", s.NoNewPrivs)
	}
	if s.Seccomp != "2" {
		t.Errorf("Seccomp = %q, want 2 (a filter)", s.Seccomp)
	}
	if s.UID != os.Getuid() || s.GID != os.Getgid() {
		t.Errorf("runs as %d:%d, want the daemon's %d:%d", s.UID, s.GID, os.Getuid(), os.Getgid())
	}
	wantWritable := map[string]bool{"/": false, "/etc": false, "/usr": false, "/skills": false,
		"/workspace": true, "/workspace/share": true, "/workspace/media": true, "/root": true, "/tmp": true, "/var/run/pub/arizuko": true}
	for p, want := range wantWritable {
		got, seen := s.Writable[p]
		if p == "/usr" && !seen {
			continue // the scratch image has no /usr
		}
		if !seen || got != want {
			t.Errorf("writable %s = %v (seen %v), want %v", p, got, seen, want)
		}
	}
	if !slices.Equal(s.Interfaces, w.interfaces) {
		t.Errorf("interfaces = %v, want %v", s.Interfaces, w.interfaces)
	}
	for _, r := range s.Routes {
		if strings.HasPrefix(r, "0.0.0.0/0") {
			t.Errorf("a default route: %s (routes %v)", r, s.Routes)
		}
	}
	if got := s.Cgroup["memory"]; got != "1073741824" {
		t.Errorf("memory limit = %q, want 1073741824", got)
	}
	if got := s.Cgroup["pids"]; w.pids != "" && got != w.pids {
		t.Errorf("pids limit = %q, want %s", got, w.pids)
	}
	if got := s.Cgroup["cpu"]; got != "200000" && !strings.HasPrefix(got, "200000 ") {
		t.Errorf("cpu quota = %q, want 200000 per 100000 period (2 CPUs)", got)
	}
	if w.rlimits && (s.Rlimits["nofile"] != 1024 || s.Rlimits["nproc"] != 4096) {
		t.Errorf("rlimits = %v, want nofile 1024, nproc 4096", s.Rlimits)
	}
	wantRO := map[string]bool{"/": true, "/workspace": false, "/root": false, "/var/run/pub/arizuko": false, "/skills": true, "/tmp": false}
	seen := map[string]bool{}
	for _, m := range s.Mounts {
		if want, ok := wantRO[m.Target]; ok {
			seen[m.Target] = true
			if m.RO != want {
				t.Errorf("mount %s ro = %v, want %v", m.Target, m.RO, want)
			}
		}
	}
	for target := range wantRO {
		if !seen[target] {
			t.Errorf("mount %s missing; mounts: %+v", target, s.Mounts)
		}
	}
	return s
}

// TestWritesBelongToDaemonUser checks that what the agent writes into /workspace is owned by
// the daemon's user on the host, never by another.
func TestWritesBelongToDaemonUser(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			h := newHarness(t, e, nil)
			res := h.turn("main/research", "write notes/hello.txt hi there", nil)
			if res.Output.Status != contract.StatusOK {
				t.Fatalf("write turn: %+v", res)
			}
			dir, _ := h.layout.GroupDir("main/research")
			p := filepath.Join(dir, "notes/hello.txt")
			b, err := os.ReadFile(p)
			if err != nil || string(b) != "hi there" {
				t.Fatalf("read %s: %q, %v", p, b, err)
			}
			st, _ := os.Stat(p)
			sys := st.Sys().(*syscall.Stat_t)
			if int(sys.Uid) != os.Getuid() || int(sys.Gid) != os.Getgid() {
				t.Errorf("%s owned by %d:%d, want %d:%d", p, sys.Uid, sys.Gid, os.Getuid(), os.Getgid())
			}
			if res.LogFile == "" {
				t.Fatal("no run log file")
			}
			log, err := os.ReadFile(res.LogFile)
			if err != nil || !strings.Contains(string(log), "exit: 0") || !strings.Contains(string(log), "container: arizuko-main-research-") {
				t.Errorf("run log %s: %v\n%s", res.LogFile, err, log)
			}
		})
	}
}

// contractCases are the contract's edge cases, run on every engine.
var contractCases = []struct {
	message    string
	status     contract.Status
	failure    runner.Failure
	terminal   bool
	resultHas  string
	errorHas   string
	timeout    time.Duration
	maxElapsed time.Duration
}{
	{message: "reply hi", status: contract.StatusOK, resultHas: "hi"},
	{message: "noise", status: contract.StatusOK, resultHas: "after noise"},
	{message: "error bad day", status: contract.StatusError, errorHas: "bad day"},
	{message: "fatal lost", status: contract.StatusFatal, errorHas: "lost"},
	{message: "silent", status: contract.StatusFatal, failure: runner.FailNoOutput, errorHas: "no output block"},
	{message: "badjson", status: contract.StatusFatal, failure: runner.FailBadOutput, errorHas: "not valid contract JSON"},
	{message: "flood 8MB", status: contract.StatusOK, resultHas: "flooded 8388608 bytes"},
	{message: "exit 126", status: contract.StatusFatal, failure: runner.FailMisconfig, terminal: true, errorHas: "exited 126"},
	{message: "exit 3", status: contract.StatusFatal, failure: runner.FailNoOutput, errorHas: "exit 3"},
	{message: "hang 5m", status: contract.StatusFatal, failure: runner.FailTimeout, errorHas: "run timeout", timeout: 4 * time.Second},
	{message: "flood forever", status: contract.StatusFatal, failure: runner.FailTimeout, errorHas: "run timeout", timeout: 5 * time.Second},
}

// TestContractEdges runs the contract's edge cases on every rootful engine.
func TestContractEdges(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) { runContractCases(t, newHarness(t, e, nil)) })
	}
}

// runContractCases runs contractCases on h, one turn each.
func runContractCases(t *testing.T, h *harness) {
	for _, c := range contractCases {
		t.Run(strings.Fields(c.message)[0]+"-"+strings.Join(strings.Fields(c.message)[1:], "-"), func(t *testing.T) {
			res := h.turn("main", c.message, func(tn *runner.Turn) { tn.Timeout = c.timeout })
			o := res.Output
			if o.Status != c.status || res.Failure != c.failure || res.Terminal != c.terminal {
				t.Fatalf("got status %q failure %q terminal %v (%s); want %q %q %v", o.Status, res.Failure, res.Terminal, o.Error, c.status, c.failure, c.terminal)
			}
			if !strings.Contains(o.Result, c.resultHas) || !strings.Contains(o.Error, c.errorHas) {
				t.Fatalf("result %q error %q; want result containing %q, error containing %q", o.Result, o.Error, c.resultHas, c.errorHas)
			}
			if c.timeout > 0 {
				// Killed within the timeout plus the stop grace, with room for teardown.
				if limit := c.timeout + h.cfg.StopGrace + 10*time.Second; res.Duration > limit {
					t.Errorf("took %s, want at most %s", res.Duration, limit)
				}
			}
		})
	}
}

// TestSoftDeadline checks that the agent sees the _close sentinel before the hard kill and
// can still answer.
func TestSoftDeadline(t *testing.T) {
	e := enginetest.Rootful(t)[0]
	h := newHarness(t, e, nil)
	res := h.turn("main", "sleep 5m", func(tn *runner.Turn) { tn.Timeout = 6 * time.Second })
	if res.Output.Status != contract.StatusOK || !strings.Contains(res.Output.Result, "closed early") {
		t.Fatalf("want an answer after _close, got %+v", res)
	}
}

// TestOOM gives the agent 64 MiB and lets it allocate without end.
func TestOOM(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			h := newHarness(t, e, nil)
			res := h.turn("main", "oom", func(tn *runner.Turn) { tn.Limits.MemoryBytes = 64 << 20 })
			if res.Failure != runner.FailOOM || res.Output.Status != contract.StatusFatal {
				t.Fatalf("want an oom failure, got %+v", res)
			}
		})
	}
}

// TestMissingImage checks that a missing image is a terminal misconfiguration, not a pull.
func TestMissingImage(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			h := newHarness(t, e, func(c *runner.Config) { c.Image = "localhost/arizuko-no-such-image:v0" })
			res := h.turn("main", "reply hi", nil)
			if res.Failure != runner.FailMisconfig || !res.Terminal || !strings.Contains(res.Output.Error, "no such image") || !strings.Contains(res.Output.Error, "never pull") {
				t.Fatalf("want a terminal misconfig naming the missing image, got %+v", res)
			}
			ctx := context.Background()
			if ok, err := h.eng.ImageExists(ctx, "localhost/arizuko-no-such-image:v0"); ok || err != nil {
				t.Fatalf("image appeared (pulled?): %v %v", ok, err)
			}
		})
	}
}

// TestSteer sends a steering message to a live run.
func TestSteer(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			h := newHarness(t, e, nil)
			var once sync.Once
			ready := make(chan struct{})
			var id string
			var mu sync.Mutex
			done := make(chan runner.Result, 1)
			go func() {
				done <- h.turn("main", "steer", func(tn *runner.Turn) {
					tn.OnCreated = func(_, cid string) { mu.Lock(); id = cid; mu.Unlock() }
					tn.OnStderr = func(line string) {
						if strings.Contains(line, "waiting for SIGUSR1") {
							once.Do(func() { close(ready) })
						}
					}
				})
			}()
			select {
			case <-ready:
			case res := <-done:
				t.Fatalf("turn ended before steering: %+v", res)
			case <-time.After(time.Minute):
				t.Fatal("agent never got ready to be steered")
			}
			mu.Lock()
			cid := id
			mu.Unlock()
			err := h.runner.Steer(context.Background(), "main", cid, []contract.Message{{Role: "user", Content: "turn left"}})
			if err != nil {
				t.Fatalf("Steer: %v", err)
			}
			res := <-done
			if res.Output.Status != contract.StatusOK || res.Output.Result != "steered: turn left" {
				t.Fatalf("steered turn: %+v", res)
			}
		})
	}
}

// TestKillOnCancel cancels a running turn: the container is stopped and removed.
func TestKillOnCancel(t *testing.T) {
	e := enginetest.Rootful(t)[0]
	h := newHarness(t, e, nil)
	f, _ := groupfolder.Parse("main")
	ctx, cancel := context.WithCancel(context.Background())
	created := make(chan struct{})
	go func() {
		<-created
		time.Sleep(500 * time.Millisecond)
		cancel()
	}()
	res, err := h.runner.Run(ctx, runner.Turn{RunID: "kill", Folder: f,
		Input:     contract.Input{Messages: []contract.Message{{Content: "sleep 5m"}}},
		OnCreated: func(string, string) { close(created) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failure != runner.FailKilled {
		t.Fatalf("want killed, got %+v", res)
	}
}

// TestRemoveLeftovers removes what a crash left behind, and nothing of anyone else's.
func TestRemoveLeftovers(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			h := newHarness(t, e, nil)
			ctx := context.Background()
			mk := func(name, instance string) string {
				id, err := h.eng.Create(ctx, engine.Spec{Name: name, Image: h.cfg.Image, Stdin: true,
					Labels: map[string]string{engine.LabelInstance: instance, engine.LabelFolder: "main"}})
				if err != nil {
					t.Fatalf("create %s: %v", name, err)
				}
				return id
			}
			ours := mk("arizuko-leftover-"+h.cfg.Instance, h.cfg.Instance)
			theirs := mk("arizuko-other-"+h.cfg.Instance, "someone-else")
			defer h.eng.Remove(ctx, theirs)
			removed, err := h.runner.RemoveLeftovers(ctx, nil)
			if err != nil || len(removed) != 1 {
				t.Fatalf("RemoveLeftovers = %v, %v; want exactly our one container", removed, err)
			}
			if _, err := h.eng.Inspect(ctx, ours); !errors.Is(err, engine.ErrNoSuchContainer) {
				t.Errorf("our leftover still there: %v", err)
			}
			if _, err := h.eng.Inspect(ctx, theirs); err != nil {
				t.Errorf("someone else's container was touched: %v", err)
			}
		})
	}
}
