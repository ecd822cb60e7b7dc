package kube

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/runtime/engine"
)

func testEngine(t *testing.T, cfg Config) (*Engine, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: DefaultNoNetworkClass}, Handler: "runc-nonet"})
	if cfg.NoNetworkClass == "" {
		cfg.NoNetworkClass = DefaultNoNetworkClass
	}
	if cfg.PodPidsLimit == 0 {
		cfg.PodPidsLimit = 512
	}
	return NewForClient(cfg, client), client
}

// testSpec is an agent container's spec as the runner makes it, with real mount sources.
func testSpec(t *testing.T) engine.Spec {
	t.Helper()
	dir := t.TempDir()
	group, ipc, skills := filepath.Join(dir, "groups", "main"), filepath.Join(dir, "ipc", "main-research"), filepath.Join(dir, "skills")
	for _, d := range []string{group, ipc, skills} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := filepath.Join(dir, "env")
	if err := os.WriteFile(env, []byte("A=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return engine.Spec{
		Name: "arizuko-main-research-1700000000000", Image: "localhost/arizuko-agent:abc",
		Labels: map[string]string{engine.LabelInstance: "i1", engine.LabelFolder: "main/research", engine.LabelRole: "agent", engine.LabelRun: "r-1"},
		Env:    []string{"HOME=/root", "X=a=b"},
		Mounts: []engine.Mount{{Source: group, Target: "/workspace"}, {Source: ipc, Target: contract.IPCDir},
			{Source: skills, Target: "/skills", ReadOnly: true}, {Source: env, Target: "/workspace/env-dir/env", ReadOnly: true}},
		Tmpfs:   []engine.Tmpfs{{Target: "/tmp", Options: "rw,nosuid,nodev,size=256m,mode=1777"}},
		Network: engine.NetworkNone, MemoryBytes: 1 << 30, NanoCPUs: 1_500_000_000, PidsLimit: 512,
		Rlimits: engine.DefaultRlimits(), User: "1000:1001", WorkingDir: "/workspace", Stdin: true,
		Timeout: 5 * time.Minute,
	}
}

// podHardening reads back from a Pod the hardening its container gets.
func podHardening(p *corev1.Pod) engine.Hardening {
	c := p.Spec.Containers[0]
	sc := c.SecurityContext
	var h engine.Hardening
	for _, cap := range sc.Capabilities.Drop {
		h.CapDrop = append(h.CapDrop, string(cap))
	}
	h.NoNewPrivileges = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	h.ReadOnlyRoot = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	// Kubernetes mounts nothing writable of its own but the volumes the Pod names.
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil && v.Name[0] != 't' {
			h.EngineTmpfs = true
		}
	}
	if c.ImagePullPolicy == corev1.PullNever {
		h.Pull = engine.PullNever
	}
	return h
}

// TestPodHardening: every field of the Pod that keeps a promise, read back.
func TestPodHardening(t *testing.T) {
	e, _ := testEngine(t, Config{StopGrace: 7 * time.Second})
	s := testSpec(t)
	p, err := e.PodFor(s)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := podHardening(p), engine.Hardened(); !reflect.DeepEqual(got, want) {
		t.Errorf("pod hardening %+v, want %+v", got, want)
	}
	c := p.Spec.Containers[0]
	sc := c.SecurityContext
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("runAsUser", *sc.RunAsUser, int64(1000))
	check("runAsGroup", *sc.RunAsGroup, int64(1001))
	check("runAsNonRoot", *sc.RunAsNonRoot, true)
	check("privileged", *sc.Privileged, false)
	check("seccomp", sc.SeccompProfile.Type, corev1.SeccompProfileTypeRuntimeDefault)
	check("pod seccomp", p.Spec.SecurityContext.SeccompProfile.Type, corev1.SeccompProfileTypeRuntimeDefault)
	check("hostUsers", p.Spec.HostUsers, (*bool)(nil))
	check("hostNetwork", p.Spec.HostNetwork, false)
	check("restartPolicy", p.Spec.RestartPolicy, corev1.RestartPolicyNever)
	check("stdin", c.Stdin, true)
	check("stdinOnce", c.StdinOnce, true)
	check("tty", c.TTY, false)
	check("automountServiceAccountToken", *p.Spec.AutomountServiceAccountToken, false)
	check("enableServiceLinks", *p.Spec.EnableServiceLinks, false)
	check("terminationGracePeriodSeconds", *p.Spec.TerminationGracePeriodSeconds, int64(7))
	check("activeDeadlineSeconds (set by Start)", p.Spec.ActiveDeadlineSeconds, (*int64)(nil))
	check("timeout annotation", p.Annotations[TimeoutAnnotation], "5m0s")
	check("runtimeClassName", *p.Spec.RuntimeClassName, DefaultNoNetworkClass)
	check("memory limit", c.Resources.Limits.Memory().Value(), int64(1<<30))
	check("memory request", c.Resources.Requests.Memory().Value(), int64(1<<30))
	check("cpu limit", c.Resources.Limits.Cpu().MilliValue(), int64(1500))
	check("cpu request", c.Resources.Requests.Cpu().MilliValue(), int64(0))
	check("workingDir", c.WorkingDir, "/workspace")
	check("env", c.Env, []corev1.EnvVar{{Name: "HOME", Value: "/root"}, {Name: "X", Value: "a=b"}})
	check("name", p.Name, s.Name)
	check("namespace", p.Namespace, DefaultNamespace)

	vols := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	if len(mounts) != len(s.Mounts)+len(s.Tmpfs) {
		t.Errorf("%d volume mounts, want %d: %+v", len(mounts), len(s.Mounts)+len(s.Tmpfs), c.VolumeMounts)
	}
	for _, m := range s.Mounts {
		vm, ok := mounts[m.Target]
		if !ok {
			t.Errorf("no volume mount at %s", m.Target)
			continue
		}
		hp := vols[vm.Name].HostPath
		if hp == nil || hp.Path != m.Source {
			t.Errorf("mount %s: volume %+v, want hostPath %s", m.Target, vols[vm.Name], m.Source)
			continue
		}
		want := corev1.HostPathDirectory
		if strings.HasSuffix(m.Source, "/env") {
			want = corev1.HostPathFile
		}
		check("hostPath type of "+m.Target, *hp.Type, want)
		check("readOnly of "+m.Target, vm.ReadOnly, m.ReadOnly)
	}
	tmp := vols[mounts["/tmp"].Name].EmptyDir
	if tmp == nil {
		t.Fatalf("/tmp is not an emptyDir: %+v", vols[mounts["/tmp"].Name])
	}
	check("/tmp medium", tmp.Medium, corev1.StorageMediumMemory)
	check("/tmp sizeLimit", tmp.SizeLimit.Value(), int64(256<<20))
	if _, ok := p.Annotations[IPCAnnotation]; ok {
		t.Errorf("IPC annotation without a node IPC directory: %v", p.Annotations)
	}

	// Network bridge is the Pod network: no RuntimeClass.
	s.Network = engine.NetworkBridge
	if p, err = e.PodFor(s); err != nil || p.Spec.RuntimeClassName != nil {
		t.Errorf("bridge: runtimeClassName %v, err %v; want none", p.Spec.RuntimeClassName, err)
	}
}

// TestPodRoot: the daemon's own uid 0 on a rootful engine runs as 0, with nothing else
// given up; no user at all is held to non-root.
func TestPodRoot(t *testing.T) {
	e, _ := testEngine(t, Config{})
	s := testSpec(t)
	s.User = "0:0"
	p, err := e.PodFor(s)
	if err != nil {
		t.Fatal(err)
	}
	sc := p.Spec.Containers[0].SecurityContext
	if *sc.RunAsUser != 0 || *sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 {
		t.Errorf("root: %+v", sc)
	}
	s.User = ""
	if p, err = e.PodFor(s); err != nil {
		t.Fatal(err)
	}
	if sc := p.Spec.Containers[0].SecurityContext; sc.RunAsUser != nil || !*sc.RunAsNonRoot {
		t.Errorf("no user: runAsUser %v, runAsNonRoot %v; want none and true", sc.RunAsUser, *sc.RunAsNonRoot)
	}
}

// TestPodNodeIPC: with a node IPC directory, the IPC mount is that directory's entry of
// the same base name, which the Pod names for the node agent.
func TestPodNodeIPC(t *testing.T) {
	e, _ := testEngine(t, Config{NodeIPCDir: "/run/arizuko-node/ipc"})
	p, err := e.PodFor(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Annotations[IPCAnnotation]; got != "main-research" {
		t.Errorf("%s = %q, want main-research", IPCAnnotation, got)
	}
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		if m.MountPath != contract.IPCDir {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.Name == m.Name && (v.HostPath.Path != "/run/arizuko-node/ipc/main-research" || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate) {
				t.Errorf("IPC hostPath %s (%s), want /run/arizuko-node/ipc/main-research, DirectoryOrCreate", v.HostPath.Path, *v.HostPath.Type)
			}
		}
	}
}

// TestPodRefusals: what a Pod cannot promise is refused with engine.ErrCreate, naming it.
func TestPodRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		mod  func(*engine.Spec)
		want string
	}{
		{"named network", Config{}, func(s *engine.Spec) { s.Network = "team-net" }, `network "team-net"`},
		{"slirp", Config{}, func(s *engine.Spec) { s.Network = engine.NetworkSlirp4netns }, `network "slirp4netns"`},
		{"runtime", Config{}, func(s *engine.Spec) { s.Runtime = "runsc" }, `OCI runtime "runsc"`},
		{"pids above", Config{PodPidsLimit: 4096}, nil, "up to 4096 pids"},
		{"no memory", Config{}, func(s *engine.Spec) { s.MemoryBytes = 0 }, "memory and CPU limits are required"},
		{"relative mount", Config{}, func(s *engine.Spec) { s.Mounts[0].Source = "groups/main" }, "must be absolute"},
		{"missing source", Config{}, func(s *engine.Spec) { s.Mounts[0].Source = "/nonexistent/arizuko" }, "source unusable"},
		{"bad user", Config{}, func(s *engine.Spec) { s.User = "arizuko" }, `user "arizuko"`},
		{"bad tmpfs", Config{}, func(s *engine.Spec) { s.Tmpfs[0].Options = "size=lots" }, "tmpfs /tmp"},
		{"no name", Config{}, func(s *engine.Spec) { s.Name = "" }, "no name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := testEngine(t, tc.cfg)
			s := testSpec(t)
			if tc.mod != nil {
				tc.mod(&s)
			}
			_, err := e.PodFor(s)
			if !errors.Is(err, engine.ErrCreate) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrCreate naming %q", err, tc.want)
			}
		})
	}
}

// TestCreateRefusesWithoutClass: network none never runs on the Pod network because its
// RuntimeClass is missing.
func TestCreateRefusesWithoutClass(t *testing.T) {
	e, client := testEngine(t, Config{NoNetworkClass: "no-such-class"})
	_, err := e.Create(context.Background(), testSpec(t))
	if !errors.Is(err, engine.ErrCreate) || !strings.Contains(err.Error(), `RuntimeClass "no-such-class"`) {
		t.Fatalf("err = %v, want ErrCreate naming the class", err)
	}
	pods, _ := client.CoreV1().Pods(DefaultNamespace).List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Errorf("%d pods made", len(pods.Items))
	}
}

// TestLabelsRoundTrip: a label value Kubernetes cannot hold is exact in List, and List
// matches exactly: main is not main/research, though a digest could collide.
func TestLabelsRoundTrip(t *testing.T) {
	ctx := context.Background()
	e, _ := testEngine(t, Config{})
	research := testSpec(t)
	main := testSpec(t)
	main.Name, main.Labels = "arizuko-main-1700000000001", map[string]string{engine.LabelInstance: "i1", engine.LabelFolder: "main", engine.LabelRole: "agent"}
	other := testSpec(t)
	other.Name = "arizuko-main-research-1700000000002"
	other.Labels = map[string]string{engine.LabelInstance: "i2", engine.LabelFolder: "main/research", engine.LabelPrepared: "abc"}
	for _, s := range []engine.Spec{research, main, other} {
		if _, err := e.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		want  map[string]string
		names []string
	}{
		{map[string]string{engine.LabelInstance: "i1"}, []string{main.Name, research.Name}},
		{map[string]string{engine.LabelFolder: "main/research"}, []string{research.Name, other.Name}},
		{map[string]string{engine.LabelFolder: "main/research", engine.LabelInstance: "i1"}, []string{research.Name}},
		{map[string]string{engine.LabelFolder: "main"}, []string{main.Name}},
		{map[string]string{engine.LabelRun: "r-1"}, []string{research.Name}},
		{map[string]string{engine.LabelFolder: "main/other"}, nil},
	} {
		list, err := e.List(ctx, tc.want)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range list {
			names = append(names, c.Name)
			if c.Name == research.Name && !reflect.DeepEqual(c.Labels, research.Labels) {
				t.Errorf("labels %v, want %v", c.Labels, research.Labels)
			}
			if c.State != "created" || c.Running {
				t.Errorf("%s: state %q running %v, want created", c.Name, c.State, c.Running)
			}
		}
		if !sameSet(names, tc.names) {
			t.Errorf("List(%v) = %v, want %v", tc.want, names, tc.names)
		}
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		seen[x]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestPodNames: a name Kubernetes refuses becomes a DNS label of its own, and List gives
// the spec's name back.
func TestPodNames(t *testing.T) {
	for _, name := range []string{"arizuko-a_b-1", "arizuko-a-b-1", "Arizuko-X", strings.Repeat("x", 80)} {
		got := podName(name)
		if len(got) > 63 || strings.Trim(got, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			t.Errorf("podName(%q) = %q: not a DNS label", name, got)
		}
	}
	if podName("arizuko-a_b-1") == podName("arizuko-a-b-1") {
		t.Error("a_b and a-b share a pod name")
	}
	e, _ := testEngine(t, Config{})
	s := testSpec(t)
	s.Name = "arizuko-my_group-1700000000000"
	ctx := context.Background()
	id, err := e.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := e.List(ctx, map[string]string{engine.LabelInstance: "i1"})
	if len(list) != 1 || list[0].Name != s.Name || list[0].ID != id {
		t.Errorf("List = %+v, want name %s id %s", list, s.Name, id)
	}
	if _, err := e.Create(ctx, s); !errors.Is(err, engine.ErrNameInUse) {
		t.Errorf("second create: %v, want ErrNameInUse", err)
	}
}

// TestStates: the Pod's status as the runner reads it.
func TestStates(t *testing.T) {
	now := metav1.Now()
	term := func(code int32, reason string) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: now, FinishedAt: now}}
	}
	for _, tc := range []struct {
		name    string
		started bool
		phase   corev1.PodPhase
		reason  string
		state   *corev1.ContainerState
		want    engine.State
	}{
		{"pending", false, corev1.PodPending, "", nil, engine.State{Status: "created"}},
		{"never pull", false, corev1.PodPending, "", &corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "no image"}},
			engine.State{Status: "created", ExitCode: 125, Error: "ErrImageNeverPull no image"}},
		{"prepared", false, corev1.PodRunning, "", &corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			engine.State{Status: "initialized"}},
		{"running", true, corev1.PodRunning, "", &corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			engine.State{Running: true, Status: "running", StartedAt: now.Time}},
		{"exited", true, corev1.PodSucceeded, "", ptr(term(0, "Completed")), engine.State{Status: "exited", StartedAt: now.Time, FinishedAt: now.Time}},
		{"failed", true, corev1.PodFailed, "", ptr(term(3, "Error")), engine.State{Status: "exited", ExitCode: 3, StartedAt: now.Time, FinishedAt: now.Time}},
		{"oom", true, corev1.PodFailed, "", ptr(term(137, "OOMKilled")), engine.State{Status: "exited", ExitCode: 137, OOMKilled: true, StartedAt: now.Time, FinishedAt: now.Time}},
		{"deadline", true, corev1.PodFailed, "DeadlineExceeded", ptr(term(137, "Error")),
			engine.State{Status: "deadline-exceeded", ExitCode: 137, DeadlineExceeded: true, StartedAt: now.Time, FinishedAt: now.Time}},
		{"deadline, no status yet", true, corev1.PodFailed, "DeadlineExceeded", &corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			engine.State{Status: "deadline-exceeded", ExitCode: 137, DeadlineExceeded: true, StartedAt: now.Time}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{}}, Status: corev1.PodStatus{Phase: tc.phase, Reason: tc.reason}}
			if tc.started {
				p.Annotations[StartedAnnotation] = "x"
			}
			if tc.state != nil {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: *tc.state}}
			}
			e, _ := testEngine(t, Config{})
			if got := e.stateOf(p); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("state %+v, want %+v", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestStartAndWait: Start waits for the container to run, then marks the Pod started with
// its deadline counted from the Pod's start; Wait returns the terminated state, and an
// image the node lacks fails Start as a misconfiguration.
func TestStartAndWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, client := testEngine(t, Config{StopGrace: 10 * time.Second})
	id, err := e.Create(ctx, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	pods := client.CoreV1().Pods(DefaultNamespace)
	setStatus := func(st corev1.PodStatus) {
		p, err := pods.Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		p.Status = st
		if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}
	started := metav1.NewTime(time.Now().Add(-time.Minute))
	go func() {
		time.Sleep(100 * time.Millisecond)
		setStatus(corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started,
			ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}})
	}()
	if st, _ := e.Inspect(ctx, id); st.Status != "created" {
		t.Errorf("before start: %+v", st)
	}
	if err := e.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	p, _ := pods.Get(ctx, id, metav1.GetOptions{})
	if p.Annotations[StartedAnnotation] == "" {
		t.Error("not marked started")
	}
	// A minute since the Pod started, the 5m timeout, 10s grace, 5s slack.
	if d := p.Spec.ActiveDeadlineSeconds; d == nil || *d < 60+300+15 || *d > 60+300+15+2 {
		t.Errorf("activeDeadlineSeconds %v, want about %d", d, 60+300+15)
	}
	if st, _ := e.Inspect(ctx, id); !st.Running {
		t.Errorf("after start: %+v", st)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		setStatus(corev1.PodStatus{Phase: corev1.PodFailed, StartTime: &started,
			ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}})
	}()
	st, err := e.Wait(ctx, id)
	if err != nil || !st.OOMKilled || st.ExitCode != 137 || st.Running {
		t.Errorf("Wait = %+v, %v; want OOMKilled 137", st, err)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Errorf("second remove: %v", err)
	}
	if _, err := e.Inspect(ctx, id); !errors.Is(err, engine.ErrNoSuchContainer) {
		t.Errorf("inspect after remove: %v", err)
	}

	s := testSpec(t)
	s.Name = "arizuko-main-1700000000009"
	id, err = e.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		setStatus(corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "image not present"}}}}})
	}()
	err = e.Start(ctx, id)
	if !errors.Is(err, engine.ErrCreate) || !errors.Is(err, engine.ErrNoSuchImage) {
		t.Errorf("start without the image: %v, want ErrCreate and ErrNoSuchImage", err)
	}
}

// TestWaitDeleted: a Pod stopped (deleted) ends Wait, not running.
func TestWaitDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, _ := testEngine(t, Config{})
	id, err := e.Create(ctx, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		e.Stop(ctx, id, time.Second)
	}()
	st, err := e.Wait(ctx, id)
	if err != nil || st.Running || st.Status != "deleted" {
		t.Errorf("Wait = %+v, %v; want deleted", st, err)
	}
}

// TestSignal: SIGUSR1 (steering) is unsupported, SIGKILL deletes.
func TestSignal(t *testing.T) {
	ctx := context.Background()
	e, _ := testEngine(t, Config{})
	id, err := e.Create(ctx, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(ctx, id, "SIGUSR1"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("SIGUSR1: %v, want ErrUnsupported", err)
	}
	if err := e.Signal(ctx, id, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Inspect(ctx, id); !errors.Is(err, engine.ErrNoSuchContainer) {
		t.Errorf("after SIGKILL: %v, want gone", err)
	}
}

// TestImages: the nodes' status.images, by the names the node gives them.
func TestImages(t *testing.T) {
	ctx := context.Background()
	e, client := testEngine(t, Config{})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "localhost"}, Status: corev1.NodeStatus{Images: []corev1.ContainerImage{
		{Names: []string{"localhost/arizuko-agent@sha256:aaa", "localhost/arizuko-agent:abc"}, SizeBytes: 1},
		{Names: []string{"docker.io/library/busybox:latest"}, SizeBytes: 1},
	}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]bool{"localhost/arizuko-agent:abc": true, "busybox": true, "localhost/arizuko-agent": false, "localhost/arizuko-agent:def": false} {
		if got, err := e.ImageExists(ctx, ref); err != nil || got != want {
			t.Errorf("ImageExists(%s) = %v, %v; want %v", ref, got, err, want)
		}
	}
	if id, err := e.ImageID(ctx, "localhost/arizuko-agent:abc"); err != nil || id != "sha256:aaa" {
		t.Errorf("ImageID = %q, %v", id, err)
	}
	if err := e.ImportImage(ctx, "x", strings.NewReader(""), nil); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "ctr -n k8s.io images import") {
		t.Errorf("ImportImage: %v", err)
	}
}

// TestInfo: the pids limit is a promise only with the nodes' podPidsLimit declared.
func TestInfo(t *testing.T) {
	for _, pids := range []int64{512, -1} {
		e, _ := testEngine(t, Config{PodPidsLimit: pids})
		info, err := e.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.Name != "kubernetes" || (info.NoLimits == "") != (pids > 0) {
			t.Errorf("pids %d: %+v", pids, info)
		}
		if err := info.CheckLimits(false); (err != nil) == (pids > 0) {
			t.Errorf("pids %d: CheckLimits = %v", pids, err)
		}
	}
}

// TestTail: the end marker is the output's last line, or the stream did not end whole.
func TestTail(t *testing.T) {
	for out, want := range map[string]bool{
		"x\n" + contract.StartMarker + "\n{}\n" + contract.EndMarker + "\n": true,
		contract.EndMarker + "\n":               true,
		"x\n" + contract.EndMarker + "\nmore\n": false,
		"x" + contract.EndMarker + "\n":         false,
		"":                                      false,
	} {
		tw := &tailWriter{w: discard{}}
		for _, b := range []byte(out) {
			tw.Write([]byte{b})
		}
		if got := tw.endsWithMarker(); got != want {
			t.Errorf("%q: %v, want %v", out, got, want)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestCheck: doctor's questions to the cluster: a permission the account lacks is named
// with what it is for, the RuntimeClass and the nodes' runtimes are reported, fake nodes
// skipped, and the gaps named.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	e, client := testEngine(t, Config{})
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview)
		ra := r.Spec.ResourceAttributes
		r.Status.Allowed = !(ra.Verb == "patch" && ra.Resource == "pods") && ra.Subresource != "proxy" && (ra.Namespace == DefaultNamespace || ra.Namespace == "" && ra.Resource != "pods")
		return true, r, nil
	})
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", ContainerRuntimeVersion: "containerd://1.6.20"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kwok-0", Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}},
	} {
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	probe, err := e.PodFor(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := e.Check(ctx, probe)
	if err == nil || !strings.Contains(err.Error(), "may not patch pods (mark a Pod started") || strings.Contains(err.Error(), "create pods/attach") {
		t.Errorf("err = %v, want only patch pods denied", err)
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{"RuntimeClass arizuko-nonet (handler runc-nonet)", "node node-1: kubelet v1.37.2, containerd://1.6.20: Pods share the node's user namespace",
		"1 fake (kwok) nodes not checked", "podPidsLimit is not verified", "rlimits", "steering"} {
		if !strings.Contains(all, want) {
			t.Errorf("report lacks %q:\n%s", want, all)
		}
	}
}

// TestStartTimeout: a Pod that never runs fails Start with what it waits for.
func TestStartTimeout(t *testing.T) {
	defer func(d time.Duration) { startTimeout = d }(startTimeout)
	startTimeout = 300 * time.Millisecond
	ctx := context.Background()
	e, client := testEngine(t, Config{})
	id, err := e.Create(ctx, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := client.CoreV1().Pods(DefaultNamespace).Get(ctx, id, metav1.GetOptions{})
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/101 nodes are available: 1 Insufficient memory"}}}
	if _, err := client.CoreV1().Pods(DefaultNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = e.Start(ctx, id)
	if err == nil || !strings.Contains(err.Error(), "does not run after 300ms: PodScheduled Unschedulable: 0/101 nodes are available") {
		t.Errorf("Start = %v", err)
	}
}
