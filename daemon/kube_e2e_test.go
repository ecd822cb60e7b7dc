package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/kube"
	"github.com/arizuko/arizukod/store"
)

// podLog keeps every version of every Pod of one daemon's instance the API server showed,
// from its creation to its deletion: what each turn's Pod was given, after it is gone.
type podLog struct {
	mu   sync.Mutex
	seen map[string][]*corev1.Pod // by Pod name, oldest first
}

// watchPods follows the Pods of instance on the test host's cluster until the test ends.
func watchPods(t *testing.T, k enginetest.Kube, instance string) *podLog {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	l := &podLog{seen: map[string][]*corev1.Pod{}}
	add := func(o any) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if p, ok := o.(*corev1.Pod); ok {
			l.mu.Lock()
			l.seen[p.Name] = append(l.seen[p.Name], p.DeepCopy())
			l.mu.Unlock()
		}
	}
	inf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(kube.DefaultNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = engine.LabelInstance + "=" + instance }))
	if _, err := inf.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: add, UpdateFunc: func(_, o any) { add(o) }, DeleteFunc: add,
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	inf.Start(stop)
	inf.WaitForCacheSync(stop)
	t.Cleanup(func() { close(stop); inf.Shutdown() })
	return l
}

// ofRun is the names of the Pods made for run id (by its exact label), prepared ones
// taken by it included.
func (l *podLog) ofRun(id string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for name, versions := range l.seen {
		var labels map[string]string
		json.Unmarshal([]byte(versions[len(versions)-1].Annotations[kube.LabelsAnnotation]), &labels)
		if labels[engine.LabelRun] == id {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// check fails for a Pod placed on another node than node and, unless secret is "", for
// secret in any version of any Pod (its env, its annotations, its whole object); it
// returns how many Pods it saw.
func (l *podLog) check(t *testing.T, secret, node string) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, versions := range l.seen {
		for _, p := range versions {
			b, _ := json.Marshal(p)
			if secret != "" && strings.Contains(string(b), secret) {
				t.Errorf("the secret is in Pod %s", name)
				break
			}
		}
		if last := versions[len(versions)-1]; last.Spec.NodeName != "" && last.Spec.NodeName != node {
			t.Errorf("Pod %s ran on %s, want the real node %s", name, last.Spec.NodeName, node)
		}
	}
	return len(l.seen)
}

// socketsUnder lists the unix sockets under dir.
func socketsUnder(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type()&fs.ModeSocket != 0 {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestKubeClaude runs the real Claude Code binary of the arizuko-claude image in a Pod of
// the test host's cluster (engine = "kubernetes", the daemon on the node), against the
// scripted Messages API behind the model gateway: its reply comes back, its send_reply
// reaches the MCP server over router.sock and lands in the outbox, and the model key is in
// no Pod (no version of its object, no process's environment or file inside it, scanned by
// Claude Code's own Bash tool), no file of the daemon and not its journal.
func TestKubeClaude(t *testing.T) {
	daemontest.JournalOn(t)
	k := enginetest.KubeCluster(t)
	pm := daemontest.Podman4(t)
	fake := fakemodel.Start()
	defer fake.Close()
	awaiting := false
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		if res, ok := r.ToolResult(); ok && awaiting {
			awaiting = false
			return fakemodel.Reply{Text: "tool said: " + res}
		}
		switch text := r.LastUserText(); {
		case strings.HasSuffix(text, "please use send_reply"):
			awaiting = true
			return fakemodel.Reply{ToolUse: &fakemodel.ToolUse{Name: "mcp__arizuko__send_reply",
				Input: map[string]any{"text": "hello from claude on kubernetes"}}}
		case strings.HasSuffix(text, "please scan"):
			awaiting = true
			return fakemodel.Reply{ToolUse: &fakemodel.ToolUse{Name: "Bash", Input: map[string]any{
				"command": scanShell + "echo key-lines=$(scan 'sk-ant-tes[t]-') token-lines=$(scan 'ANTHROPIC_')", "description": "scan for the key"}}}
		default:
			return fakemodel.Reply{Text: "echo: " + text}
		}
	}
	key := "sk-ant-test-" + daemontest.RandHex(16)
	d := daemontest.New(t, daemontest.Config{Engine: pm, Kube: &k, Claude: true, RunTimeout: "3m",
		EnvFile: "ANTHROPIC_API_KEY=" + key + "\n",
		TOML:    fmt.Sprintf("[model]\nupstream = %q\n", fake.URL)})
	pods := watchPods(t, k, d.Instance)
	d.Start(t)
	d.AddGroup(t, "main")

	// A plain turn: the model's text comes back, with a session, the key only upstream.
	start := time.Now()
	first := d.Turn(t, "main", "hello there")
	if first.Status != "ok" || first.Result != "echo: hello there" || first.NewSessionID == "" {
		t.Fatalf("plain turn: %s %s %q %q (session %q)", first.State, first.Status, first.Result, first.Error, first.NewSessionID)
	}
	t.Logf("a plain Claude Code turn in a Pod in %s, %d model requests", time.Since(start).Round(time.Millisecond), len(fake.Requests()))
	for _, req := range fake.Requests() {
		if req.Header.Get("X-Api-Key") != key {
			t.Errorf("the upstream got x-api-key %q, want the daemon's key", req.Header.Get("X-Api-Key"))
		}
	}

	// A routed chat message whose model calls send_reply: Claude Code in the Pod calls the
	// MCP server over router.sock, and the reply and the result go to the message's chat.
	st := d.OpenStore(t)
	if _, err := st.AddRoute(context.Background(), store.Route{Seq: 1, Match: "platform=telegram", Target: "main"}); err != nil {
		t.Fatal(err)
	}
	id := routeChat(t, d, "tg:42", "please use send_reply")
	replied := inboxTurn(t, d, st, id)
	if replied.Status != "ok" || !strings.HasPrefix(replied.Result, "tool said: ") {
		t.Errorf("send_reply turn: %s %q %q", replied.Status, replied.Result, replied.Error)
	}
	if items := outbox(t, d); len(items) != 2 || items[0].Target != "tg:42" || items[0].Content != "hello from claude on kubernetes" || items[0].RunID != replied.ID ||
		items[1].Kind != "result" || items[1].Target != "tg:42" || items[1].Content != replied.Result {
		t.Errorf("outbox after send_reply: %+v, want the reply and the result to tg:42 by run %s", items, replied.ID)
	}

	// The key is in no process's environment and no file of the Pod; the turn's own token
	// is (ANTHROPIC_ variables), so the scan does see what a container holds.
	scanned := d.Turn(t, "main", "please scan")
	if scanned.Status != "ok" || !strings.Contains(scanned.Result, "key-lines=0 ") || strings.Contains(scanned.Result, "token-lines=0") {
		t.Errorf("the key in the Pod: %s %q %q", scanned.Status, scanned.Result, scanned.Error)
	}
	if err := d.Drain(time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := pods.check(t, key, k.Node); n < 3 {
		t.Errorf("%d Pods seen for 3 turns", n)
	}
	secretNowhere(t, d, key)
}

// TestKubeRestartAdopt SIGKILLs the daemon while a chat message's turn runs in its Pod and
// starts it again over the same data: the turn is adopted (its Pod ran on without a
// daemon, and its answer is read from the Pod's log), never run again, its reply is
// delivered once, and nothing is left: no Pod, no socket.
func TestKubeRestartAdopt(t *testing.T) {
	daemontest.JournalOn(t)
	k := enginetest.KubeCluster(t)
	d := daemontest.New(t, daemontest.Config{Engine: daemontest.Podman4(t), Kube: &k})
	pods := watchPods(t, k, d.Instance)
	d.Start(t)
	d.AddGroup(t, "main")
	st := d.OpenStore(t)
	if _, err := st.AddRoute(context.Background(), store.Route{Seq: 1, Match: "platform=telegram", Target: "main"}); err != nil {
		t.Fatal(err)
	}
	id := routeChat(t, d, "tg:42", "sleep 8s")
	var run apiwire.Run
	for deadline := time.Now().Add(time.Minute); run.ID == ""; time.Sleep(50 * time.Millisecond) {
		for _, r := range d.Runs(t, "folder=main") {
			if r.InboxFirst <= id && id <= r.InboxLast {
				run = r
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no run of the message after a minute")
		}
	}
	run = d.WaitRunning(t, run.ID, time.Minute)
	d.WaitContainerRunning(t, run.Container)
	// Killed once the agent has its input: what the next daemon adopts rather than runs again.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r, err := st.GetRun(context.Background(), run.ID); err == nil && r.InputSentAt > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn's input was not sent in 20 s")
		}
	}

	d.Kill(t)
	killedAt := time.Now()
	left := d.Leftovers(t)
	if !slices.ContainsFunc(left, func(c engine.Container) bool { return c.Name == run.Container && c.Running }) {
		t.Fatalf("the turn's Pod %s is not running without a daemon: %+v", run.Container, left)
	}
	d.Start(t)
	newPid := d.Pid()
	ended := d.Wait(t, run.ID, 2*time.Minute)
	t.Logf("SIGKILL, restart, and the adopted turn's end %s after the kill: %s %s %q", time.Since(killedAt).Round(time.Millisecond), ended.State, ended.Status, ended.Result)
	if ended.State != "exited" || ended.Status != "ok" || ended.Result != "slept 8s" || ended.Attempt != 1 {
		t.Errorf("the adopted turn: %+v, want exited ok with its answer at attempt 1", ended)
	}
	daemontest.WaitJournal(t, 10*time.Second, daemontest.HasMessage("adopting run"), "ARIZUKO_RUN_ID="+run.ID, fmt.Sprintf("_PID=%d", newPid))
	if made := pods.ofRun(run.ID); len(made) != 1 || made[0] != run.Container {
		t.Errorf("Pods of the run: %v, want only %s: adopted, not run again", made, run.Container)
	}
	if err := d.Drain(time.Minute); err != nil {
		t.Fatal(err)
	}
	// A gateway leases the chat's rows and acks them: the turn's result comes once, and
	// nothing after it.
	ctx := context.Background()
	lease, err := d.Client.LeaseOutbox(ctx, apiwire.OutboxQuery{Chat: "tg:42", Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rows := lease.Items; len(rows) != 1 || rows[0].RunID != run.ID || rows[0].Kind != "result" || rows[0].Content != ended.Result {
		t.Fatalf("the chat's rows: %+v, want the run's result once", rows)
	}
	if _, err := d.Client.AckOutbox(ctx, lease.Lease, lease.Items[0].ID); err != nil {
		t.Fatal(err)
	}
	if again, err := d.Client.LeaseOutbox(ctx, apiwire.OutboxQuery{Chat: "tg:42", Wait: 2 * time.Second}); err != nil || len(again.Items) != 0 {
		t.Errorf("after the ack the chat has %+v (%v), want nothing", again.Items, err)
	}
	if left := d.SettledLeftovers(t); len(left) != 0 {
		t.Errorf("Pods left: %+v", left)
	}
	if socks := socketsUnder(filepath.Join(d.DataDir, "ipc")); len(socks) != 0 {
		t.Errorf("sockets left after the adopted turn: %v", socks)
	}
	// The daemon removes the Pod it prepared for main's next turn as it stops (daemontest
	// fails the test for any Pod of the instance left then).
	d.Stop(t)
	if socks := socketsUnder(filepath.Join(d.DataDir, "ipc")); len(socks) != 0 {
		t.Errorf("sockets left after the daemon: %v", socks)
	}
	pods.check(t, "", k.Node)
}
