package daemontest

import (
	"fmt"
	"sync"
	"testing"

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
// returns the cluster's engine as the daemon's configuration makes it, for the leftovers.
func openKube(t testing.TB, k enginetest.Kube, e enginetest.Engine, image string, pids int64) engine.Engine {
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
	eng, err := kube.New(kube.Config{Kubeconfig: k.Kubeconfig, NoNetworkClass: k.NoNetworkClass, PodPidsLimit: pids})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// kubeTOML is the configuration of a daemon on the cluster: its engine, [kubernetes]
// with node_ipc_dir "" (the daemon runs on the node, whose IPC directories the Pods mount),
// and [limits] pids at the nodes' podPidsLimit, the only pids limit a Pod has.
func (d *Daemon) kubeTOML() string {
	return fmt.Sprintf("engine = \"kubernetes\"\n[kubernetes]\nkubeconfig = %q\nno_network_class = %q\nnode_ipc_dir = \"\"\npod_pids_limit = %d\n[limits]\npids = %d\n",
		d.Kube.Kubeconfig, d.Kube.NoNetworkClass, d.kubePids, d.kubePids)
}
