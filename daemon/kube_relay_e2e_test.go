package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
	"github.com/arizuko/arizukod/runtime/kube"
)

// relayCluster is contrib/kubernetes applied to the test host's cluster in a namespace of
// the test's own: the RBAC, the network rule and, once a central is there to give its
// certificate, the node DaemonSet.
type relayCluster struct {
	k       enginetest.Kube
	pm      enginetest.Engine
	ns      string
	nodeIPC string // the DaemonSet's IPC directory on the node ([kubernetes] node_ipc_dir)
	relay   string // the central's relay_listen, on the node's address its Pods reach
	// kubeconfig is the central's service account's (rbac.yaml), with a TokenRequest token.
	kubeconfig string
	image      string // arizukod's, the DaemonSet's
}

// newRelayCluster applies the namespace, RBAC and network rule of contrib/kubernetes,
// with every namespace (and the cluster-wide RBAC's names) the test's own, and removes
// them at cleanup.
func newRelayCluster(t *testing.T) *relayCluster {
	t.Helper()
	k := enginetest.KubeCluster(t)
	pm := daemontest.Podman4(t)
	peng, _ := pm.Open(t)
	c := &relayCluster{k: k, pm: pm, ns: "arz-relay-" + daemontest.RandHex(3), nodeIPC: t.TempDir()}
	c.image = k.ArizukodImage(t, pm, peng)
	ln, err := net.Listen("tcp", net.JoinHostPort(k.NodeIP(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	c.relay = ln.Addr().String()
	ln.Close()
	objects := [][]byte{c.manifest(t, "namespace.yaml"), c.manifest(t, "rbac.yaml"), c.manifest(t, "networkpolicy.yaml")}
	t.Cleanup(func() {
		for _, o := range objects[1:] {
			cmd := exec.Command(filepath.Join(k.Bin, "kubectl"), "--kubeconfig", k.Kubeconfig, "delete", "--ignore-not-found", "--wait=false", "-f", "-")
			cmd.Stdin = bytes.NewReader(o)
			cmd.Run()
		}
		exec.Command(filepath.Join(k.Bin, "kubectl"), "--kubeconfig", k.Kubeconfig, "delete", "namespace", c.ns, "--ignore-not-found", "--wait=false").Run()
	})
	for _, o := range objects {
		k.Kubectl(t, o, "apply", "-f", "-")
	}
	c.kubeconfig = daemontest.ServiceAccountKubeconfig(t, k, c.ns, "arizukod", t.TempDir())
	return c
}

// manifest is contrib/kubernetes/<name> in the test's namespace, with the node's IPC
// directory the test's and the image never pulled.
func (c *relayCluster) manifest(t *testing.T, name string) []byte {
	t.Helper()
	return enginetest.Manifest(t, name, "namespace: arizuko\n", "namespace: "+c.ns+"\n",
		"kind: Namespace\nmetadata:\n  name: arizuko\n", "kind: Namespace\nmetadata:\n  name: "+c.ns+"\n",
		"--namespace=arizuko", "--namespace="+c.ns, "name: arizukod-doctor\n", "name: arizukod-doctor-"+c.ns+"\n",
		"ARIZUKO_IMAGE", c.image, "ARIZUKO_CENTRAL", c.relay, "/var/lib/arizuko/node-ipc", c.nodeIPC,
		"imagePullPolicy: IfNotPresent", "imagePullPolicy: Never")
}

// central is a daemon of the cluster with its service account, whose turn Pods' sockets
// the node agents serve and relay to it.
func (c *relayCluster) central(t *testing.T, cfg daemontest.Config) *daemontest.Daemon {
	t.Helper()
	cfg.Engine, cfg.Kube = c.pm, &c.k
	cfg.KubeConf = daemontest.KubeConf{Kubeconfig: c.kubeconfig, Namespace: c.ns, NodeIPCDir: c.nodeIPC, RelayListen: c.relay}
	return daemontest.New(t, cfg)
}

// startNodes gives the node DaemonSet its certificate from `arizukod kube node-cert` of
// d's data directory and waits for it to run.
func (c *relayCluster) startNodes(t *testing.T, d *daemontest.Daemon) {
	t.Helper()
	cmd := exec.Command(d.Bin, "kube", "node-cert", "--config", d.ConfigPath, "--node", c.k.Node, "--namespace", c.ns)
	cmd.Env = d.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	secret, err := cmd.Output()
	if err != nil {
		t.Fatalf("arizukod kube node-cert: %v\n%s", err, stderr.String())
	}
	c.k.Kubectl(t, secret, "apply", "-f", "-")
	c.k.Kubectl(t, c.manifest(t, "node-daemonset.yaml"), "apply", "-f", "-")
	c.k.Kubectl(t, nil, "-n", c.ns, "rollout", "status", "daemonset/arizuko-node", "--timeout=180s")
}

// slugDirs lists what is left in the node's IPC directory: one directory per turn slug
// while a turn Pod of it is there.
func (c *relayCluster) slugDirs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(c.nodeIPC)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// turnPods lists the turn Pods of the namespace, whatever instance made them.
func (c *relayCluster) turnPods(t *testing.T) []string {
	t.Helper()
	out := c.k.Kubectl(t, nil, "-n", c.ns, "get", "pods", "-l", kube.ManagedLabel+"="+kube.ManagedValue, "-o", "name")
	return strings.Fields(out)
}

// keyHolders are the places on the node holding key: regular files under the node's IPC
// directory, and the environment or command line of every process of the host (the turn
// Pod's, the node agent's and the central's among them).
func keyHolders(t *testing.T, key, nodeIPC string) []string {
	t.Helper()
	var hits []string
	filepath.WalkDir(nodeIPC, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(key)) {
				hits = append(hits, p)
			}
		}
		return nil
	})
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		for _, f := range []string{"environ", "cmdline"} {
			if b, err := os.ReadFile(filepath.Join(p, f)); err == nil && bytes.Contains(b, []byte(key)) {
				hits = append(hits, filepath.Join(p, f))
			}
		}
	}
	return hits
}

// TestKubeTurnThroughTheNodeRelay runs the whole path on the real cluster: a central
// arizukod (engine "kubernetes", acting with the service account contrib/kubernetes's
// RBAC binds, so those rights are proven enough) and the node DaemonSet with a certificate
// from `arizukod kube node-cert` of the central's data directory. A turn submitted to the
// central's API runs in a Pod of network none, calls send_reply over router.sock and asks
// the model over model.sock, both served by the node agent and relayed to the central;
// the upstream sees the key, which is never in the Pod, the node's IPC directory, any
// process of the host or the DaemonSet's objects. The reply reaches the outbox. After the
// turn, and after the central stops with nothing running, no Pod, slug directory or
// socket is left. doctor, with the same account, finds the rights enough.
func TestKubeTurnThroughTheNodeRelay(t *testing.T) {
	daemontest.JournalOn(t)
	c := newRelayCluster(t)
	fake := fakemodel.Start()
	defer fake.Close()
	key := "sk-ant-test-" + daemontest.RandHex(16)
	d := c.central(t, daemontest.Config{EnvFile: "ANTHROPIC_API_KEY=" + key + "\n",
		TOML: fmt.Sprintf("[model]\nupstream = %q\n", fake.URL)})
	c.startNodes(t, d)
	d.Start(t)
	d.AddGroup(t, "main")
	// doctor, with the same account, finds it may do all the engine does.
	doctor := exec.Command(d.Bin, "doctor", "--config", d.ConfigPath, "--check", "cluster")
	doctor.Env = d.Env()
	if out, err := doctor.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "ok    cluster") ||
		!strings.Contains(string(out), "the account may do all the engine does") {
		t.Errorf("doctor --check cluster with the central's service account: %v\n%s", err, out)
	}

	cmds := []string{
		`mcp send_reply {"text":"hello from a Pod on the cluster"}`,
		"model hello through the relay",
		"scan " + key[:20],
		"sleep 2s",
	}
	run, err := d.Client.CreateRun(context.Background(), apiwire.CreateRunRequest{Folder: "main", ChatJID: "tg:-27",
		Messages: []contract.Message{{Content: "all " + strings.Join(cmds, " ;; ")}}})
	if err != nil {
		t.Fatal(err)
	}
	running := d.WaitRunning(t, run.ID, time.Minute)
	d.WaitContainerRunning(t, running.Container)
	if dirs := c.slugDirs(t); len(dirs) != 1 {
		t.Errorf("the node's IPC directory while the turn runs: %v, want the turn's slug", dirs)
	}
	if hits := keyHolders(t, key, c.nodeIPC); len(hits) > 0 {
		t.Errorf("the key is on the node while the turn runs: %v", hits)
	}
	r := d.Wait(t, run.ID, 2*time.Minute)
	if r.State != "exited" || r.Status != "ok" {
		t.Fatalf("the turn through the relay: %+v", r)
	}
	var outs []contract.Output
	if err := json.Unmarshal([]byte(r.Result), &outs); err != nil || len(outs) != len(cmds) {
		t.Fatalf("the turn's answer %q: %v", r.Result, err)
	}
	want := []string{`"isError":false`, "echo: hello through the relay", `"hits":null`, ""}
	for i, o := range outs {
		if o.Status != contract.StatusOK || !strings.Contains(o.Result, want[i]) {
			t.Errorf("%q answered %s %q %q; want %s", cmds[i], o.Status, o.Result, o.Error, want[i])
		}
	}
	if reqs := fake.Requests(); len(reqs) != 1 || reqs[0].Header.Get("X-Api-Key") != key {
		t.Errorf("the upstream did not get one request with the key from the central: %d requests", len(reqs))
	}
	var outbox struct {
		Items []apiwire.OutboxItem `json:"items"`
	}
	if err := d.Client.Do(context.Background(), http.MethodGet, "/v1/groups/main/outbox", nil, &outbox); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(outbox.Items, func(it apiwire.OutboxItem) bool {
		return it.RunID == r.ID && it.Target == "tg:-27" && it.Content == "hello from a Pod on the cluster"
	}) {
		t.Errorf("outbox after the turn: %+v, want its send_reply to tg:-27", outbox.Items)
	}
	objects := c.k.Kubectl(t, nil, "-n", c.ns, "get", "daemonsets,secrets,configmaps", "-o", "yaml")
	if strings.Contains(objects, key) {
		t.Errorf("the key is in the DaemonSet's objects")
	}
	// Nothing left: the turn's Pod is gone at once; what stays is the Pod prepared for
	// main's next turn (never started), whose slug the node serves until the central,
	// stopping with nothing running, removes it.
	if left := d.SettledLeftovers(t); len(left) > 0 {
		t.Errorf("turn Pods left after the turn: %+v", left)
	}
	if err := d.Drain(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	prepared := len(d.Containers(t))
	t.Logf("after the turn: %d Pod prepared, the node serves %v", prepared, c.slugDirs(t))
	if dirs := c.slugDirs(t); len(dirs) > prepared {
		t.Errorf("the node's IPC directory after the turn: %v, with %d Pods prepared", dirs, prepared)
	}
	d.Stop(t)
	time.Sleep(2 * time.Second) // what a late removal would leave, it leaves by now
	if pods := c.turnPods(t); len(pods) > 0 {
		t.Errorf("turn Pods after the central stopped: %v", pods)
	}
	for end := time.Now().Add(60 * time.Second); len(c.slugDirs(t)) > 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("a minute after the central stopped, the node's IPC directory still holds %v", c.slugDirs(t))
		}
	}
	if hits := keyHolders(t, key, c.nodeIPC); len(hits) > 0 {
		t.Errorf("the key is on the node after the turn: %v", hits)
	}
}

// TestKubeRelayedTurnOutlivesTheCentral stops the central while a turn's Pod sleeps and
// starts it again: the adopted turn then reaches the model and the MCP tools through the
// same node agent, whose relay finds the new central. The central stops once the agent
// has its input: stopped before, the turn is run again (attempt 2), and stopped before its
// attach stream reached the Pod, the agent waited on its stdin until the run timeout, the
// CI hang (runtime/kube's TestAdoptedPodNoOneAttachedEnds).
func TestKubeRelayedTurnOutlivesTheCentral(t *testing.T) {
	relayedTurnOutlivesTheCentral(t, 0)
}

// TestKubeRelayedTurnOutlivesALongRestart is the same with the central away longer than
// the Pod sleeps: the agent asks the model while no central listens, and the node agent
// holds its connection until the new central, once it has adopted the turn, takes it.
func TestKubeRelayedTurnOutlivesALongRestart(t *testing.T) {
	relayedTurnOutlivesTheCentral(t, 15*time.Second)
}

// relayedTurnOutlivesTheCentral stops the central once the turn's Pod runs `sleep 10s`,
// waits away, then starts it again; the turn must end answered in its first Pod.
func relayedTurnOutlivesTheCentral(t *testing.T, away time.Duration) {
	daemontest.JournalOn(t)
	c := newRelayCluster(t)
	fake := fakemodel.Start()
	defer fake.Close()
	key := "sk-ant-test-" + daemontest.RandHex(16)
	d := c.central(t, daemontest.Config{EnvFile: "ANTHROPIC_API_KEY=" + key + "\n",
		TOML: fmt.Sprintf("[model]\nupstream = %q\n", fake.URL)})
	c.startNodes(t, d)
	d.Start(t)
	d.AddGroup(t, "main")
	cmds := []string{"sleep 10s", "model after the restart", `mcp send_reply {"text":"after the restart"}`}
	run, err := d.Client.CreateRun(context.Background(), apiwire.CreateRunRequest{Folder: "main", ChatJID: "tg:-27",
		Messages: []contract.Message{{Content: "all " + strings.Join(cmds, " ;; ")}}})
	if err != nil {
		t.Fatal(err)
	}
	running := d.WaitRunning(t, run.ID, time.Minute)
	d.WaitContainerRunning(t, running.Container)
	c.logsOnFailure(t, running.Container)
	// Stopped once the agent has its input: what the next central adopts rather than runs
	// again.
	st := d.OpenStore(t)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r, err := st.GetRun(context.Background(), run.ID); err == nil && r.InputSentAt > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn's input was not sent in 20 s")
		}
	}
	d.Stop(t)
	stopped := time.Now()
	time.Sleep(away)
	d.Start(t)
	t.Logf("the central was away %s", time.Since(stopped).Round(time.Millisecond))
	r := d.Wait(t, run.ID, 2*time.Minute)
	if r.State != "exited" || r.Status != "ok" || r.Attempt != 1 {
		t.Fatalf("the adopted turn: %+v, want it answered in its first Pod", r)
	}
	var outs []contract.Output
	if err := json.Unmarshal([]byte(r.Result), &outs); err != nil || len(outs) != len(cmds) {
		t.Fatalf("the adopted turn's answer %q: %v", r.Result, err)
	}
	want := []string{"", "echo: after the restart", `"isError":false`}
	for i, o := range outs {
		if o.Status != contract.StatusOK || !strings.Contains(o.Result, want[i]) {
			t.Errorf("after the restart, %q answered %s %q %q; want %s", cmds[i], o.Status, o.Result, o.Error, want[i])
		}
	}
	if reqs := fake.Requests(); len(reqs) != 1 || reqs[0].Header.Get("X-Api-Key") != key {
		t.Errorf("the upstream did not get one request with the key from the central: %d requests", len(reqs))
	}
}

// logsOnFailure logs, when the test has failed, the node agent's log and the turn Pod's.
func (c *relayCluster) logsOnFailure(t *testing.T, pod string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, args := range [][]string{{"logs", "daemonset/arizuko-node", "--timestamps"}, {"logs", pod, "--timestamps"}} {
			cmd := exec.Command(filepath.Join(c.k.Bin, "kubectl"), append([]string{"--kubeconfig", c.k.Kubeconfig, "-n", c.ns}, args...)...)
			out, err := cmd.CombinedOutput()
			t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
}
