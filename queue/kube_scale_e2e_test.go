package queue_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/queue"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/kube"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// The kwok nodes of the test host's cluster (hack/kube): labelled type=kwok, tainted so
// that nothing else lands there.
const (
	kwokSelector   = "type"
	kwokLabel      = "kwok"
	kwokToleration = "kwok.x-k8s.io/node=fake:NoSchedule"
	kwokPodsPids   = 1024 // the real node's podPidsLimit; kwok keeps none, the engine asks for it
)

// kwokEngine is the real Kubernetes engine with only the attach scripted: a kwok node
// runs no container, so nothing can attach to it. Everything else is the engine against
// the real API server and scheduler: Create (the Pod, with the node selector and the
// toleration of the configuration), Start (waits for the status kwok sets, marks the Pod
// started, sets its deadline), Wait and Inspect (the Pod's status as kwok sets it: Running,
// then Succeeded with exit code 0 about a second later, hack/kube/kwok-pod-finish.yaml),
// List, Remove.
type kwokEngine struct {
	*kube.Engine
}

// Attach is the script of the agent in the Pod: it reads the turn's input line from
// stdin, writes the contract's answer ("ran <runId>") to stdout as the agent would, and
// ends the stream when the real engine's Wait sees the Pod ended, as a container's stream
// ends when it exits.
func (k kwokEngine) Attach(ctx context.Context, id string) (*engine.Attachment, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	sctx, cancel := context.WithCancel(ctx)
	go func() {
		line, err := bufio.NewReader(inR).ReadBytes('\n')
		inR.Close()
		var in contract.Input
		if err == nil {
			err = json.Unmarshal(line, &in)
		}
		if err != nil {
			outW.CloseWithError(fmt.Errorf("the scripted agent of %s read no input line: %w", id, err))
			return
		}
		ans, _ := json.Marshal(contract.Output{Status: contract.StatusOK, Result: "ran " + in.RunID})
		fmt.Fprintf(outW, "%s\n%s\n%s\n", contract.StartMarker, ans, contract.EndMarker)
		_, err = k.Wait(sctx, id)
		outW.CloseWithError(err)
	}()
	copyOut := func(stdout, _ io.Writer) error {
		_, err := io.Copy(stdout, outR)
		return err
	}
	return engine.NewAttachment(inW, copyOut, func() error {
		cancel()
		inR.Close()
		outR.Close()
		return nil
	}), nil
}

// podPlaces follows the Pods of one instance: the node each was bound to, and when the
// test saw each step of its life (created, bound, running, ended, deleted).
type podPlaces struct {
	mu      sync.Mutex
	node    map[string]string // Pod name -> node
	steps   map[string]*[5]time.Time
	now     int // Pods that exist
	maxLive int
}

// The steps of a Pod's life, as podPlaces sees them.
const (
	stepCreated = iota
	stepBound
	stepRunning
	stepEnded
	stepDeleted
)

func (p *podPlaces) seen(obj any, deleted bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		if d, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
			pod, ok = d.Obj.(*corev1.Pod)
		}
	}
	if !ok {
		return
	}
	at := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	steps := p.steps[pod.Name]
	if steps == nil {
		steps = &[5]time.Time{stepCreated: at}
		p.steps[pod.Name] = steps
		p.now++
		p.maxLive = max(p.maxLive, p.now)
	}
	mark := func(step int, now bool) {
		if now && steps[step].IsZero() {
			steps[step] = at
		}
	}
	mark(stepBound, pod.Spec.NodeName != "")
	for _, c := range pod.Status.ContainerStatuses {
		mark(stepRunning, c.State.Running != nil || c.State.Terminated != nil)
		mark(stepEnded, c.State.Terminated != nil)
	}
	mark(stepDeleted, deleted)
	if pod.Spec.NodeName != "" {
		p.node[pod.Name] = pod.Spec.NodeName
	}
	if deleted {
		p.now--
	}
}

// phases is the median time between the steps of the Pods that went through all of them.
func (p *podPlaces) phases() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := []string{"created to bound", "bound to running", "running to ended", "ended to deleted"}
	var out []string
	for i, name := range names {
		var d []time.Duration
		for _, s := range p.steps {
			if !s[i].IsZero() && !s[i+1].IsZero() {
				d = append(d, s[i+1].Sub(s[i]))
			}
		}
		if len(d) > 0 {
			slices.Sort(d)
			out = append(out, fmt.Sprintf("%s %s", name, d[len(d)/2].Round(time.Millisecond)))
		}
	}
	return strings.Join(out, ", ")
}

// TestKubeScaleKwok places 1,000 turns over 200 folders through the real queue, store
// (SQLite), runner and Kubernetes engine on the test host's 100 kwok nodes: the API server
// and the scheduler are real, the agent's attach is scripted (kwokEngine). None is lost,
// each answers its own run, no two runs of a folder overlap (the store's start and end),
// every Pod lands on a kwok node and none is left.
func TestKubeScaleKwok(t *testing.T) {
	enginetest.Long(t, "1,000 turns on the kwok nodes")
	const folders, turns, maxRunning = 200, 1000, 100
	k := enginetest.KubeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cluster, err := kube.New(kube.Config{Kubeconfig: k.Kubeconfig, NoNetworkClass: k.NoNetworkClass, PodPidsLimit: kwokPodsPids,
		StopGrace: time.Second, NodeSelector: map[string]string{kwokSelector: kwokLabel}, Tolerations: []string{kwokToleration}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cluster.Info(ctx)
	if err != nil {
		enginetest.Missing(t, "the cluster at %s does not answer: %v", k.Kubeconfig, err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwokSelector + "=" + kwokLabel})
	if err != nil || len(nodes.Items) < 100 {
		enginetest.Missing(t, "the cluster has %d kwok nodes (%v), want 100 (hack/kube/up.sh)", len(nodes.Items), err)
	}

	dir := t.TempDir()
	names := make([]string, folders)
	for i := range names {
		names[i] = fmt.Sprintf("f%03d", i)
	}
	st := openStore(t, dir, names...)
	layout, err := groupfolder.NewLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	instance := fmt.Sprintf("kwok-%d", time.Now().UnixNano()%1e9)
	places := &podPlaces{node: map[string]string{}, steps: map[string]*[5]time.Time{}}
	inf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(cluster.Config().Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = engine.LabelInstance + "=" + instance }))
	podInf := inf.Core().V1().Pods().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { places.seen(o, false) },
		UpdateFunc: func(_, o any) { places.seen(o, false) },
		DeleteFunc: func(o any) { places.seen(o, true) },
	}); err != nil {
		t.Fatal(err)
	}
	stopInf := make(chan struct{})
	defer close(stopInf)
	inf.Start(stopInf)
	inf.WaitForCacheSync(stopInf)

	// A turn's default limits: the memory it may use is the Pod's request, which the
	// scheduler spreads by (with a request far below the nodes' memory, every node scores
	// the same and the Pods pile on the first).
	turnLimits := engine.DefaultLimits()
	turnLimits.PidsLimit = kwokPodsPids
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := kwokEngine{cluster}
	r, err := runner.New(runner.Config{Engine: eng, Info: info, Layout: layout, Image: "localhost/arizuko-kwok:never-run",
		Instance: instance, Timeout: 2 * time.Minute, StopGrace: time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(queue.Config{Store: st, Runner: r, MaxRunning: maxRunning, Logger: log,
		Turns: &turn.Builder{Layout: layout, Store: st, Logger: log, Limits: turnLimits}})
	if err != nil {
		t.Fatal(err)
	}
	qctx, stopQueue := context.WithCancel(ctx)
	queued := make(chan struct{})

	start, cpu0 := time.Now(), cpuTime(t)
	ids := make([]string, 0, turns)
	for i := range turns {
		in, _ := json.Marshal(queue.RunInput{Messages: []contract.Message{{Role: "user", Content: fmt.Sprintf("turn %d", i)}}})
		run, err := st.CreateRun(ctx, store.Run{Folder: names[i%folders], Input: in})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID)
	}
	go func() { defer close(queued); q.Run(qctx) }()
	defer func() { stopQueue(); <-queued; r.Close() }()
	for {
		changed := q.Changed()
		c, err := st.CountRuns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Queued == 0 && c.Running == 0 {
			break
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
		case <-ctx.Done():
			t.Fatalf("after %s: %+v still waiting", time.Since(start).Round(time.Second), c)
		}
	}
	wall, cpu := time.Since(start), cpuTime(t)-cpu0
	stopQueue()
	<-queued
	r.Close()

	byFolder := map[string][]*store.Run{}
	used := map[string]int{}
	retried := 0
	var took []time.Duration
	for _, id := range ids {
		run, err := st.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.State != store.RunExited || run.Result != "ran "+run.ID {
			t.Errorf("run %s of %s: state %s, result %q, failure %s, error %q; want exited with its own answer", run.ID, run.Folder, run.State, run.Result, run.Failure, run.Error)
			continue
		}
		retried += run.Attempt - 1
		took = append(took, time.Duration(run.EndedAt-run.StartedAt)*time.Millisecond)
		byFolder[run.Folder] = append(byFolder[run.Folder], run)
		places.mu.Lock()
		node := places.node[run.Container]
		places.mu.Unlock()
		if !strings.HasPrefix(node, "kwok-node-") {
			t.Errorf("run %s: Pod %s on node %q, want a kwok node", run.ID, run.Container, node)
		}
		used[node]++
	}
	for f, runs := range byFolder {
		slices.SortFunc(runs, func(a, b *store.Run) int { return int(a.StartedAt - b.StartedAt) })
		for i := 1; i < len(runs); i++ {
			if runs[i].StartedAt < runs[i-1].EndedAt {
				t.Errorf("folder %s: run %s started at %d before run %s ended at %d", f, runs[i].ID, runs[i].StartedAt, runs[i-1].ID, runs[i-1].EndedAt)
			}
		}
	}
	left, err := cluster.List(ctx, map[string]string{engine.LabelInstance: instance})
	if err != nil || len(left) != 0 {
		t.Errorf("Pods left of the instance: %v, %v", left, err)
	}
	least, most := turns, 0
	for _, n := range used {
		least, most = min(least, n), max(most, n)
	}
	places.mu.Lock()
	maxLive := places.maxLive
	places.mu.Unlock()
	slices.Sort(took)
	if len(took) == 0 {
		t.Fatal("no run ended")
	}
	t.Logf("%d turns over %d folders (max_running %d) in %s: %.1f turns/s; a run from its start to its end p50 %s, p90 %s, max %s; %d retried; %d kwok nodes got Pods (%d to %d each); at most %d Pods at once",
		turns, folders, maxRunning, wall.Round(time.Millisecond), float64(turns)/wall.Seconds(), took[len(took)/2], took[len(took)*9/10], took[len(took)-1],
		retried, len(used), least, most, maxLive)
	t.Logf("a Pod's life, as watched (p50): %s; this process (queue, store, runner, engine, the scripted attach and the test's watch) used %s of CPU, %s a turn",
		places.phases(), cpu.Round(time.Millisecond), (cpu / turns).Round(time.Microsecond))
}

// cpuTime is the user and system CPU time this process used so far.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
