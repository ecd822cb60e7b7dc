// Package daemontest runs the real arizukod in tests: it builds the binary once per test
// process, writes a configuration over a fresh directory in $TMPDIR (else /tmp), starts
// `arizukod serve` as a subprocess on a real engine of the test host (or its Kubernetes
// cluster, kube.go), talks to it over its unix socket and, at cleanup, stops it and checks
// that no container (Pod) of its instance is left.
//
// It owns only the daemons it starts, their directories, the private Podman services it
// starts (podman.go) and the service account tokens it asks for. It must not stop, restart
// or reconfigure the test host's engines, cluster, journald or systemd manager.
package daemontest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/store"
)

// Tags are the build tags of the Podman bindings (hack/env.sh sets the same in GOFLAGS).
const Tags = "remote,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper,containers_image_openpgp"

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// Binary builds cmd/arizukod once per test process and returns its path, in a directory
// every user may read and execute (a systemd unit or another user runs it too).
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "arizukod-bin-")
		if buildErr != nil {
			return
		}
		if buildErr = os.Chmod(binDir, 0o755); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "arizukod")
		cmd := exec.Command("go", "build", "-trimpath", "-tags", Tags, "-o", binPath, "github.com/arizuko/arizukod/cmd/arizukod")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build arizukod (GOFLAGS=%q): %v\n%s", os.Getenv("GOFLAGS"), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// RemoveBinary removes what Binary built; TestMain calls it after the tests.
func RemoveBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// Podman4 returns the test host's rootful Podman 4.3 engine, failing or skipping the test
// as enginetest.Missing does when it is not there.
func Podman4(t testing.TB) enginetest.Engine {
	t.Helper()
	uri := os.Getenv("ARIZUKO_TEST_PODMAN4")
	if uri == "" {
		enginetest.Missing(t, "engine podman4: ARIZUKO_TEST_PODMAN4 is not set")
	}
	return enginetest.Engine{Name: "podman4", Kind: "podman", URI: uri}
}

// RandHex returns n random bytes as hex, for names that must not collide between runs.
func RandHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Config is what a test chooses of a daemon's configuration; zero fields take the defaults
// noted.
type Config struct {
	Engine       enginetest.Engine // required
	RunTimeout   string            // "2m"
	StopGrace    string            // "1s"
	MaxRunning   int               // 5
	RetryMax     int               // 2
	RetryBackoff string            // "1s"
	SocketMode   string            // "0660"
	// EnvFile, when not empty, is written as the service's credentials env file.
	EnvFile string
	// Env is added to the daemon's environment (after the variables that would change its
	// behaviour behind the configuration's back are removed).
	Env []string
	// TOML is appended to the daemon's configuration file (tables such as [model]).
	TOML string
	// Claude makes the daemon run the Claude Code image (built once per engine) instead
	// of the example agent.
	Claude bool
	// Image, when set, is the daemon's image in place of the example agent's or Claude's
	// (a test's own tag of one of them, which it may replace).
	Image string
	// Kube, when set, is the daemon's engine: the test host's cluster (kube.go). Engine is
	// then the Podman its image is built on and imported from. TOML must not have
	// [kubernetes] or [limits], which the daemon's configuration then has.
	Kube *enginetest.Kube
	// KubeConf is, with Kube, how the daemon is on the cluster; the zero value is the
	// admin kubeconfig, the default namespace and the Pods mounting its own IPC directories.
	KubeConf KubeConf
}

// Daemon is one arizukod of a test, over its own directory.
type Daemon struct {
	Config
	Dir        string // the test's directory in $TMPDIR, mode 0755
	DataDir    string
	Socket     string
	ConfigPath string
	Instance   string // the io.arizuko.instance label of its containers
	Bin        string
	Eng        engine.Engine
	Client     *apiwire.Client
	StderrLog  string // the daemon's stderr (journald has its log while it runs)

	t        testing.TB
	image    string
	kubePids int64 // the cluster's podPidsLimit, with Kube
	cmd      *exec.Cmd
	exited   chan struct{}
	pids     []int // every arizukod process it started, for the failure output
}

// New prepares a daemon on cfg.Engine, with the example agent imported there, without
// starting it. Cleanup stops it if it runs (after letting its runs end), fails the test for
// every container of its instance still there (and removes them), prints its logs when the
// test failed, and removes its directory.
func New(t testing.TB, cfg Config) *Daemon {
	t.Helper()
	bin := Binary(t)
	eng, _ := cfg.Engine.Open(t)
	image := enginetest.EnsureAgentImage(t, cfg.Engine, eng)
	if cfg.Claude {
		image = enginetest.EnsureClaudeImage(t, cfg.Engine, eng)
	}
	if cfg.Image != "" {
		image = cfg.Image
	}
	dir, err := os.MkdirTemp("", "arizuko-dt-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{
		Config: cfg, Dir: dir, DataDir: filepath.Join(dir, "data"), Socket: filepath.Join(dir, "api.sock"),
		ConfigPath: filepath.Join(dir, "arizukod.toml"), Instance: "test-" + RandHex(6), Bin: bin, Eng: eng,
		t: t, StderrLog: filepath.Join(dir, "stderr.log"), image: image,
	}
	d.Client = apiwire.NewClient(d.Socket)
	if cfg.Kube != nil {
		d.kubePids = cfg.Kube.PodPidsLimit(t)
		d.Eng = openKube(t, *cfg.Kube, cfg.Engine, image, d.kubePids, cfg.KubeConf.Namespace)
	}
	if err := copyTree(filepath.Join(repoRoot(t), "container", "skills"), filepath.Join(dir, "skills")); err != nil {
		t.Fatal(err)
	}
	if cfg.EnvFile != "" {
		if err := os.WriteFile(filepath.Join(dir, "env"), []byte(cfg.EnvFile), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(d.ConfigPath, []byte(d.toml()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.cleanup)
	return d
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (d *Daemon) toml() string {
	maxRunning := d.MaxRunning
	if maxRunning == 0 {
		maxRunning = 5
	}
	retryMax := d.RetryMax
	if retryMax == 0 {
		retryMax = 2
	}
	lines := []string{
		"# Written by internal/daemontest for one test.",
		fmt.Sprintf("data_dir = %q", d.DataDir),
		fmt.Sprintf("listen = %q", d.Socket),
		fmt.Sprintf("socket_mode = %q", or(d.SocketMode, "0660")),
		fmt.Sprintf("image = %q", d.image),
		fmt.Sprintf("run_timeout = %q", or(d.RunTimeout, "2m")),
		fmt.Sprintf("stop_grace = %q", or(d.StopGrace, "1s")),
		fmt.Sprintf("max_running = %d", maxRunning),
		fmt.Sprintf("retry_max = %d", retryMax),
		fmt.Sprintf("retry_backoff = %q", or(d.RetryBackoff, "1s")),
		fmt.Sprintf("skills_dir = %q", filepath.Join(d.Dir, "skills")),
		fmt.Sprintf("env_file = %q", filepath.Join(d.Dir, "env")),
		fmt.Sprintf("allowlist = %q", filepath.Join(d.Dir, "mount-allowlist.json")),
		fmt.Sprintf("instance = %q", d.Instance),
		`timezone = "UTC"`,
	}
	if d.Kube != nil {
		lines = append(lines, d.kubeTOML())
	} else {
		lines = append(lines, fmt.Sprintf("engine = %q", d.Engine.Kind), fmt.Sprintf("engine_socket = %q", d.Engine.URI))
	}
	lines = append(lines, d.Config.TOML)
	return strings.Join(lines, "\n") + "\n"
}

// repoRoot is the module's root, found from the test's working directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !e.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// Env is the environment the daemon gets: the test's, without what would change the
// daemon's behaviour behind its configuration (systemd's variables, the seed's overrides),
// plus Config.Env.
func (d *Daemon) Env() []string {
	drop := []string{"NOTIFY_SOCKET", "LISTEN_", "WATCHDOG_", "INVOCATION_ID", "DATA_DIR=", "CONTAINER_IMAGE=",
		"RUNED_RUN_TIMEOUT=", "LISTEN_ADDR=", "ARIZUKO_MODE=", "CONTAINER_HOST=", "DOCKER_HOST=",
		"ARIZUKO_MODEL_UPSTREAM=", "ANTHROPIC_API_KEY=", "CLAUDE_CODE_OAUTH_TOKEN=", "CREDENTIALS_DIRECTORY="}
	var env []string
	for _, kv := range os.Environ() {
		keep := true
		for _, p := range drop {
			if strings.HasPrefix(kv, p) {
				keep = false
			}
		}
		if keep {
			env = append(env, kv)
		}
	}
	return append(env, d.Config.Env...)
}

// Start starts `arizukod serve --config FILE` and waits until /health says ok.
func (d *Daemon) Start(t testing.TB) {
	t.Helper()
	d.StartWith(t, nil, nil)
	d.WaitHealthy(t, 30*time.Second)
}

// StartWith starts prefix... arizukod serve --config FILE with env (nil: Env()) and returns
// at once. The command's stderr goes to the daemon's stderr log.
func (d *Daemon) StartWith(t testing.TB, prefix []string, env []string) {
	t.Helper()
	if d.cmd != nil {
		t.Fatal("daemontest: the daemon is already running")
	}
	args := append(append([]string{}, prefix...), d.Bin, "serve", "--config", d.ConfigPath)
	cmd := exec.Command(args[0], args[1:]...)
	if env == nil {
		env = d.Env()
	}
	cmd.Env = env
	f, err := os.OpenFile(d.StderrLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("start arizukod: %v", err)
	}
	d.cmd, d.exited = cmd, make(chan struct{})
	d.pids = append(d.pids, cmd.Process.Pid)
	pidStarts.Store(cmd.Process.Pid, time.Now())
	go func(c *exec.Cmd, done chan struct{}) { c.Wait(); close(done) }(cmd, d.exited)
}

// Pid is the running daemon's process id (0 when none runs).
func (d *Daemon) Pid() int {
	if d.cmd == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// Running reports whether the process Start started is still there.
func (d *Daemon) Running() bool {
	if d.cmd == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// WaitHealthy polls GET /health until it answers 200 ok with the engine's details known.
func (d *Daemon) WaitHealthy(t testing.TB, timeout time.Duration) apiwire.HealthReport {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if d.cmd != nil && !d.Running() {
			t.Fatalf("arizukod exited during start: %s\n%s", d.cmd.ProcessState, d.Output())
		}
		h, code, err := d.Health()
		if err == nil && code == http.StatusOK && h.Status == "ok" && h.Engine.Limits != apiwire.LimitsPending {
			return h
		}
		last = fmt.Sprintf("HTTP %d %+v %v", code, h, err)
		if time.Now().After(deadline) {
			t.Fatalf("arizukod not healthy after %s: %s\n%s", timeout, last, d.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Health asks GET /health and returns the report and the HTTP status.
func (d *Daemon) Health() (apiwire.HealthReport, int, error) {
	var h apiwire.HealthReport
	code, body, err := d.Do(http.MethodGet, "/health", "", nil)
	if err != nil {
		return h, code, err
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return h, code, fmt.Errorf("health %q: %w", body, err)
	}
	return h, code, nil
}

// Do sends one raw request over the socket and returns the status and the body.
func (d *Daemon) Do(method, path, contentType string, body []byte) (int, []byte, error) {
	return Do(d.Socket, method, path, contentType, body)
}

// Do sends one raw request to the API at socket.
func Do(socket, method, path, contentType string, body []byte) (int, []byte, error) {
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", socket)
		}, DisableKeepAlives: true}}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://arizukod"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Stop sends SIGTERM and waits for the daemon to exit.
func (d *Daemon) Stop(t testing.TB) {
	t.Helper()
	d.signal(t, syscall.SIGTERM, 30*time.Second)
}

// Kill sends SIGKILL and waits for the daemon to be gone.
func (d *Daemon) Kill(t testing.TB) {
	t.Helper()
	d.signal(t, syscall.SIGKILL, 10*time.Second)
}

func (d *Daemon) signal(t testing.TB, sig syscall.Signal, wait time.Duration) {
	t.Helper()
	if d.cmd == nil {
		return
	}
	d.cmd.Process.Signal(sig)
	select {
	case <-d.exited:
	case <-time.After(wait):
		d.cmd.Process.Kill()
		<-d.exited
		t.Errorf("arizukod did not exit within %s of %v", wait, sig)
	}
	d.cmd = nil
}

// AddGroup registers folder.
func (d *Daemon) AddGroup(t testing.TB, folder string) {
	t.Helper()
	var g apiwire.Group
	if err := d.Client.Do(context.Background(), http.MethodPost, "/v1/groups", apiwire.PutGroupRequest{Folder: folder}, &g); err != nil {
		t.Fatalf("register group %s: %v", folder, err)
	}
}

// PutGroup registers folder with a container config (JSON).
func (d *Daemon) PutGroup(t testing.TB, folder, containerConfig string) {
	t.Helper()
	var g apiwire.Group
	req := apiwire.PutGroupRequest{Folder: folder, ContainerConfig: json.RawMessage(containerConfig)}
	if err := d.Client.Do(context.Background(), http.MethodPost, "/v1/groups", req, &g); err != nil {
		t.Fatalf("register group %s with %s: %v", folder, containerConfig, err)
	}
}

// Submit queues a turn of folder with one message.
func (d *Daemon) Submit(t testing.TB, folder, message string) apiwire.Run {
	t.Helper()
	r, err := d.Client.CreateRun(context.Background(), apiwire.CreateRunRequest{Folder: folder, Messages: []contract.Message{{Content: message}}})
	if err != nil {
		t.Fatalf("submit %q to %s: %v", message, folder, err)
	}
	return r
}

// Wait waits up to timeout for run id to end.
func (d *Daemon) Wait(t testing.TB, id string, timeout time.Duration) apiwire.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := d.Client.WaitRun(ctx, id)
	if err != nil {
		t.Fatalf("wait for run %s: %v (last seen %+v)", id, err, r)
	}
	return r
}

// Turn submits a turn and waits for it.
func (d *Daemon) Turn(t testing.TB, folder, message string) apiwire.Run {
	t.Helper()
	return d.Wait(t, d.Submit(t, folder, message).ID, 2*time.Minute)
}

// GetRun reads one run.
func (d *Daemon) GetRun(t testing.TB, id string) apiwire.Run {
	t.Helper()
	var r apiwire.Run
	if err := d.Client.Do(context.Background(), http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &r); err != nil {
		t.Fatalf("get run %s: %v", id, err)
	}
	return r
}

// WaitRunning polls run id until it runs in a container.
func (d *Daemon) WaitRunning(t testing.TB, id string, timeout time.Duration) apiwire.Run {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r := d.GetRun(t, id)
		if r.State == "running" && r.Container != "" {
			return r
		}
		if r.State != "queued" && r.State != "running" || time.Now().After(deadline) {
			t.Fatalf("run %s never ran: %+v", id, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Runs lists runs with a query such as "folder=main&state=exited".
func (d *Daemon) Runs(t testing.TB, query string) []apiwire.Run {
	t.Helper()
	var out struct {
		Runs []apiwire.Run `json:"runs"`
	}
	if err := d.Client.Do(context.Background(), http.MethodGet, "/v1/runs?"+query, nil, &out); err != nil {
		t.Fatalf("list runs ?%s: %v", query, err)
	}
	return out.Runs
}

// Drain waits until nothing is queued or running and no inbox message waits for a run
// that could start now (between a turn's end and the queue's next look at the inboxes,
// nothing is queued or running while a folder's next messages wait).
func (d *Daemon) Drain(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	st, err := store.Open(context.Background(), filepath.Join(d.DataDir, "arizukod.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	for {
		h, _, err := d.Health()
		if err == nil && h.Running == 0 && h.Queued == 0 {
			pending, perr := st.PendingFolders(context.Background())
			if perr == nil && len(pending) == 0 {
				return nil
			}
			err = errors.Join(perr, fmt.Errorf("inbox messages wait in %v", pending))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not drained after %s: %+v %v", timeout, h, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// OpenStore opens the daemon's database (running or not) for inspection; it is closed at
// cleanup.
func (d *Daemon) OpenStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(d.DataDir, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Leftovers lists the containers of this daemon's instance but those it prepared for a
// next turn and never started, and its warm agents: the containers of runs.
func (d *Daemon) Leftovers(t testing.TB) []engine.Container {
	t.Helper()
	var out []engine.Container
	for _, c := range d.Containers(t) {
		if c.Labels[engine.LabelPrepared] == "" || !Unstarted(c) && c.Labels[engine.LabelWarm] == "" {
			out = append(out, c)
		}
	}
	return out
}

// SettledLeftovers is Leftovers once the last removals had their moment: an answered
// turn's container is removed just after its result, so a test that has just drained the
// queue polls for up to 10 s before it judges what is left.
func (d *Daemon) SettledLeftovers(t testing.TB) []engine.Container {
	t.Helper()
	left := d.Leftovers(t)
	for end := time.Now().Add(10 * time.Second); len(left) > 0 && time.Now().Before(end); left = d.Leftovers(t) {
		time.Sleep(200 * time.Millisecond)
	}
	return left
}

// Unstarted says whether the engine lists c as never started.
func Unstarted(c engine.Container) bool {
	switch strings.ToLower(c.State) {
	case "created", "initialized", "configured":
		return true
	}
	return false
}

// Containers lists every container of this daemon's instance, the prepared ones too.
func (d *Daemon) Containers(t testing.TB) []engine.Container {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := d.Eng.List(ctx, map[string]string{engine.LabelInstance: d.Instance})
	if err != nil {
		t.Errorf("list containers of instance %s: %v", d.Instance, err)
	}
	return list
}

// Output is the daemon's stderr and its journal entries, for a failure message.
func (d *Daemon) Output() string {
	var b strings.Builder
	if s, err := os.ReadFile(d.StderrLog); err == nil && len(s) > 0 {
		fmt.Fprintf(&b, "-- arizukod stderr --\n%s", s)
	}
	for _, pid := range d.pids {
		entries, err := Journal(fmt.Sprintf("_PID=%d", pid))
		if err != nil || len(entries) == 0 {
			continue
		}
		fmt.Fprintf(&b, "-- journal of arizukod pid %d --\n", pid)
		for _, e := range entries {
			fmt.Fprintf(&b, "%s %s %s\n", e["PRIORITY"], e["MESSAGE"], e.Fields())
		}
	}
	return b.String()
}

// AddPid makes Output include the journal of a daemon started elsewhere (by systemd).
func (d *Daemon) AddPid(pid int) { d.pids = append(d.pids, pid) }

// pidStarts is when this test process started each daemon, by pid, and testStart when it
// started itself: journald keeps the entries of every earlier process that had a pid (pids
// wrap at 32768 on the test host, and its journal outlives a run), so Journal reads a
// match on _PID from that start on.
var (
	pidStarts sync.Map // int -> time.Time
	testStart = time.Now()
)

// journalSince is the journalctl argument that leaves out entries older than the process
// matches name by _PID: the start this process saw of the latest daemon with that pid, or
// this process's own start.
func journalSince(matches []string) []string {
	var since time.Time
	for _, m := range matches {
		v, ok := strings.CutPrefix(m, "_PID=")
		if !ok {
			continue
		}
		at := testStart
		if pid, err := strconv.Atoi(v); err == nil {
			if t, ok := pidStarts.Load(pid); ok {
				at = t.(time.Time)
			}
		}
		if at.After(since) {
			since = at
		}
	}
	if since.IsZero() {
		return nil
	}
	// Whole seconds, one before: journalctl's "@" takes seconds since the epoch.
	return []string{fmt.Sprintf("--since=@%d", since.Unix()-1)}
}

func (d *Daemon) cleanup() {
	t := d.t
	if d.Running() {
		if err := d.Drain(60 * time.Second); err != nil {
			t.Errorf("at cleanup: %v", err)
		}
		d.Stop(t)
	}
	for _, c := range d.Containers(t) {
		t.Errorf("container %s (%s) of instance %s left behind", c.Name, c.State, d.Instance)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		d.Eng.Remove(ctx, c.ID)
		cancel()
	}
	if t.Failed() {
		t.Logf("daemon output:\n%s", d.Output())
	}
	os.RemoveAll(d.Dir)
}

// Entry is one journal entry, every field as text.
type Entry map[string]string

// Fields prints the entry's ARIZUKO_* fields, sorted.
func (e Entry) Fields() string {
	var keys []string
	for k := range e {
		if strings.HasPrefix(k, "ARIZUKO_") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+e[k])
	}
	return strings.Join(parts, " ")
}

// JournalOn reports whether the test host's journald is there to read, and fails or skips
// the test as enginetest.Missing does when it is not.
func JournalOn(t testing.TB) {
	t.Helper()
	if os.Getenv("ARIZUKO_TEST_JOURNALD") != "1" {
		enginetest.Missing(t, "ARIZUKO_TEST_JOURNALD is not set: no journald")
	}
	if _, err := exec.LookPath("journalctl"); err != nil {
		enginetest.Missing(t, "journalctl: %v", err)
	}
}

// Journal reads the journal entries matching every match (FIELD=VALUE), oldest first.
func Journal(matches ...string) ([]Entry, error) {
	args := append(append([]string{"-o", "json", "--no-pager", "--all"}, journalSince(matches)...), matches...)
	out, err := exec.Command("journalctl", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("journalctl %s: %v: %s", strings.Join(matches, " "), err, ee.Stderr)
		}
		return nil, fmt.Errorf("journalctl: %w", err)
	}
	var entries []Entry
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var raw map[string]json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("journalctl output: %w", err)
		}
		e := Entry{}
		for k, v := range raw {
			var s string
			if json.Unmarshal(v, &s) == nil {
				e[k] = s
				continue
			}
			var ints []int
			if json.Unmarshal(v, &ints) == nil {
				b := make([]byte, len(ints))
				for i, n := range ints {
					b[i] = byte(n)
				}
				e[k] = string(b)
			}
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// WaitJournal polls the journal (up to timeout) until done accepts the entries matching
// matches, and returns them; it fails the test with what it saw otherwise.
func WaitJournal(t testing.TB, timeout time.Duration, done func([]Entry) bool, matches ...string) []Entry {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		entries, err := Journal(matches...)
		if err != nil {
			t.Fatal(err)
		}
		if done(entries) {
			return entries
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, e := range entries {
				fmt.Fprintf(&b, "  %s %s\n", e["MESSAGE"], e.Fields())
			}
			t.Fatalf("journal %s: not there after %s; saw %d entries:\n%s", strings.Join(matches, " "), timeout, len(entries), b.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// HasMessage is a WaitJournal condition: an entry whose MESSAGE is msg.
func HasMessage(msg string) func([]Entry) bool {
	return func(es []Entry) bool { return Find(es, msg) != nil }
}

// Find returns the first entry whose MESSAGE is msg, or nil.
func Find(es []Entry, msg string) Entry {
	for _, e := range es {
		if e["MESSAGE"] == msg {
			return e
		}
	}
	return nil
}

// AppendInbox posts messages to folder's inbox and returns their ids.
func (d *Daemon) AppendInbox(t testing.TB, folder string, msgs ...string) []int64 {
	t.Helper()
	req := apiwire.InboxRequest{}
	for _, m := range msgs {
		req.Messages = append(req.Messages, contract.Message{Content: m})
	}
	var out struct {
		IDs []int64 `json:"ids"`
	}
	if err := d.Client.Do(context.Background(), http.MethodPost, "/v1/groups/"+url.PathEscape(folder)+"/messages", req, &out); err != nil {
		t.Fatalf("append to the inbox of %s: %v", folder, err)
	}
	if len(out.IDs) != len(msgs) {
		t.Fatalf("inbox ids %v for %d messages", out.IDs, len(msgs))
	}
	return out.IDs
}

// WaitContainerRunning waits until the engine says the container runs (a run's state says
// running from before its container starts).
func (d *Daemon) WaitContainerRunning(t testing.TB, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := d.Eng.Inspect(ctx, name)
		cancel()
		if err == nil && st.Running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s not running after 20s: %+v %v", name, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FileState is a file's mode, size and content's SHA-256, or why it cannot be read: what
// a hostile agent must not change of a file of the host.
func FileState(p string) string {
	fi, err := os.Lstat(p)
	if err != nil {
		return err.Error()
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%v size=%d sha256=%x", fi.Mode(), fi.Size(), sha256.Sum256(b))
}
