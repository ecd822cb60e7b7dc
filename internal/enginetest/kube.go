package enginetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/arizuko/arizukod/runtime/engine"
)

// Kube is the test host's Kubernetes cluster (hack/kube/up.sh, started by
// hack/testhost/up.sh): one real node, localhost (kubelet, containerd, runc, the bridge
// CNI), and fake kwok nodes for placement at scale.
type Kube struct {
	// Kubeconfig is an admin kubeconfig of the cluster.
	Kubeconfig string
	// Containerd is the address of the real node's containerd, where images are imported
	// (no registry: pods use imagePullPolicy Never).
	Containerd string
	// Bin holds the cluster's binaries, kubectl and kwok among them.
	Bin string
	// NoNetworkClass is the RuntimeClass whose pods get loopback and an interface on an
	// isolated bridge with no route out: network "none" on this cluster.
	NoNetworkClass string
	// Node is the real node's name.
	Node string
}

// KubeCluster returns the test host's cluster, or fails (ARIZUKO_REQUIRE_ENGINES=1) or
// skips when its env file names none.
func KubeCluster(t testing.TB) Kube {
	t.Helper()
	k := Kube{
		Kubeconfig:     os.Getenv("ARIZUKO_TEST_KUBECONFIG"),
		Containerd:     os.Getenv("ARIZUKO_TEST_KUBE_CONTAINERD"),
		Bin:            os.Getenv("ARIZUKO_TEST_KUBE_BIN"),
		NoNetworkClass: os.Getenv("ARIZUKO_TEST_KUBE_NONET_CLASS"),
		Node:           os.Getenv("ARIZUKO_TEST_KUBE_NODE"),
	}
	if k.Kubeconfig == "" || k.Containerd == "" || k.Bin == "" || k.NoNetworkClass == "" || k.Node == "" {
		Missing(t, "kubernetes: ARIZUKO_TEST_KUBECONFIG, ARIZUKO_TEST_KUBE_CONTAINERD, ARIZUKO_TEST_KUBE_BIN, ARIZUKO_TEST_KUBE_NONET_CLASS and ARIZUKO_TEST_KUBE_NODE must be set")
	}
	return k
}

// ImportImage copies image ref from engine e (a Podman of the test host) into the real
// node's containerd, under the same name.
func (k Kube) ImportImage(t testing.TB, e Engine, ref string) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "image.tar")
	if out, err := exec.Command("podman", "--url", e.URI, "save", "--format", "oci-archive", "-o", archive, ref).CombinedOutput(); err != nil {
		t.Fatalf("podman save %s from %s: %v\n%s", ref, e.Name, err, out)
	}
	out, err := exec.Command("ctr", "--address", strings.TrimPrefix(k.Containerd, "unix://"), "-n", "k8s.io",
		"images", "import", "--base-name", ref, archive).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images import %s: %v\n%s", ref, err, out)
	}
}

// Client is a clientset of the cluster with the admin kubeconfig.
func (k Kube) Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", k.Kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Kubectl runs the cluster's kubectl (admin) with stdin and returns its output, failing
// the test on an error.
func (k Kube) Kubectl(t testing.TB, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(k.Bin, "kubectl"), append([]string{"--kubeconfig", k.Kubeconfig, "--request-timeout=60s"}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Manifest is contrib/kubernetes/<name> of this checkout with every pair of repl
// (old, new) replaced, as an operator fills in its placeholders.
func Manifest(t testing.TB, name string, repl ...string) []byte {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(moduleRoot(wd), "contrib", "kubernetes", name))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.NewReplacer(repl...).Replace(string(b)))
}

// NodeIP is the real node's InternalIP, where its Pods reach its host.
func (k Kube) NodeIP(t testing.TB) string {
	t.Helper()
	n, err := k.Client(t).CoreV1().Nodes().Get(context.Background(), k.Node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatalf("node %s has no InternalIP: %+v", k.Node, n.Status.Addresses)
	return ""
}

// ArizukodImage builds cmd/arizukod statically, imports it into e (a Podman of the test
// host) as localhost/arizukod:<digest of the binary> and from there into the real node:
// the image of the node DaemonSet, never pulled.
func (k Kube) ArizukodImage(t testing.TB, e Engine, eng engine.Engine) string {
	t.Helper()
	bin, err := StaticBinary("github.com/arizuko/arizukod/cmd/arizukod", "arizukod")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	image := "localhost/arizukod:" + hex.EncodeToString(sum[:6])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := engine.ImportStatic(ctx, eng, image, bin); err != nil {
		t.Fatal(err)
	}
	k.ImportImage(t, e, image)
	return image
}
