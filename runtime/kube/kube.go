package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/arizuko/arizukod/runtime/engine"
)

// Defaults of Config.
const (
	DefaultNamespace      = "arizuko"
	DefaultNoNetworkClass = "arizuko-nonet"
)

// Config is where the engine finds its cluster and what its Pods get.
type Config struct {
	// Kubeconfig is a kubeconfig file; "" is the in-cluster configuration (the Pod's
	// service account).
	Kubeconfig string
	// Namespace holds every Pod of the engine.
	Namespace string
	// NoNetworkClass is the RuntimeClass of network none: Pods with loopback and no route
	// out. A Pod of network none is refused while the class is missing.
	NoNetworkClass string
	// NodeIPCDir is where the node agent serves the turns' sockets on every node: a mount
	// of contract.IPCDir becomes <NodeIPCDir>/<base name of its source>. "" mounts the
	// source itself: one node, the daemon's own.
	NodeIPCDir string
	// PodPidsLimit is the kubelets' podPidsLimit, what every Pod gets on the nodes; 0 says
	// it is not known, and pids limits cannot be promised.
	PodPidsLimit int64
	// NodeSelector is every Pod's nodeSelector, and Tolerations the taints every Pod
	// tolerates, each "key[=value][:effect]" (ParseToleration): dedicated turn nodes.
	NodeSelector map[string]string
	Tolerations  []string
	// StopGrace is the Pods' terminationGracePeriodSeconds.
	StopGrace time.Duration
	// Logger takes what client-go logs, at debug level; nil is slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 10 * time.Second
	}
	return c
}

// Engine is an engine.Engine over a Kubernetes cluster.
type Engine struct {
	cfg    Config
	rest   *rest.Config // nil for a client without a server (tests): no attach
	client kubernetes.Interface
	where  string

	mu       sync.Mutex
	attached map[string]*streamEnd  // by Pod name: the end of its attach stream
	running  map[string]*corev1.Pod // by Pod name: seen running, blocked on stdin (Init)
	classOK  time.Time              // when the RuntimeClass was last seen
}

// streamEnd is what an attach stream left: closed done once it ended, complete when it
// ended whole after the contract's end marker.
type streamEnd struct {
	done     chan struct{}
	complete bool
	at       time.Time
}

// New returns the engine of cfg without contacting the cluster. client-go's own log goes to
// cfg.Logger at debug level, for the whole process.
func New(cfg Config) (*Engine, error) {
	quietClientGo(cmp.Or(cfg.Logger, slog.Default()))
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig == "" {
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes: in-cluster configuration (kubeconfig = \"\" in [kubernetes]): %w", err)
		}
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubernetes: kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
	}
	rc.UserAgent = "arizukod"
	// The runner's calls come in bursts (create, attach, start, inspect, remove per turn):
	// client-go's default of 5 per second would queue them.
	rc.QPS, rc.Burst = 200, 400
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes at %s: %w", rc.Host, err)
	}
	e := NewForClient(cfg, client)
	e.rest, e.where = rc, rc.Host
	return e, nil
}

// NewForClient returns the engine of cfg over client: for tests with a fake clientset,
// where nothing can attach.
func NewForClient(cfg Config, client kubernetes.Interface) *Engine {
	return &Engine{cfg: cfg.withDefaults(), client: client, where: "a client", attached: map[string]*streamEnd{}, running: map[string]*corev1.Pod{}}
}

// Config is the engine's configuration, defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

func (e *Engine) pods() podClient { return e.client.CoreV1().Pods(e.cfg.Namespace) }

type podClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
	GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request
}

// Ping asks the API server's /readyz.
func (e *Engine) Ping(ctx context.Context) error {
	rc := e.client.Discovery().RESTClient()
	if rc == nil {
		_, err := e.client.Discovery().ServerVersion()
		return err
	}
	if err := rc.Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
		return fmt.Errorf("kubernetes at %s: %w", e.where, err)
	}
	return nil
}

// Info says which cluster this is: its version, the bridge network (the Pod network), and
// why limits cannot be promised when the nodes' pids limit is not known.
func (e *Engine) Info(ctx context.Context) (engine.Info, error) {
	v, err := e.client.Discovery().ServerVersion()
	if err != nil {
		return engine.Info{}, fmt.Errorf("kubernetes at %s: %w", e.where, err)
	}
	info := engine.Info{Name: "kubernetes", Version: strings.TrimPrefix(v.GitVersion, "v"), APIVersion: "v1", Socket: e.where,
		Networks: []string{engine.NetworkBridge}}
	if e.cfg.PodPidsLimit <= 0 {
		info.NoLimits = "the kubelet's podPidsLimit is one pids limit per node for every Pod, and [kubernetes] pod_pids_limit does not say what it is: set podPidsLimit in the kubelets' configuration and the same number as pod_pids_limit"
	}
	return info, nil
}

// ImageExists says whether a node of the cluster lists ref among its images.
func (e *Engine) ImageExists(ctx context.Context, ref string) (bool, error) {
	id, err := e.ImageID(ctx, ref)
	if errors.Is(err, engine.ErrNoSuchImage) {
		return false, nil
	}
	return id != "", err
}

// ImageID is the digest the nodes list for ref (status.images), "" and ErrNoSuchImage
// when no node lists it. Nodes that list it with different digests are named as one id
// of them all, so that a node importing another image changes it.
func (e *Engine) ImageID(ctx context.Context, ref string) (string, error) {
	nodes, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return "", fmt.Errorf("kubernetes: list nodes for image %s: %w", ref, err)
	}
	want := normalizeRef(ref)
	var ids []string
	for _, n := range nodes.Items {
		for _, img := range n.Status.Images {
			if !containsRef(img.Names, want) {
				continue
			}
			id := ""
			for _, name := range img.Names {
				if _, d, ok := strings.Cut(name, "@"); ok {
					id = d
					break
				}
			}
			if id == "" {
				id = strings.Join(img.Names, ",")
			}
			if !contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return "", fmt.Errorf("%w: %s on no node of the cluster", engine.ErrNoSuchImage, ref)
	}
	sort.Strings(ids)
	return strings.Join(ids, "+"), nil
}

func containsRef(names []string, want string) bool {
	for _, n := range names {
		if normalizeRef(n) == want {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// normalizeRef is ref as a node names it: with a registry (docker.io when it has none)
// and a tag (latest when it has neither tag nor digest).
func normalizeRef(ref string) string {
	first, _, hasSlash := strings.Cut(ref, "/")
	if !hasSlash || !strings.ContainsAny(first, ".:") && first != "localhost" {
		if !hasSlash {
			ref = "library/" + ref
		}
		ref = "docker.io/" + ref
	}
	if !strings.Contains(ref, "@") && !strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") {
		ref += ":latest"
	}
	return ref
}

// ErrImport says images are not imported over the Kubernetes API.
var ErrImport = errors.New("kubernetes has no API to import an image: import it on every node, e.g. `podman save --format oci-archive -o agent.tar IMAGE` and `ctr -n k8s.io images import --base-name IMAGE agent.tar` (Pods never pull)")

// ImportImage is refused: Kubernetes has no API for it (ErrImport).
func (e *Engine) ImportImage(context.Context, string, io.Reader, []string) error {
	return fmt.Errorf("%w: %w", errors.ErrUnsupported, ErrImport)
}

// Create creates the Pod of s. Its container starts at once, as every Pod's does, and
// blocks on stdin: nothing of a turn happens before the runner attaches.
func (e *Engine) Create(ctx context.Context, s engine.Spec) (string, error) {
	pod, err := e.PodFor(s)
	if err != nil {
		return "", err
	}
	if pod.Spec.RuntimeClassName != nil {
		if err := e.checkClass(ctx, *pod.Spec.RuntimeClassName); err != nil {
			return "", err
		}
	}
	made, err := e.pods().Create(ctx, pod, metav1.CreateOptions{FieldManager: "arizukod"})
	if err != nil {
		switch {
		case apierrors.IsAlreadyExists(err):
			return "", fmt.Errorf("%w: %v", engine.ErrNameInUse, err)
		case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err), apierrors.IsNotFound(err):
			return "", fmt.Errorf("%w: %v", engine.ErrCreate, err)
		}
		return "", fmt.Errorf("kubernetes: create pod %s: %w", pod.Name, err)
	}
	return made.Name, nil
}

// checkClass refuses a Pod of network none while its RuntimeClass is missing: it would
// run on the Pod network. A class seen within the last minute is not asked for again.
func (e *Engine) checkClass(ctx context.Context, class string) error {
	e.mu.Lock()
	fresh := time.Since(e.classOK) < time.Minute
	e.mu.Unlock()
	if fresh {
		return nil
	}
	_, err := e.client.NodeV1().RuntimeClasses().Get(ctx, class, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: network none is RuntimeClass %q ([kubernetes] no_network_class), which the cluster does not have: a Pod without it would reach the network, so none is made (contrib/kubernetes has the class and its containerd handler)", engine.ErrCreate, class)
	case err != nil:
		return fmt.Errorf("kubernetes: RuntimeClass %s of network none: %w", class, err)
	}
	e.mu.Lock()
	e.classOK = time.Now()
	e.mu.Unlock()
	return nil
}

// Start waits until the Pod's container runs (blocked on stdin), then marks the Pod
// started and gives it its deadline: the turn's timeout from now, with the grace and a
// little slack, as activeDeadlineSeconds counts from the Pod's start. A container that
// cannot run (an image the node does not have) is engine.ErrCreate; one that does not run
// within startTimeout (no node for it, a mount the node cannot make) is an error saying
// what the Pod waits for.
func (e *Engine) Start(ctx context.Context, id string) error {
	wctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	pod, err := e.waitRunning(wctx, id)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return fmt.Errorf("kubernetes: pod %s does not run after %s: %s", id, startTimeout, e.waitingFor(ctx, id))
	}
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}`, StartedAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
	if d, ok := deadline(pod, time.Now(), e.cfg.StopGrace); ok {
		patch += fmt.Sprintf(`,"spec":{"activeDeadlineSeconds":%d}`, d)
	}
	_, err = e.pods().Patch(ctx, id, types.StrategicMergePatchType, []byte(patch+"}"), metav1.PatchOptions{FieldManager: "arizukod"})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: pod %s", engine.ErrNoSuchContainer, id)
	}
	return err
}

// startTimeout bounds how long Start waits for a Pod's container to run (a variable for
// the tests).
var startTimeout = 2 * time.Minute

// waitingFor says what keeps Pod id from running: its container's waiting reason, or the
// scheduler's.
func (e *Engine) waitingFor(ctx context.Context, id string) string {
	p, err := e.pods().Get(context.WithoutCancel(ctx), id, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if c := container(p); c != nil && c.State.Waiting != nil {
		return strings.TrimSpace(c.State.Waiting.Reason + ": " + c.State.Waiting.Message)
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			return fmt.Sprintf("%s %s: %s", c.Type, c.Reason, c.Message)
		}
	}
	return "phase " + string(p.Status.Phase)
}

// deadline is the activeDeadlineSeconds of pod started at now: counted from the Pod's
// start, its timeout plus grace plus slack from now.
func deadline(pod *corev1.Pod, now time.Time, grace time.Duration) (int64, bool) {
	timeout, err := time.ParseDuration(pod.Annotations[TimeoutAnnotation])
	if err != nil || timeout <= 0 {
		return 0, false
	}
	since := time.Duration(0)
	if pod.Status.StartTime != nil {
		since = max(0, now.Sub(pod.Status.StartTime.Time))
	}
	return int64((since + timeout + grace + deadlineSlack + time.Second - 1) / time.Second), true
}

// Init waits until a Pod made ahead runs, blocked on stdin: engine.Preparer. Its turn's
// Attach and Start then ask the cluster nothing more before they act.
func (e *Engine) Init(ctx context.Context, id string) error {
	pod, err := e.waitRunning(ctx, id)
	if err == nil && container(pod) != nil && container(pod).State.Running != nil {
		e.mu.Lock()
		e.running[id] = pod
		e.mu.Unlock()
	}
	return err
}

// waitRunning returns the Pod once its container runs or has ended; a container that
// cannot run is engine.ErrCreate. A Pod Init saw running is taken as it was then: if it
// ended since, the attach and the status say so.
func (e *Engine) waitRunning(ctx context.Context, id string) (*corev1.Pod, error) {
	e.mu.Lock()
	seen := e.running[id]
	e.mu.Unlock()
	if seen != nil {
		return seen, nil
	}
	var out *corev1.Pod
	err := e.watchPod(ctx, id, func(p *corev1.Pod) (bool, error) {
		out = p
		c := container(p)
		switch {
		case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
			return true, nil
		case c == nil:
			return false, nil
		case c.State.Running != nil || c.State.Terminated != nil:
			return true, nil
		case c.State.Waiting != nil && cannotRun(c.State.Waiting.Reason):
			return true, waitingErr(p, c.State.Waiting)
		}
		return false, nil
	})
	return out, err
}

// cannotRun says whether a waiting reason is one that waiting does not fix.
func cannotRun(reason string) bool {
	switch reason {
	case "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "ErrImagePull", "ImagePullBackOff", "ImageInspectError":
		return true
	}
	return false
}

func waitingErr(p *corev1.Pod, w *corev1.ContainerStateWaiting) error {
	err := fmt.Errorf("%w: pod %s: %s: %s", engine.ErrCreate, p.Name, w.Reason, w.Message)
	if w.Reason == "ErrImageNeverPull" || w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" {
		return fmt.Errorf("%w: %s (runs never pull: import it on the node %s): %w", engine.ErrNoSuchImage, p.Spec.Containers[0].Image, p.Spec.NodeName, err)
	}
	return err
}

// watchPod calls done with the Pod as it is now and at every change until done says so
// (or fails), ctx ends, or the Pod is deleted (engine.ErrNoSuchContainer, unless done
// takes the last state it had).
func (e *Engine) watchPod(ctx context.Context, id string, done func(*corev1.Pod) (bool, error)) error {
	for {
		list, err := e.pods().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", id).String()})
		if err != nil {
			return fmt.Errorf("kubernetes: pod %s: %w", id, err)
		}
		var pod *corev1.Pod
		for i := range list.Items {
			if list.Items[i].Name == id {
				pod = &list.Items[i]
			}
		}
		if pod == nil {
			return fmt.Errorf("%w: pod %s", engine.ErrNoSuchContainer, id)
		}
		if ok, err := done(pod); ok || err != nil {
			return err
		}
		w, err := e.pods().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", id).String(), ResourceVersion: list.ResourceVersion})
		if err != nil {
			return fmt.Errorf("kubernetes: watch pod %s: %w", id, err)
		}
		ok, err := e.follow(ctx, w, id, done)
		w.Stop()
		if ok || err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The watch ended (the server closes watches after a while): list again.
	}
}

// follow reads the events of Pod id from w until done says so (true), the watch ends (false) or ctx does.
func (e *Engine) follow(ctx context.Context, w watch.Interface, id string, done func(*corev1.Pod) (bool, error)) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, open := <-w.ResultChan():
			if !open {
				return false, nil
			}
			p, isPod := ev.Object.(*corev1.Pod)
			switch {
			case ev.Type == watch.Error:
				return false, nil
			case !isPod || p.Name != id:
			case ev.Type == watch.Deleted:
				if ok, err := done(deletedPod(p)); ok || err != nil {
					return true, err
				}
				return true, fmt.Errorf("%w: pod %s was deleted", engine.ErrNoSuchContainer, p.Name)
			default:
				if ok, err := done(p); ok || err != nil {
					return true, err
				}
			}
		}
	}
}

// deletedPod is p as its deletion left it: no longer running, whatever its last status.
func deletedPod(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		p.Status.Phase = corev1.PodFailed
		if p.Status.Reason == "" {
			p.Status.Reason = "Deleted"
		}
	}
	return p
}

// Wait blocks until the container is not running and returns its final state: from the
// Pod's status, or at once after an attach stream that ended whole (streamEnd).
func (e *Engine) Wait(ctx context.Context, id string) (engine.State, error) {
	var st engine.State
	end := e.streamEnd(id)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if end != nil {
		go func() {
			select {
			case <-end.done:
				if end.complete {
					cancel()
				}
			case <-wctx.Done():
			}
		}()
	}
	if end == nil {
		// Not attached here: a previous central's Pod, adopted; its agent may wait on a
		// stdin no one attached.
		go e.closeStdin(wctx, id)
	}
	err := e.watchPod(wctx, id, func(p *corev1.Pod) (bool, error) {
		st = e.stateOf(p)
		return ended(p, st), nil
	})
	if err != nil && end != nil && ctx.Err() == nil {
		select {
		case <-end.done:
			if end.complete {
				return completeState(end), nil
			}
		default:
		}
	}
	return st, err
}

// ended says whether a Pod in state st no longer runs and never will.
func ended(p *corev1.Pod, st engine.State) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	if c := container(p); c != nil && c.State.Terminated != nil {
		return true
	}
	if c := container(p); c != nil && c.State.Waiting != nil && cannotRun(c.State.Waiting.Reason) {
		return true
	}
	return false
}

// Inspect reads the Pod's state; a container whose attach stream ended whole after the
// end marker reads as exited with code 0 before the kubelet reports it.
func (e *Engine) Inspect(ctx context.Context, id string) (engine.State, error) {
	p, err := e.pods().Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return engine.State{}, fmt.Errorf("%w: pod %s", engine.ErrNoSuchContainer, id)
	}
	if err != nil {
		return engine.State{}, fmt.Errorf("kubernetes: pod %s: %w", id, err)
	}
	st := e.stateOf(p)
	if st.Running {
		if end := e.streamEnd(id); end != nil {
			select {
			case <-end.done:
				if end.complete {
					s := completeState(end)
					s.StartedAt = st.StartedAt
					return s, nil
				}
			default:
			}
		}
	}
	return st, nil
}

// completeState is the state of a container whose stream ended whole: the agent gave its
// answer and closed its output. The kubelet's exit code comes about 2 s later; the answer
// does not depend on it.
func completeState(end *streamEnd) engine.State {
	return engine.State{Status: "exited", FinishedAt: end.at}
}

// stateOf is the engine's state of p. A running container of a Pod never started
// (StartedAnnotation) is "initialized": created, blocked on stdin, no turn in it.
func (e *Engine) stateOf(p *corev1.Pod) engine.State {
	st := engine.State{Status: "created"}
	c := container(p)
	if c != nil {
		switch s := c.State; {
		case s.Terminated != nil:
			t := s.Terminated
			st = engine.State{Status: "exited", ExitCode: int(t.ExitCode), OOMKilled: t.Reason == "OOMKilled",
				StartedAt: t.StartedAt.Time, FinishedAt: t.FinishedAt.Time}
			if t.Reason != "Completed" && t.Reason != "OOMKilled" && t.Reason != "Error" {
				st.Error = strings.TrimSpace(t.Reason + " " + t.Message)
			}
		case s.Running != nil:
			st = engine.State{Running: true, Status: "running", StartedAt: s.Running.StartedAt.Time}
			if p.Annotations[StartedAnnotation] == "" {
				// Its process runs, blocked on stdin, but the runner never started it.
				st = engine.State{Status: "initialized"}
			}
		case s.Waiting != nil:
			st.Error = strings.TrimSpace(s.Waiting.Reason + " " + s.Waiting.Message)
			if cannotRun(s.Waiting.Reason) {
				// The engine could not run it: the runner's "the engine failed to run it".
				st.ExitCode = 125
			}
		}
	}
	if p.Status.Phase == corev1.PodFailed && p.Status.Reason == "DeadlineExceeded" {
		st.Running, st.DeadlineExceeded = false, true
		st.Status = "deadline-exceeded"
		if c == nil || c.State.Terminated == nil {
			st.ExitCode = 137
		}
	} else if (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded) && st.Running {
		st.Running, st.Status = false, "exited"
	}
	if p.Status.Reason == "Deleted" && (c == nil || c.State.Terminated == nil) {
		st.Running, st.Status, st.ExitCode = false, "deleted", 137
	}
	return st
}

func container(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == ContainerName {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// ErrSignal says Kubernetes has no API to send a container a signal.
var ErrSignal = errors.New("kubernetes has no API to send a container a signal")

// Signal sends SIGTERM as a deletion with the Pod's grace, SIGKILL as one with none. Every
// other signal is errors.ErrUnsupported: the runner's steering (SIGUSR1) is refused, and
// the messages it wrote are taken back.
func (e *Engine) Signal(ctx context.Context, id, signal string) error {
	switch strings.TrimPrefix(strings.ToUpper(signal), "SIG") {
	case "TERM":
		return e.Stop(ctx, id, e.cfg.StopGrace)
	case "KILL":
		return e.Stop(ctx, id, 0)
	}
	return fmt.Errorf("%w: %w (%s to pod %s)", errors.ErrUnsupported, ErrSignal, signal, id)
}

// Stop deletes the Pod with grace: the kubelet sends SIGTERM, then SIGKILL after grace.
// Wait returns once it is gone.
func (e *Engine) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := int64(grace / time.Second)
	err := e.pods().Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &secs})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: stop pod %s: %w", id, err)
	}
	return nil
}

// Remove deletes the Pod at once; one already gone is not an error.
func (e *Engine) Remove(ctx context.Context, id string) error {
	e.mu.Lock()
	delete(e.attached, id)
	delete(e.running, id)
	e.mu.Unlock()
	zero := int64(0)
	err := e.pods().Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: remove pod %s: %w", id, err)
	}
	return nil
}

// List returns the engine's Pods that carry every one of want exactly: selected by the
// selector-safe labels, confirmed by the exact ones (LabelsAnnotation).
func (e *Engine) List(ctx context.Context, want map[string]string) ([]engine.Container, error) {
	sel := labels.Set{ManagedLabel: ManagedValue}
	for k, v := range want {
		if k != ManagedLabel && isLabelKey(k) {
			sel[k] = SafeLabelValue(v)
		}
	}
	list, err := e.pods().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list pods: %w", err)
	}
	out := []engine.Container{}
	for i := range list.Items {
		p := &list.Items[i]
		if !matches(p, want) {
			continue
		}
		st := e.stateOf(p)
		out = append(out, engine.Container{ID: p.Name, Name: specName(p), Labels: specLabels(p), Running: st.Running, State: st.Status, Created: p.CreationTimestamp.Time})
	}
	return out, nil
}

// Logs copies what the container printed, as the kubelet keeps it: stdout and stderr
// interleaved, all to stdout (Kubernetes splits them only behind a feature gate).
func (e *Engine) Logs(ctx context.Context, id string, stdout, _ io.Writer) error {
	rc, err := e.pods().GetLogs(id, &corev1.PodLogOptions{Container: ContainerName}).Stream(ctx)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: pod %s", engine.ErrNoSuchContainer, id)
	}
	if err != nil {
		return fmt.Errorf("kubernetes: logs of pod %s: %w", id, err)
	}
	defer rc.Close()
	_, err = io.Copy(stdout, rc)
	return err
}

// WatchImages has no image events to follow on a cluster: it calls ready, then changed
// ("" names no reference, so the runner looks at its image again) every imagePoll, until
// ctx ends. A Pod prepared within imagePoll of an import may run the image before it.
func (e *Engine) WatchImages(ctx context.Context, ready func(), changed func(ref string)) error {
	ready()
	t := time.NewTicker(imagePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			changed("")
		}
	}
}

// imagePoll is how often WatchImages has the runner look at its image: about the kubelet's
// node status period, which is how often status.images can change.
const imagePoll = 10 * time.Second

func (e *Engine) streamEnd(id string) *streamEnd {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.attached[id]
}

// isLabelKey says whether k can be a label's key.
func isLabelKey(k string) bool { return len(validation.IsQualifiedName(k)) == 0 }

var (
	_ engine.Engine   = (*Engine)(nil)
	_ engine.Preparer = (*Engine)(nil)
)
