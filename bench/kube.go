package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/kube"
	"github.com/arizuko/arizukod/runtime/runner"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeMethod is one way to run a no-op turn with runner.Run: an engine, with a container
// prepared ahead or not.
type kubeMethod struct {
	name     string
	engine   string // "kubernetes" or "podman 4"
	prepared bool
	run      *runner.Runner
	folder   groupfolder.Folder
	turn     runner.Turn // the turn's fixed part: folder and limits
	sample   sample
	// took counts the measured turns that ran in the container prepared for them.
	took int
}

// kubeProc is one process of the test host's cluster with its resident memory (KiB), idle
// before the turns and after them.
type kubeProc struct {
	name, pidfile     string
	pid               int
	idleRSS, idleAnon int64
	afterRSS          int64
	afterAnon         int64
	err               string
}

// kubeResult is the cluster's section: runner turns on the cluster next to Podman 4, and
// what its processes hold.
type kubeResult struct {
	version   string
	pidsLimit int64
	// nodes and pods are the cluster's, when its idle memory was read: the API server and
	// etcd hold every one of them.
	nodes, pods int
	warm        int
	turns       int
	methods     []*kubeMethod
	procs       []kubeProc
}

// kubeProcs are the cluster's processes the memory table names, in its order: the name
// shown and the test host's pid file (hack/kube/up.sh: <testhost>/kube/pids/kube-NAME.pid).
var kubeProcs = [][2]string{{"kube-apiserver", "apiserver"}, {"kube-controller-manager", "controller-manager"},
	{"kube-scheduler", "scheduler"}, {"kubelet", "kubelet"}, {"etcd", "etcd"}, {"containerd", "containerd"}, {"kwok", "kwok"}}

// kube measures turns on the test host's cluster (runtime/kube) against turns on Podman 4,
// both through runner.Run in this process with the same image, folder and no-op turn, and
// with a container prepared ahead or not: the four take turns, one each per round, so
// that load hits them alike. A prepared method prepares the next container right after
// its turn, while the other methods run, as the daemon does. Then the resident memory of
// the cluster's processes, idle before the turns and after them.
func (b *bench) kube(ctx context.Context) error {
	kubeDir := filepath.Join(b.o.testhostDir, "kube")
	pids, err := kubeletPidsLimit(filepath.Join(kubeDir, "config", "kubelet.yaml"))
	if err != nil {
		return err
	}
	keng, err := kube.New(kube.Config{Kubeconfig: b.o.kubeconfig, NoNetworkClass: b.o.kubeNoNetClass, PodPidsLimit: pids, StopGrace: time.Second,
		Logger: quietLogger()})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	kinfo, err := keng.Info(cctx)
	cancel()
	if err != nil {
		return fmt.Errorf("-kubeconfig %s: the cluster does not answer: %w", b.o.kubeconfig, err)
	}
	b.report.machine.engines = append(b.report.machine.engines, fmt.Sprintf("kubernetes %s (one real node: kubelet, containerd, runc) at %s", kinfo.Version, b.o.kubeconfig))
	res := &kubeResult{version: kinfo.Version, pidsLimit: pids, warm: b.o.warm, turns: b.o.turns}
	for _, p := range kubeProcs {
		res.procs = append(res.procs, kubeProc{name: p[0], pidfile: p[1]})
	}
	if res.nodes, res.pods, err = clusterSize(ctx, b.o.kubeconfig); err != nil {
		return err
	}
	readKubeMemory(kubeDir, res.procs, false)

	if err := b.importIntoCluster(ctx, keng); err != nil {
		return err
	}
	folder, err := groupfolder.Parse(latencyFolder)
	if err != nil {
		return err
	}
	type side struct {
		name string
		eng  engine.Engine
		info engine.Info
		pids int64
	}
	sides := []side{{"kubernetes", keng, kinfo, pids}, {"podman 4", b.podman, b.pInfo, 0}}
	wctx, stopWatch := context.WithCancel(ctx)
	var watches []chan struct{}
	defer func() {
		stopWatch()
		for _, w := range watches {
			<-w
		}
	}()
	for _, s := range sides {
		for _, prepared := range []bool{false, true} {
			m, err := b.kubeRunner(s.name, s.eng, s.info, folder, prepared)
			if err != nil {
				return err
			}
			m.turn.Limits.PidsLimit = s.pids
			defer b.closeRunner(m)
			res.methods = append(res.methods, m)
			if prepared {
				w := make(chan struct{})
				watches = append(watches, w)
				go func() { defer close(w); m.run.WatchImages(wctx) }()
			}
		}
	}
	for _, m := range res.methods {
		if err := m.prepare(ctx); err != nil {
			return err
		}
	}
	b.say("kube: %d methods x (%d warm + %d measured) no-op turns through runner.Run, interleaved", len(res.methods), b.o.warm, b.o.turns)
	for round := -b.o.warm; round < b.o.turns; round++ {
		for k := range res.methods {
			m := res.methods[(k+max(round, 0))%len(res.methods)]
			d, took, err := m.once(ctx, round)
			if err != nil {
				return fmt.Errorf("kube, %s: %w", m.name, err)
			}
			if round >= 0 {
				m.sample = append(m.sample, d)
				if took {
					m.took++
				}
			}
		}
		if round >= 0 && (round+1)%10 == 0 {
			b.say("kube: %d/%d rounds", round+1, b.o.turns)
		}
	}
	readKubeMemory(kubeDir, res.procs, true)
	b.report.kube = res
	return nil
}

// kubeRunner is a runner of its own on eng, with its own data directory and instance.
func (b *bench) kubeRunner(side string, eng engine.Engine, info engine.Info, folder groupfolder.Folder, prepared bool) (*kubeMethod, error) {
	name, n := side+", nothing prepared", 0
	if prepared {
		name, n = side+", prepared", 1
	}
	dir := filepath.Join(b.o.work, "runner-"+strings.ReplaceAll(strings.ReplaceAll(name, ",", ""), " ", "-"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	layout, err := groupfolder.NewLayout(dir)
	if err != nil {
		return nil, err
	}
	r, err := runner.New(runner.Config{Engine: eng, Info: info, Layout: layout, Image: b.o.image,
		Instance: fmt.Sprintf("%s-%s-%d", b.instance, strings.ReplaceAll(side, " ", ""), n), SkillsDir: b.o.skillsDir,
		StopGrace: time.Second, Timeout: time.Minute, Prepared: n, Logger: quietLogger()})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &kubeMethod{name: name, engine: side, prepared: prepared, run: r, folder: folder,
		turn: runner.Turn{Folder: folder}}, nil
}

// closeRunner removes what the runner leaves: its prepared container, and anything of its
// instance a failed turn left behind.
func (b *bench) closeRunner(m *kubeMethod) {
	m.run.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if left, err := m.run.RemoveLeftovers(ctx, nil); err != nil || len(left) > 0 {
		b.say("kube, %s: removed %d leftovers (%v)", m.name, len(left), err)
	}
}

// prepare makes the method's next container ahead, once the runner follows the image
// events (until then it prepares nothing); nothing for a method that does not prepare.
func (m *kubeMethod) prepare(ctx context.Context) error {
	if !m.prepared {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if err := m.run.Prepare(ctx, m.turn); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		if m.run.Prepared()[m.folder] != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: no container prepared for %s within 2 minutes", m.name, m.folder)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// once runs one no-op turn, timed from Run's call to its result, and says whether it ran
// in the container prepared for it; a prepared method then prepares the next one.
func (m *kubeMethod) once(ctx context.Context, round int) (time.Duration, bool, error) {
	t := m.turn
	t.RunID = fmt.Sprintf("bench-%s-%d", strings.ReplaceAll(strings.ReplaceAll(m.name, ",", ""), " ", "-"), round)
	t.Input = contract.Input{Messages: []contract.Message{{Role: "user", Content: "noop"}}}
	want := m.run.Prepared()[m.folder]
	tctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := m.run.Run(tctx, t)
	d := time.Since(start)
	if err != nil {
		return 0, false, err
	}
	if res.Output.Status != contract.StatusOK {
		return 0, false, fmt.Errorf("turn %s: %s (%s)", t.RunID, res.Output.Status, res.Output.Error)
	}
	return d, want != "" && res.Container == want, m.prepare(ctx)
}

// clusterSize counts the cluster's nodes (the real one and kwok's) and Pods.
func clusterSize(ctx context.Context, kubeconfig string) (nodes, pods int, err error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return 0, 0, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nl, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("the cluster's nodes: %w", err)
	}
	pl, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("the cluster's pods: %w", err)
	}
	return len(nl.Items), len(pl.Items), nil
}

// importIntoCluster copies the bench's image from Podman 4, where importImages made it,
// into the real node's containerd (no registry: the Pods never pull), and waits until the
// node lists it: the runner takes an image the nodes do not list for a missing one.
func (b *bench) importIntoCluster(ctx context.Context, keng *kube.Engine) error {
	archive := filepath.Join(b.o.work, "image.tar")
	defer os.Remove(archive)
	if out, err := exec.CommandContext(ctx, "podman", "--url", b.o.podmanSocket, "save", "--format", "oci-archive", "-o", archive, b.o.image).CombinedOutput(); err != nil {
		return fmt.Errorf("podman save %s: %w\n%s", b.o.image, err, out)
	}
	if out, err := exec.CommandContext(ctx, "ctr", "--address", strings.TrimPrefix(b.o.kubeContainerd, "unix://"), "-n", "k8s.io",
		"images", "import", "--base-name", b.o.image, archive).CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s into %s: %w\n%s", b.o.image, b.o.kubeContainerd, err, out)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok, err := keng.ImageExists(ctx, b.o.image)
		if err == nil && ok {
			b.say("imported %s into the cluster's node", b.o.image)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster's nodes do not list %s 2 minutes after its import (%v)", b.o.image, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// kubeletPidsLimit is podPidsLimit of the kubelet's configuration file: every Pod's pids
// limit, which the turns on the cluster must ask for (a lower one is refused).
func kubeletPidsLimit(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("the kubelet's configuration: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "podPidsLimit:"); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n > 0 {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("%s sets no podPidsLimit", file)
}

// readKubeMemory reads VmRSS and RssAnon of each process, idle or after the turns. A
// process is found by the test host's pid file, whose second line is a token of its
// command line (hack/testhost/lib.sh): a pid reused by another process is not read.
func readKubeMemory(kubeDir string, procs []kubeProc, after bool) {
	for i := range procs {
		p := &procs[i]
		pid, err := servicePid(filepath.Join(kubeDir, "pids", "kube-"+p.pidfile+".pid"))
		var rss, anon int64
		if err == nil {
			p.pid = pid
			rss, err = procStatusKB(pid, "VmRSS")
			if err == nil {
				anon, err = procStatusKB(pid, "RssAnon")
			}
		}
		if err != nil {
			p.err = err.Error()
			continue
		}
		if after {
			p.afterRSS, p.afterAnon = rss, anon
		} else {
			p.idleRSS, p.idleAnon = rss, anon
		}
	}
}

// servicePid is the pid of a test host's pid file when that process is alive and its
// command line holds the file's token.
func servicePid(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	pidLine, token, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(pidLine))
	if err != nil {
		return 0, fmt.Errorf("%s: no pid: %q", file, pidLine)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, fmt.Errorf("%s: pid %d is not alive", file, pid)
	}
	if token = strings.TrimSpace(token); !strings.Contains(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})), token) {
		return 0, fmt.Errorf("%s: pid %d is another process", file, pid)
	}
	return pid, nil
}

// quietLogger logs only warnings and errors of the runners and of client-go: progress
// lines are the bench's own.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// kubeSection renders the cluster's turns next to Podman 4's and its processes' memory.
func (r *report) kubeSection(p printer) {
	k := r.kube
	p("## Kubernetes: turn latency and the control plane's memory")
	p("")
	p("A no-op turn through runner.Run in the bench's own process (no daemon, no API: the runner and the engine")
	p("alone), timed from Run's call to its result, on the test host's single-node cluster (Kubernetes %s,", k.version)
	p("runtime/kube: one bare Pod per turn, the contract over attach, network none by RuntimeClass, pids limit")
	p("the kubelet's podPidsLimit of %d) and on Podman 4 (runtime/podman), with the same image and folder.", k.pidsLimit)
	p("\"Prepared\" is a runner with `prepared = 1` that prepares the folder's next container right after each")
	p("turn, while the other methods run, as the daemon does; \"nothing prepared\" creates the container in the turn.")
	p("The four take turns, one each per round, %d warm-up rounds then %d measured.", k.warm, k.turns)
	p("")
	var base = map[bool]time.Duration{}
	for _, m := range k.methods {
		if m.engine == "podman 4" {
			base[m.prepared] = m.sample.p50()
		}
	}
	p("| method | p50 ms | p90 ms | max ms | p50 / podman 4 alike | turns in a prepared container |")
	p("|---|---:|---:|---:|---:|---:|")
	for _, m := range k.methods {
		took := "-"
		if m.prepared {
			took = fmt.Sprintf("%d of %d", m.took, len(m.sample))
		}
		p("| %s | %s | %s | %s | %s | %s |", m.name, ms(m.sample.p50()), ms(m.sample.pct(90)), ms(m.sample.pct(100)),
			ratio(m.sample.p50(), base[m.prepared]), took)
	}
	p("")
	p("Resident memory of the cluster's processes (VmRSS and RssAnon, MiB; found by the test host's pid files),")
	p("idle before the turns and after them, with %d nodes (one real, the others kwok's fake ones for placement", k.nodes)
	p("at scale) and %d Pods in the cluster. containerd's shims (one per Pod) are not counted; kwok is not needed", k.pods)
	p("by a real cluster.")
	p("")
	p("| process | pid | idle VmRSS | idle RssAnon | after VmRSS | after RssAnon |")
	p("|---|---:|---:|---:|---:|---:|")
	var sum [4]int64
	for _, pr := range k.procs {
		if pr.err != "" {
			p("| %s | - | %s | | | |", pr.name, pr.err)
			continue
		}
		p("| %s | %d | %s | %s | %s | %s |", pr.name, pr.pid, mib(pr.idleRSS), mib(pr.idleAnon), mib(pr.afterRSS), mib(pr.afterAnon))
		for i, v := range []int64{pr.idleRSS, pr.idleAnon, pr.afterRSS, pr.afterAnon} {
			sum[i] += v
		}
	}
	p("| total | | %s | %s | %s | %s |", mib(sum[0]), mib(sum[1]), mib(sum[2]), mib(sum[3]))
	p("")
}

// mib formats KiB as MiB with one decimal.
func mib(kb int64) string { return fmt.Sprintf("%.1f", float64(kb)/1024) }
