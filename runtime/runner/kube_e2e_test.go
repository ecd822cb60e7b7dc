package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/kube"
	"github.com/arizuko/arizukod/runtime/runner"
)

var (
	kubeImageOnce sync.Once
	kubeImage     string
	kubePids      int64
)

// newKubeHarness is newHarness on the test host's cluster: the example agent imported
// from podman4 into the node's containerd, Pods in namespace arizuko, network none its
// RuntimeClass, the nodes' podPidsLimit declared as the kubelet has it, and every turn's
// pids limit that same number (a lower one is refused: the kubelet's is per Pod).
func newKubeHarness(t *testing.T, mod func(*runner.Config)) *harness {
	t.Helper()
	k := enginetest.KubeCluster(t)
	pm := enginetest.Rootful(t)[0]
	kubeImageOnce.Do(func() {
		peng, _ := pm.Open(t)
		kubeImage = enginetest.EnsureAgentImage(t, pm, peng)
		k.ImportImage(t, pm, kubeImage)
	})
	kubePids = k.PodPidsLimit(t)
	eng, err := kube.New(kube.Config{Kubeconfig: k.Kubeconfig, NoNetworkClass: k.NoNetworkClass, PodPidsLimit: kubePids, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	info, err := eng.Info(ctx)
	if err != nil {
		enginetest.Missing(t, "the cluster at %s does not answer: %v", k.Kubeconfig, err)
	}
	h := harnessOn(t, "kubernetes", eng, info, kubeImage, mod)
	h.turnMod = func(tn *runner.Turn) { tn.Limits.PidsLimit = kubePids }
	return h
}

// TestKubeSandbox checks every promise from inside a turn's Pod: no capabilities,
// no_new_privs, seccomp, the daemon's uid, a read-only root, the memory, CPU and pids
// limits, and for network none an interface on an isolated bridge with no route out.
func TestKubeSandbox(t *testing.T) {
	h := newKubeHarness(t, nil)
	res := h.turn("main", "sandbox", nil)
	if res.Output.Status != contract.StatusOK {
		t.Fatalf("sandbox turn: %+v", res)
	}
	// The pids limit is on the Pod's cgroup, which the container does not see: its own
	// says max. A child that makes threads until the kernel refuses one lives it.
	s := checkSandbox(t, res, sandboxWant{interfaces: []string{"lo", "eth0"}})
	t.Logf("rlimits in a Pod (the runtime's defaults): %v; routes: %v; the container's own pids.max: %s", s.Rlimits, s.Routes, s.Cgroup["pids"])
	res = h.turn("main", "threads", nil)
	var th struct {
		Threads int64 `json:"threads"`
		Errno   int   `json:"errno"`
	}
	if err := json.Unmarshal([]byte(res.Output.Result), &th); err != nil || th.Errno != 11 || th.Threads >= kubePids || th.Threads < kubePids-64 {
		t.Fatalf("threads turn: %+v (%v); want EAGAIN a little below the %d pids of the Pod", res, err, kubePids)
	}
	t.Logf("a child held %d threads before EAGAIN, under the Pod's %d pids", th.Threads, kubePids)
}

// TestKubeNetwork proves network none from inside: the gateway of the cluster's Pod
// network, which a Pod of network bridge reaches, is unreachable from a Pod of network
// none.
func TestKubeNetwork(t *testing.T) {
	h := newKubeHarness(t, nil)
	bridge := func(tn *runner.Turn) { tn.Limits.Network = engine.NetworkBridge }
	res := h.turn("main", "sandbox", bridge)
	if res.Output.Status != contract.StatusOK {
		t.Fatalf("sandbox turn on the Pod network: %+v", res)
	}
	var s sandboxReport
	if err := json.Unmarshal([]byte(res.Output.Result), &s); err != nil {
		t.Fatal(err)
	}
	gw := ""
	for _, r := range s.Routes {
		if _, via, ok := strings.Cut(r, " via "); ok && strings.HasPrefix(r, "0.0.0.0/0") {
			gw, _, _ = strings.Cut(via, " ")
		}
	}
	if gw == "" {
		t.Fatalf("no default route on the Pod network: %v", s.Routes)
	}
	ln, err := net.Listen("tcp", gw+":0")
	if err != nil {
		t.Fatalf("listen on the Pod network's gateway %s: %v", gw, err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dial := "dial " + ln.Addr().String()
	var got struct {
		Connected bool   `json:"connected"`
		Error     string `json:"error"`
	}
	res = h.turn("main", dial, bridge)
	if err := json.Unmarshal([]byte(res.Output.Result), &got); err != nil || !got.Connected {
		t.Fatalf("network bridge: %s: %+v %v; want connected (the control)", dial, res, err)
	}
	res = h.turn("main", dial, nil)
	got.Connected, got.Error = false, ""
	if err := json.Unmarshal([]byte(res.Output.Result), &got); err != nil || got.Connected || !strings.Contains(got.Error, "unreachable") {
		t.Fatalf("network none: %s: %+v %v; want network unreachable", dial, got, err)
	}
}

// TestKubeContractEdges runs the contract's edge cases on the cluster.
func TestKubeContractEdges(t *testing.T) {
	runContractCases(t, newKubeHarness(t, nil))
}

// TestKubeOOM: a Pod that outgrows its memory limit ends as an OOM kill.
func TestKubeOOM(t *testing.T) {
	h := newKubeHarness(t, nil)
	res := h.turn("main", "oom", func(tn *runner.Turn) { tn.Limits.MemoryBytes = 64 << 20 })
	if res.Failure != runner.FailOOM || res.Output.Status != contract.StatusFatal {
		t.Fatalf("want an oom failure, got %+v", res)
	}
}

// TestKubeMissingImage: an image the node does not have is a terminal misconfiguration,
// never a pull.
func TestKubeMissingImage(t *testing.T) {
	h := newKubeHarness(t, func(c *runner.Config) { c.Image = "localhost/arizuko-no-such-image:v0" })
	res := h.turn("main", "reply hi", nil)
	if res.Failure != runner.FailMisconfig || !res.Terminal || !strings.Contains(res.Output.Error, "no such image") || !strings.Contains(res.Output.Error, "never pull") {
		t.Fatalf("want a terminal misconfig naming the missing image, got %+v", res)
	}
}

// TestKubeDeadline: a turn whose daemon is away is ended by its Pod's own deadline
// (activeDeadlineSeconds, from the spec's timeout), and the runner that adopts it
// classifies it as a timeout, not as the SIGKILL of an OOM.
func TestKubeDeadline(t *testing.T) {
	h := newKubeHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	detach := make(chan struct{})
	var id string
	started := time.Now()
	res := h.turn("main", "hang 5m", func(tn *runner.Turn) {
		tn.Timeout = 3 * time.Second
		tn.Detach = detach
		tn.OnCreated = func(_, cid string) { id = cid }
		tn.OnInput = func() { close(detach) }
	})
	if res.Failure != runner.FailDetached {
		t.Fatalf("want the turn detached, got %+v", res)
	}
	// The next daemon adopts it with a longer timeout of its own: the Pod's deadline
	// (3 s, 1 s grace, 5 s slack) comes first.
	r2, err := runner.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err = r2.Adopt(ctx, runner.Turn{RunID: "deadline", Folder: "main", InputSent: true, Timeout: time.Minute}, id, started)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failure != runner.FailTimeout || !strings.Contains(res.Output.Error, "run timeout") {
		t.Fatalf("want a timeout, got %+v", res)
	}
	if res.Duration > 40*time.Second {
		t.Errorf("took %s: the Pod's deadline is 3 s + 1 s + 5 s", res.Duration)
	}
}

// TestKubeAdopt: a turn whose runner stops (the daemon restarts) runs on, and the next
// runner adopts it: its answer is read from the Pod's log.
func TestKubeAdopt(t *testing.T) {
	h := newKubeHarness(t, nil)
	detach := make(chan struct{})
	var id string
	started := time.Now()
	res := h.turn("main", "sleep 3s", func(tn *runner.Turn) {
		tn.Detach = detach
		tn.OnCreated = func(_, cid string) { id = cid }
		tn.OnInput = func() { close(detach) }
	})
	if res.Failure != runner.FailDetached {
		t.Fatalf("want the turn detached, got %+v", res)
	}
	r2, err := runner.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kept := 0
	if _, err := r2.RemoveLeftovers(ctx, func(c engine.Container) bool {
		if c.ID == id {
			kept++
			return true
		}
		return false
	}); err != nil || kept != 1 {
		t.Fatalf("RemoveLeftovers kept %d of the adopted Pod: %v", kept, err)
	}
	res, err = r2.Adopt(ctx, runner.Turn{RunID: "adopt", Folder: "main", InputSent: true}, id, started)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output.Status != contract.StatusOK || !strings.Contains(res.Output.Result, "slept") {
		t.Fatalf("adopted turn: %+v", res)
	}
}

// TestKubeLeftovers: the leftovers of this instance are found by their labels, exactly
// (a folder with '/' is a digest in the Pod's labels), and removed; another instance's
// Pod is not touched.
func TestKubeLeftovers(t *testing.T) {
	h := newKubeHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mk := func(folder, instance string) string {
		tn := runner.Turn{Folder: groupfolder.Folder(folder), Limits: engine.Limits{PidsLimit: kubePids}}
		s := runner.AgentSpec(tn, runner.ContainerName(tn.Folder, "", time.Now()), nil, time.Minute, runner.AgentOptions{Image: h.cfg.Image, Instance: instance})
		id, err := h.eng.Create(ctx, s)
		if err != nil {
			t.Fatalf("create %s: %v", s.Name, err)
		}
		return id
	}
	ours := mk("main/research", h.cfg.Instance)
	theirs := mk("main/research", h.cfg.Instance+"-other")
	defer h.eng.Remove(ctx, theirs)
	list, err := h.eng.List(ctx, map[string]string{engine.LabelInstance: h.cfg.Instance, engine.LabelFolder: "main/research"})
	if err != nil || len(list) != 1 || list[0].ID != ours || list[0].Labels[engine.LabelFolder] != "main/research" {
		t.Fatalf("List = %+v, %v; want exactly %s with its folder", list, err, ours)
	}
	removed, err := h.runner.RemoveLeftovers(ctx, nil)
	if err != nil || len(removed) != 1 {
		t.Fatalf("RemoveLeftovers = %v, %v; want exactly our one Pod", removed, err)
	}
	if _, err := h.eng.Inspect(ctx, ours); !errors.Is(err, engine.ErrNoSuchContainer) {
		t.Errorf("our leftover still there: %v", err)
	}
	if _, err := h.eng.Inspect(ctx, theirs); err != nil {
		t.Errorf("someone else's Pod was touched: %v", err)
	}
}

// TestKubePrepared: a Pod made ahead runs blocked on stdin, is never started before its
// turn, and answers the turn; steering is refused (no signal API), its messages taken back.
func TestKubePrepared(t *testing.T) {
	h := newKubeHarness(t, func(c *runner.Config) { c.Prepared = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); h.runner.WatchImages(wctx) }()
	defer func() { stopWatch(); <-watched }()
	name := h.prepare(ctx, "main")
	st, err := h.eng.Inspect(ctx, name)
	if err != nil || st.Running || !st.StartedAt.IsZero() || st.Status != "initialized" {
		t.Fatalf("prepared %s: %+v, %v; want initialized, never started", name, st, err)
	}
	res := h.turn("main", "reply prepared", nil)
	if res.Output.Status != contract.StatusOK || res.Output.Result != "prepared" || res.Container != name {
		t.Fatalf("turn on the prepared Pod %s: %+v", name, res)
	}

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
			tn.Timeout = 8 * time.Second
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
	err = h.runner.Steer(ctx, "main", cid, []contract.Message{{Role: "user", Content: "turn left"}})
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Steer = %v, want ErrUnsupported", err)
	}
	input, err := h.layout.IPCInputDir("main")
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(input); len(left) != 0 {
		t.Errorf("steering messages left behind: %v", left)
	}
	<-done
}
