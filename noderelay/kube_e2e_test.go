package noderelay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/agentdir"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
)

// TestNodeDaemonSetRelaysATurnPodOnTheCluster applies contrib/kubernetes/ to the test
// host's cluster with the arizukod image built from this tree, runs the node agent as the
// DaemonSet, and has a turn Pod with network none (the RuntimeClass) ask the model through
// its model.sock: the node serves it, relays it to this test's relay listener (the
// central), whose model gateway adds the key. The key is nowhere in the Pod.
func TestNodeDaemonSetRelaysATurnPodOnTheCluster(t *testing.T) {
	k := enginetest.KubeCluster(t)
	e := enginetest.Rootful(t)[0]
	eng, _ := e.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	image := k.ArizukodImage(t, e, eng)
	agentImage := enginetest.EnsureAgentImage(t, e, eng)
	k.ImportImage(t, e, agentImage)

	cs, err := Client(k.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// The central: a relay listener on the node's address, over a data directory whose
	// IPC directory of the slug has a model gateway with the real key.
	fake := fakemodel.Start()
	defer fake.Close()
	up, _ := url.Parse(fake.URL)
	layout, err := groupfolder.NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := OpenCA(layout, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	conf, err := ServerTLS(ca)
	if err != nil {
		t.Fatal(err)
	}
	slug := fmt.Sprintf("relay%d", time.Now().UnixNano()%1_000_000)
	ipc := filepath.Join(layout.DataDir, "ipc", slug)
	for _, sub := range []string{contract.InputDir, contract.SidecarDir} {
		if err := os.MkdirAll(filepath.Join(ipc, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	token := "arz-the-pods-token-0123456789abcdef"
	m, err := gateway.StartModel(gateway.ModelConfig{SocketPath: filepath.Join(ipc, contract.ModelSocket), Token: token,
		Upstream: up, Credential: gateway.Credential{Value: modelKey, Source: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	ln, err := net.Listen("tcp", net.JoinHostPort(k.NodeIP(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	log := &logBuf{}
	srv := &Server{IPCRoot: filepath.Join(layout.DataDir, "ipc"), TLS: conf, Pods: NewKubePods(ctx, cs, DefaultNamespace),
		Log: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(sctx, ln)
	}()
	defer func() {
		stop()
		<-served
		if t.Failed() {
			t.Logf("central's log:\n%s", log.String())
		}
	}()

	// The manifests, as an operator applies them: the node's IPC directory is one of
	// this test's, the image is never pulled.
	nodeIPC := t.TempDir()
	repl := []string{"ARIZUKO_IMAGE", image, "ARIZUKO_CENTRAL", ln.Addr().String(),
		"/var/lib/arizuko/node-ipc", nodeIPC, "imagePullPolicy: IfNotPresent", "imagePullPolicy: Never"}
	nc, err := IssueNode(ca, k.Node)
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := json.Marshal(Secret(nc, DefaultNamespace, "arizuko-node-relay"))
	objects := [][]byte{enginetest.Manifest(t, "namespace.yaml"), enginetest.Manifest(t, "rbac.yaml"), enginetest.Manifest(t, "networkpolicy.yaml"), secret,
		enginetest.Manifest(t, "node-daemonset.yaml", repl...)}
	for _, o := range objects {
		k.Kubectl(t, o, "apply", "-f", "-")
	}
	t.Cleanup(func() {
		for _, o := range [][]byte{objects[4], objects[3], objects[2]} {
			cmd := exec.Command(filepath.Join(k.Bin, "kubectl"), "--kubeconfig", k.Kubeconfig, "delete", "--ignore-not-found", "--wait=false", "-f", "-")
			cmd.Stdin = bytes.NewReader(o)
			cmd.Run()
		}
	})
	// The RuntimeClass is the cluster's already (hack/kube); the central's manifests are
	// checked by the API server without being made (the cluster has no RWX storage).
	k.Kubectl(t, enginetest.Manifest(t, "runtimeclass.yaml"), "apply", "--dry-run=server", "-f", "-")
	k.Kubectl(t, enginetest.Manifest(t, "central.yaml", repl...), "apply", "--dry-run=server", "-f", "-")
	k.Kubectl(t, nil, "-n", DefaultNamespace, "rollout", "status", "daemonset/arizuko-node", "--timeout=180s")

	// The central asks the API where a slug's Pod is: a Pod on another node (a kwok
	// node, kept running) is no slug this node may reach; a certificate for any node that
	// claims that node gets past the check (and finds no socket: the slug has none here).
	far := "far" + slug
	farPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "relay-e2e-" + far, Namespace: DefaultNamespace,
			Annotations: map[string]string{Annotation: far, "arizuko-pod-finish.stage.kwok.x-k8s.io/delay": "10m"}},
		Spec: corev1.PodSpec{NodeName: "kwok-node-0", Containers: []corev1.Container{{Name: "agent", Image: agentImage}},
			Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
	}
	if _, err := cs.CoreV1().Pods(DefaultNamespace).Create(ctx, farPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer cs.CoreV1().Pods(DefaultNamespace).Delete(context.WithoutCancel(ctx), farPod.Name, metav1.DeleteOptions{})
	localTLS, err := NodeTLS(nc.CA, nc.Cert, nc.Key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := rawDial(t, ln.Addr().String(), localTLS, header{Op: opConnect, Node: k.Node, Slug: far, Socket: contract.ModelSocket})
	if err != nil || a.Error != "no turn Pod of "+far+" on node "+k.Node {
		t.Errorf("the slug of a Pod on kwok-node-0, claimed by %s: %+v, %v", k.Node, a, err)
	}
	anyNC, err := IssueNode(ca, AnyNode)
	if err != nil {
		t.Fatal(err)
	}
	anyTLS, _ := NodeTLS(anyNC.CA, anyNC.Cert, anyNC.Key)
	a, err = rawDial(t, ln.Addr().String(), anyTLS, header{Op: opConnect, Node: "kwok-node-0", Slug: far, Socket: contract.ModelSocket})
	if err != nil || a.Error == "" || strings.Contains(a.Error, "no turn Pod") {
		t.Errorf("the slug of a Pod on kwok-node-0, claimed by kwok-node-0: %+v, %v", a, err)
	}

	// A turn Pod as the engine makes one: network none, hardened, its IPC directory the
	// node's.
	run := func(name, prompt string) contract.Output {
		t.Helper()
		dirType := corev1.HostPathDirectoryOrCreate // as the engine: the kubelet makes it if the node has not yet
		uid, no, yes := int64(1000), false, true
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace, Annotations: map[string]string{Annotation: slug},
				Labels: map[string]string{"app.kubernetes.io/managed-by": "arizukod"}},
			Spec: corev1.PodSpec{
				NodeName: k.Node, RestartPolicy: corev1.RestartPolicyNever, RuntimeClassName: &k.NoNetworkClass,
				AutomountServiceAccountToken: &no, EnableServiceLinks: &no,
				SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes,
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{
					Name: "agent", Image: agentImage, ImagePullPolicy: corev1.PullNever, Stdin: true, StdinOnce: true,
					Env: []corev1.EnvVar{{Name: "ARIZUKO_MODEL_TOKEN", Value: token}},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					VolumeMounts: []corev1.VolumeMount{{Name: "ipc", MountPath: contract.IPCDir}},
				}},
				Volumes: []corev1.Volume{{Name: "ipc", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: filepath.Join(nodeIPC, slug), Type: &dirType}}}},
			},
		}
		created := time.Now()
		if _, err := cs.CoreV1().Pods(DefaultNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer cs.CoreV1().Pods(DefaultNamespace).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
		sockets := filepath.Join(nodeIPC, slug, contract.EgressSocket)
		served := false
		for {
			if fi, err := os.Lstat(sockets); err == nil && fi.Mode()&os.ModeSocket != 0 && !served {
				served = true
				t.Logf("%s: the node served its sockets %s after the Pod was created", name, time.Since(created).Round(time.Millisecond))
			}
			p, err := cs.CoreV1().Pods(DefaultNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Status.Phase == corev1.PodRunning {
				t.Logf("%s: running %s after it was created", name, time.Since(created).Round(time.Millisecond))
				break
			}
			if p.Status.Phase != corev1.PodPending || ctx.Err() != nil {
				t.Fatalf("turn Pod %s: %s %+v", name, p.Status.Phase, p.Status.ContainerStatuses)
			}
			time.Sleep(100 * time.Millisecond)
		}
		line, err := contract.EncodeInput(contract.Input{Messages: []contract.Message{{Role: "user", Content: prompt}}, Folder: slug})
		if err != nil {
			t.Fatal(err)
		}
		out := k.Kubectl(t, line, "-n", DefaultNamespace, "attach", "-i", "-q", name, "-c", "agent")
		var c contract.Capture
		c.Write([]byte(out))
		res, err := c.Result()
		if err != nil {
			t.Fatalf("turn Pod %s: %v\n%s", name, err, out)
		}
		if strings.Contains(out, modelKey) {
			t.Errorf("the key reached the turn Pod %s", name)
		}
		return res
	}

	start := time.Now()
	out := run("relay-e2e-model-"+slug, "model hello through the node")
	if out.Status != contract.StatusOK || !strings.Contains(out.Result, "echo: hello through the node") {
		t.Fatalf("model through the node: %+v", out)
	}
	t.Logf("a turn Pod asked the model through the node's relay in %s (create to answer)", time.Since(start).Round(time.Millisecond))
	if reqs := fake.Requests(); len(reqs) != 1 || reqs[0].Header.Get("X-Api-Key") != modelKey {
		t.Fatalf("the upstream did not get the key from the central: %d requests", len(reqs))
	}
	// The key, looked for from inside a Pod of the slug: its environment and every file it
	// can read (the IPC directory included).
	out = run("relay-e2e-scan-"+slug, "scan "+modelKey[:20])
	if out.Status != contract.StatusOK || strings.Contains(out.Result, "/") || strings.Contains(out.Result, "env:") {
		t.Errorf("the key's prefix inside the Pod: %+v", out)
	}
	// A hostile Pod swaps its sockets, input/ and sidecars/ for links to a directory of the
	// node and back, over and over, while the central's input changes every 50 ms and a
	// sidecar comes: the node writes nothing there, and removes nothing of it.
	victim := filepath.Join(nodeIPC, "victim")
	if err := os.MkdirAll(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	central, err := agentdir.Open(ipc)
	if err != nil {
		t.Fatal(err)
	}
	defer central.Close()
	side, err := central.Dir(contract.SidecarDir)
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	web, err := side.Listen("web.sock", 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	churn := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		for i := 0; ; i++ {
			select {
			case <-churn:
				return
			case <-time.After(50 * time.Millisecond):
			}
			central.Clear(contract.InputDir)
			central.WriteFile(fmt.Sprintf("%s/%d-000.json", contract.InputDir, i), []byte(`{"role":"user","content":"x"}`), 0o644, nil)
		}
	}()
	out = run("relay-e2e-plant-"+slug, "plant race "+victim+" 3s")
	close(churn)
	<-churned
	central.Clear(contract.InputDir)
	if out.Status != contract.StatusOK || !strings.HasPrefix(out.Result, "swapped ") || out.Result == "swapped 0 times" {
		t.Errorf("the Pod did not plant its links: %+v", out)
	}
	t.Logf("the hostile Pod %s", out.Result)
	if entries, err := os.ReadDir(victim); err != nil || len(entries) != 1 || entries[0].Name() != "keep" {
		t.Errorf("the node wrote through a link the Pod planted: %v %v", entries, err)
	}
	if b, _ := os.ReadFile(filepath.Join(victim, "keep")); string(b) != "host" {
		t.Errorf("the host's file changed: %q", b)
	}
	// The Pods gone, the node removes the slug's directory.
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := os.Lstat(filepath.Join(nodeIPC, slug)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the node kept %s after its Pods were gone", filepath.Join(nodeIPC, slug))
		}
		if _, err := cs.CoreV1().Pods(DefaultNamespace).Get(ctx, "relay-e2e-plant-"+slug, metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	if !strings.Contains(log.String(), "relay connection") {
		t.Errorf("the central logged no relayed connection")
	}
}
