package enginetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
