package daemontest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/kube"
)

// kubeImported holds the images imported into the cluster's node, once per process each.
var kubeImported sync.Map // image reference -> *kubeImport

type kubeImport struct {
	once sync.Once
	done bool
}

// openKube imports image from the Podman e into the cluster's node, once per process, and
// returns the cluster's engine as the daemon's configuration makes it (in namespace, ""
// for the default), for the leftovers.
func openKube(t testing.TB, k enginetest.Kube, e enginetest.Engine, image string, pids int64, namespace string) engine.Engine {
	t.Helper()
	v, _ := kubeImported.LoadOrStore(image, &kubeImport{})
	imp := v.(*kubeImport)
	imp.once.Do(func() {
		k.ImportImage(t, e, image)
		imp.done = true
	})
	if !imp.done {
		t.Fatalf("import %s into the cluster failed in an earlier test", image)
	}
	eng, err := kube.New(kube.Config{Kubeconfig: k.Kubeconfig, Namespace: namespace, NoNetworkClass: k.NoNetworkClass, PodPidsLimit: pids})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// KubeConf is how a daemon is on the cluster ([kubernetes] of its configuration).
type KubeConf struct {
	// Kubeconfig is the daemon's; "" is the cluster's admin one. ServiceAccountKubeconfig
	// makes one of a service account, to act with exactly the rights its RBAC binds.
	Kubeconfig string
	// Namespace of its Pods; "" is kube.DefaultNamespace.
	Namespace string
	// NodeIPCDir is where the node agents (the DaemonSet) serve the turns' sockets; "" has
	// the Pods mount the daemon's own IPC directories (the daemon runs on the node).
	NodeIPCDir string
	// RelayListen is where the node agents relay the turns' connections to; "" for none.
	RelayListen string
}

// kubeTOML is the configuration of a daemon on the cluster: its engine, [kubernetes]
// (KubeConf), and [limits] pids at the nodes' podPidsLimit, the only pids limit a Pod has.
func (d *Daemon) kubeTOML() string {
	c := d.KubeConf
	return fmt.Sprintf("engine = \"kubernetes\"\n[kubernetes]\nkubeconfig = %q\nnamespace = %q\nno_network_class = %q\nnode_ipc_dir = %q\nrelay_listen = %q\npod_pids_limit = %d\n[limits]\npids = %d\n",
		or(c.Kubeconfig, d.Kube.Kubeconfig), or(c.Namespace, kube.DefaultNamespace), d.Kube.NoNetworkClass, c.NodeIPCDir, c.RelayListen, d.kubePids, d.kubePids)
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
