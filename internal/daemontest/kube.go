package daemontest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/kube"
)

// Kube makes a daemon's engine the test host's cluster (engine = "kubernetes"): the
// example agent is imported from Config.Engine (a Podman of the test host) into the real
// node, every turn's pids limit is the node's podPidsLimit, and Daemon.Eng is the cluster
// seen with the admin kubeconfig (for the leftovers of the daemon's instance).
type Kube struct {
	Cluster enginetest.Kube
	// Kubeconfig is the daemon's ([kubernetes] kubeconfig); "" is the cluster's admin one.
	Kubeconfig string
	// Namespace of the turn Pods; "" is kube.DefaultNamespace.
	Namespace string
	// NodeIPCDir and RelayListen are [kubernetes] node_ipc_dir and relay_listen.
	NodeIPCDir  string
	RelayListen string
}

// openKube imports image into the cluster and returns the engine Daemon.Eng is.
func openKube(t testing.TB, cfg Config, image string) *kube.Engine {
	t.Helper()
	k := cfg.Kube
	k.Cluster.ImportImage(t, cfg.Engine, image)
	eng, err := kube.New(kube.Config{Kubeconfig: k.Cluster.Kubeconfig, Namespace: k.Namespace,
		NoNetworkClass: k.Cluster.NoNetworkClass, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// kubeTables are the tables of a daemon on the cluster, after everything else of its
// configuration: the [limits] pids the nodes keep, and [kubernetes].
func (d *Daemon) kubeTables(t testing.TB) string {
	k := d.Kube
	pids := k.Cluster.PodPidsLimit(t)
	return strings.Join([]string{
		"[limits]",
		fmt.Sprintf("pids = %d", pids),
		"[kubernetes]",
		fmt.Sprintf("kubeconfig = %q", or(k.Kubeconfig, k.Cluster.Kubeconfig)),
		fmt.Sprintf("namespace = %q", or(k.Namespace, kube.DefaultNamespace)),
		fmt.Sprintf("no_network_class = %q", k.Cluster.NoNetworkClass),
		fmt.Sprintf("node_ipc_dir = %q", k.NodeIPCDir),
		fmt.Sprintf("pod_pids_limit = %d", pids),
		fmt.Sprintf("relay_listen = %q", k.RelayListen),
	}, "\n")
}

// ServiceAccountKubeconfig writes into dir a kubeconfig of the cluster that authenticates
// as the service account namespace/name with a token of the TokenRequest API (valid one
// hour) in a token file beside it, and returns its path: what a daemon outside the cluster
// is given to act with exactly the rights its RBAC binds to that account.
func ServiceAccountKubeconfig(t testing.TB, k enginetest.Kube, namespace, name, dir string) string {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(k.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	current := admin.Contexts[admin.CurrentContext]
	if current == nil || admin.Clusters[current.Cluster] == nil {
		t.Fatalf("%s: no cluster in its current context %q", k.Kubeconfig, admin.CurrentContext)
	}
	secs := int64(3600)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := k.Client(t).CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of service account %s/%s: %v", namespace, name, err)
	}
	token := filepath.Join(dir, name+".token")
	if err := os.WriteFile(token, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = admin.Clusters[current.Cluster]
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{TokenFile: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: name, Namespace: namespace}
	cfg.CurrentContext = name
	path := filepath.Join(dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
