package enginetest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
)

// kubeNamespace is the namespace hack/kube/up.sh makes for the tests.
const kubeNamespace = "arizuko"

// kubeView is what the pod prints of its own sandbox after it read its input line.
const kubeView = `b=/busybox
read -r line
echo "got: $line"
$b grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
echo "uid=$($b id -u) gid=$($b id -g)"
$b touch /rootfs-write 2>&1 || true
$b touch /workspace/from-pod && echo wrote-workspace
echo "memory limit=$($b cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || $b cat /sys/fs/cgroup/memory.max)"
$b ip -o addr | $b sed 's/^/addr: /'
$b ip route | $b sed 's/^/route: /'
for a in 203.0.113.1 10.244.0.1; do $b nc -w 2 $a 80 </dev/null 2>&1 | $b sed 's/^/connect: /'; done
echo END
`

// TestKubeHardenedPodOnNoNetwork: the test host's cluster runs a pod hardened as arizukod
// promises (non-root, no capabilities, no_new_privs, seccomp, read-only root, a memory
// limit, a hostPath workspace) on the RuntimeClass of network "none", through the
// scheduler onto the real node; a JSON line goes in over attach and the pod answers with
// what it sees from inside: no capability, its uid, a root it cannot write, its limit,
// loopback plus an interface with no route out.
func TestKubeHardenedPodOnNoNetwork(t *testing.T) {
	k := enginetest.KubeCluster(t)
	cs, cfg := kubeClient(t, k)
	ref := kubeBusybox(t, k)
	ws := t.TempDir()
	if err := os.Chown(ws, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	pod := hardenedPod(ref, k.NoNetworkClass, ws)
	created, err := cs.CoreV1().Pods(kubeNamespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	t.Cleanup(func() { deletePod(t, cs, created.Name) })
	running := waitPod(ctx, t, cs, created.Name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if running.Spec.NodeName != k.Node {
		t.Errorf("the pod ran on node %q, want the real node %q", running.Spec.NodeName, k.Node)
	}

	out := attach(ctx, t, cs, cfg, created.Name, `{"prompt":"hello"}`+"\n")
	t.Logf("the pod's view:\n%s", out)
	for _, want := range []string{
		`got: {"prompt":"hello"}`,
		"CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000",
		"NoNewPrivs:\t1",
		"Seccomp:\t2",
		"uid=1000 gid=1000",
		"touch: /rootfs-write: Read-only file system",
		"wrote-workspace",
		"memory limit=67108864",
		"connect: nc: can't connect to remote host (203.0.113.1): Network is unreachable",
		"connect: nc: can't connect to remote host (10.244.0.1): Network is unreachable",
		"END",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("the pod's view lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^addr: \d+: lo +inet 127\.0\.0\.1/8`).MatchString(out) {
		t.Error("the pod has no loopback address")
	}
	if !regexp.MustCompile(`(?m)^route: \S+ dev eth0 scope link`).MatchString(out) {
		t.Error("the pod has no interface of its own subnet (containerd refuses a sandbox without one)")
	}
	if regexp.MustCompile(`(?m)^route: default`).MatchString(out) {
		t.Error("the pod of network none has a default route")
	}
	st, err := os.Stat(filepath.Join(ws, "from-pod"))
	if err != nil {
		t.Fatalf("the pod's write to its hostPath workspace: %v", err)
	}
	if s := st.Sys().(*syscall.Stat_t); s.Uid != 1000 || s.Gid != 1000 {
		t.Errorf("the pod's file is owned by %d:%d on the host, want 1000:1000", s.Uid, s.Gid)
	}
}

// TestKubeKwokFinishesBarePods: a bare pod that tolerates kwok's taint and selects its
// nodes is scheduled onto a fake node and finished there (Succeeded, exit 0) by the Stage
// hack/kube adds; kwok leaves the real node alone.
func TestKubeKwokFinishesBarePods(t *testing.T) {
	k := enginetest.KubeCluster(t)
	cs, _ := kubeClient(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kwok-turn-"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{"type": "kwok"},
			Tolerations: []corev1.Toleration{{
				Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
			}},
			Containers: []corev1.Container{{Name: "agent", Image: "localhost/not-pulled:1", ImagePullPolicy: corev1.PullNever}},
		},
	}
	created, err := cs.CoreV1().Pods(kubeNamespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	t.Cleanup(func() { deletePod(t, cs, created.Name) })
	done := waitPod(ctx, t, cs, created.Name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if !strings.HasPrefix(done.Spec.NodeName, "kwok-node-") {
		t.Errorf("the pod finished on node %q, want a kwok node", done.Spec.NodeName)
	}
	if st := done.Status.ContainerStatuses; len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 0 {
		t.Errorf("container statuses %+v, want one terminated with exit 0", st)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, k.Node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := node.Status.NodeInfo.KubeletVersion; strings.Contains(v, "kwok") || node.Annotations["kwok.x-k8s.io/node"] != "" {
		t.Errorf("the real node %s is kwok's (kubelet %q, annotations %v)", k.Node, v, node.Annotations)
	}
}

// TestKubeDefaultPodReachesTheAPI: a pod of the default network has a default route and
// reaches the API server where the kubelet says it is (KUBERNETES_SERVICE_HOST and _PORT,
// the ClusterIP that hack/kube relays to the API server in place of kube-proxy): what a
// daemon in the cluster uses with its in-cluster configuration.
func TestKubeDefaultPodReachesTheAPI(t *testing.T) {
	k := enginetest.KubeCluster(t)
	cs, _ := kubeClient(t, k)
	ref := kubeBusybox(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := `b=/busybox
$b ip route | $b sed 's/^/route: /'
$b nc -w 5 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT" -e $b true && echo "api: reached $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"
`
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "default-net-"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "agent", Image: ref, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/busybox", "sh", "-c", script},
			}},
		},
	}
	created, err := cs.CoreV1().Pods(kubeNamespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	t.Cleanup(func() { deletePod(t, cs, created.Name) })
	waitPod(ctx, t, cs, created.Name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	logs, err := cs.CoreV1().Pods(kubeNamespace).GetLogs(created.Name, &corev1.PodLogOptions{Container: "agent"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s: %v", created.Name, err)
	}
	out := string(logs)
	t.Logf("the pod's view:\n%s", out)
	if !regexp.MustCompile(`(?m)^route: default via `).MatchString(out) {
		t.Error("the pod of the default network has no default route")
	}
	if !strings.Contains(out, "api: reached 10.96.0.1:443\n") {
		t.Error("the pod did not reach the API server at 10.96.0.1:443")
	}
}

func kubeClient(t *testing.T, k enginetest.Kube) (*kubernetes.Clientset, *rest.Config) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", k.Kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, cfg
}

// kubeBusybox imports Debian's static busybox into the node as an image of its own,
// through the test host's podman4.
func kubeBusybox(t *testing.T, k enginetest.Kube) string {
	t.Helper()
	const bin = "/bin/busybox"
	b, err := os.ReadFile(bin)
	if err != nil {
		enginetest.Missing(t, "busybox-static: %v", err)
	}
	sum := sha256.Sum256(b)
	ref := "localhost/arizuko-busybox:" + hex.EncodeToString(sum[:6])
	p4 := enginetest.Rootful(t)[0]
	eng, _ := p4.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := engine.ImportStatic(ctx, eng, ref, bin); err != nil {
		t.Fatalf("import busybox into %s: %v", p4.Name, err)
	}
	k.ImportImage(t, p4, ref)
	return ref
}

func hardenedPod(image, runtimeClass, workspace string) *corev1.Pod {
	uid, no, yes := int64(1000), false, true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "hardened-"},
		Spec: corev1.PodSpec{
			RuntimeClassName:             &runtimeClass,
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "agent",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"/busybox", "sh", "-c", kubeView},
				Stdin:           true,
				StdinOnce:       true,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse("64Mi"),
					corev1.ResourceCPU:    resource.MustParse("1"),
				}},
				VolumeMounts: []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}},
			}},
			Volumes: []corev1.Volume{{
				Name: "workspace",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: workspace, Type: new(corev1.HostPathDirectory),
				}},
			}},
		},
	}
}

// waitPod polls the pod until done says so; a pod that ended otherwise fails the test.
func waitPod(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, name string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(kubeNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		if done(p) {
			return true, nil
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, errPodFailed
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s: %v; last status %+v", name, err, last.Status)
	}
	return last
}

var errPodFailed = errors.New("the pod failed")

// attach writes input to the pod's stdin through the API server and returns its output
// until the container exits: WebSocket first, SPDY when the server refuses the upgrade.
func attach(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, cfg *rest.Config, name, input string) string {
	t.Helper()
	req := cs.CoreV1().RESTClient().Post().Namespace(kubeNamespace).Resource("pods").Name(name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: "agent", Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		t.Fatal(err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{
		Stdin: strings.NewReader(input), Stdout: &stdout, Stderr: &stderr,
	}); err != nil {
		t.Fatalf("attach to %s: %v\nstdout: %s\nstderr: %s", name, err, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

func deletePod(t *testing.T, cs *kubernetes.Clientset, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zero := int64(0)
	if err := cs.CoreV1().Pods(kubeNamespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Errorf("delete pod %s: %v", name, err)
	}
}
