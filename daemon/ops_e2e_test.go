package daemon_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/fakemodel"
	"github.com/arizuko/arizukod/retention"
	"github.com/arizuko/arizukod/store"
)

// metricsOf scrapes GET /metrics on the API socket and returns each sample's value.
func metricsOf(t *testing.T, d *daemontest.Daemon) map[string]float64 {
	t.Helper()
	code, body, err := d.Do(http.MethodGet, "/metrics", "", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s %v", code, body, err)
	}
	return parseMetrics(t, string(body))
}

func parseMetrics(t *testing.T, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("not a sample: %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// freePort is a loopback port nobody listens on as it returns.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// steer sends the awaiting turn run its SIGUSR1.
func steer(t *testing.T, d *daemontest.Daemon, id string) {
	t.Helper()
	code, body, err := d.Do(http.MethodPost, "/v1/runs/"+id+"/steer", "application/json", []byte(`{"messages":[{"content":"go"}]}`))
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("steer %s: %d %s %v", id, code, body, err)
	}
}

// awaiting waits until the run's agent waits for its steer.
func awaiting(t *testing.T, id string) {
	t.Helper()
	daemontest.WaitJournal(t, time.Minute, daemontest.HasMessage("await: waiting for SIGUSR1"), "ARIZUKO_RUN_ID="+id)
}

// TestMetricsDuringTurn scrapes a real daemon while a turn runs on a real engine: the turn
// shows as running, then as counted by its status, with its duration and model tokens; the
// loopback listener serves the same metrics and nothing else.
func TestMetricsDuringTurn(t *testing.T) {
	daemontest.JournalOn(t)
	e := daemontest.Podman4(t)
	fake := fakemodel.Start()
	defer fake.Close()
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Text: "echo: " + r.LastUserText(), InputTokens: 7, OutputTokens: 5}
	}
	addr := freePort(t)
	d := daemontest.New(t, daemontest.Config{Engine: e,
		EnvFile: "ANTHROPIC_API_KEY=sk-ant-test-" + daemontest.RandHex(16) + "\n",
		TOML:    fmt.Sprintf("[model]\nupstream = %q\n[metrics]\nlisten = %q\n", fake.URL, addr)})
	d.Start(t)
	d.AddGroup(t, "main")

	before := metricsOf(t, d)
	if before["arizukod_runs_running"] != 0 || before[`arizukod_turns_total{status="ok",failure="none"}`] != 0 {
		t.Fatalf("an idle daemon's metrics: %v", before)
	}
	run := d.Submit(t, "main", "await model hello")
	d.WaitRunning(t, run.ID, 30*time.Second)
	awaiting(t, run.ID)
	during := metricsOf(t, d)
	if during["arizukod_runs_running"] != 1 || during[`arizukod_turns_total{status="ok",failure="none"}`] != 0 {
		t.Errorf("during the turn: running %v, ok turns %v", during["arizukod_runs_running"], during[`arizukod_turns_total{status="ok",failure="none"}`])
	}
	steer(t, d, run.ID)
	if r := d.Wait(t, run.ID, 2*time.Minute); r.Status != "ok" {
		t.Fatalf("turn: %+v", r)
	}
	after := metricsOf(t, d)
	for name, want := range map[string]float64{
		"arizukod_runs_running":                                        0,
		"arizukod_runs_queued":                                         0,
		`arizukod_turns_total{status="ok",failure="none"}`:             1,
		`arizukod_turn_duration_seconds_count{status="ok"}`:            1,
		`arizukod_turn_duration_seconds_bucket{status="ok",le="+Inf"}`: 1,
		"arizukod_model_requests_total":                                1,
		`arizukod_model_tokens_total{kind="input"}`:                    7,
		`arizukod_model_tokens_total{kind="output"}`:                   5,
	} {
		if got, ok := after[name]; !ok || got != want {
			t.Errorf("after the turn: %s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if after[`arizukod_turn_duration_seconds_sum{status="ok"}`] <= 0 {
		t.Errorf("the turn's duration is not counted: %v", after)
	}
	// A failed turn is counted by its failure class.
	if r := d.Turn(t, "main", "fatal on purpose"); r.Status != "fatal" {
		t.Fatalf("fatal turn: %+v", r)
	}
	failed := metricsOf(t, d)
	var fatal float64
	for k, v := range failed {
		if strings.HasPrefix(k, `arizukod_turns_total{status="fatal"`) {
			fatal += v
		}
	}
	if fatal != 1 || failed[`arizukod_turns_total{status="ok",failure="none"}`] != 1 {
		t.Errorf("after a fatal turn: %v", failed)
	}

	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if tcp := parseMetrics(t, string(b)); tcp[`arizukod_turns_total{status="ok",failure="none"}`] != 1 {
		t.Errorf("the loopback listener's metrics: %v", tcp)
	}
	if resp, err := http.Get("http://" + addr + "/v1/runs"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("the loopback listener serves the API: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// notifications collects what the daemon tells systemd on a NOTIFY_SOCKET of the test's.
type notifications struct {
	path string
	mu   sync.Mutex
	msgs []string
}

func listenNotify(t *testing.T) *notifications {
	t.Helper()
	n := &notifications{path: filepath.Join(t.TempDir(), "notify.sock")}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.msgs = append(n.msgs, string(buf[:k]))
			n.mu.Unlock()
		}
	}()
	return n
}

// since returns the messages after the first k, and how many there are now.
func (n *notifications) since(k int) ([]string, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.msgs[k:]...), len(n.msgs)
}

// TestReloadUnderLoad reloads the configuration while turns run and wait: nothing is
// dropped, a new limit applies to the turns started after the reload (seen from inside the
// container), a key that needs a restart is named, and a bad configuration is refused
// with its key and file while the previous one stays.
func TestReloadUnderLoad(t *testing.T) {
	daemontest.JournalOn(t)
	e := daemontest.Podman4(t)
	notify := listenNotify(t)
	d := daemontest.New(t, daemontest.Config{Engine: e, MaxRunning: 2, Env: []string{"NOTIFY_SOCKET=" + notify.path}})
	d.Start(t)
	for _, f := range []string{"a", "b", "c"} {
		d.AddGroup(t, f)
	}
	ra := d.Submit(t, "a", "await reply a done")
	rb := d.Submit(t, "b", "await reply b done")
	awaiting(t, ra.ID)
	awaiting(t, rb.ID)
	queued := []string{d.Submit(t, "a", "reply a queued").ID, d.Submit(t, "c", "sandbox").ID}
	if h, _, err := d.Health(); err != nil || h.Running != 2 || h.Queued != 2 {
		t.Fatalf("before the reload: %+v %v", h, err)
	}

	good, err := os.ReadFile(d.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	pid := "_PID=" + strconv.Itoa(d.Pid())
	reloaded := strings.Replace(string(good), "max_running = 2", "max_running = 4", 1) + "[limits]\nmemory = \"300m\"\n"
	if err := os.WriteFile(d.ConfigPath, []byte(reloaded), 0o644); err != nil {
		t.Fatal(err)
	}
	_, mark := notify.since(0)
	syscall.Kill(d.Pid(), syscall.SIGHUP)
	es := daemontest.WaitJournal(t, 30*time.Second, daemontest.HasMessage("configuration reloaded"), pid)
	if e := daemontest.Find(es, "configuration reloaded"); !strings.Contains(e["CHANGED"], "limits") {
		t.Errorf("reloaded: changed %q, want limits", e["CHANGED"])
	}
	if daemontest.Find(es, "reload: max_running changed: it takes effect at the next restart (systemctl restart arizukod)") == nil {
		t.Error("a change of max_running is not named as needing a restart")
	}

	// systemd >= 253 waits between RELOADING=1 (with the monotonic time) and READY=1.
	waitNotify(t, notify, mark, "READY=1")
	msgs, mark := notify.since(mark)
	if len(msgs) == 0 || !regexp.MustCompile(`^RELOADING=1\nMONOTONIC_USEC=[0-9]+$`).MatchString(msgs[0]) {
		t.Errorf("the reload's notifications %q do not start with RELOADING=1 and MONOTONIC_USEC", msgs)
	}

	bad := reloaded + "[retention]\nmax_age = \"1d\"\n"
	if err := os.WriteFile(d.ConfigPath, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(d.Pid(), syscall.SIGHUP)
	es = daemontest.WaitJournal(t, 30*time.Second, daemontest.HasMessage("reload refused: the previous configuration stays"), pid)
	refused := daemontest.Find(es, "reload refused: the previous configuration stays")
	if !strings.Contains(refused["ERR"], d.ConfigPath) || !strings.Contains(refused["ERR"], "retention.max_age: unknown key") {
		t.Errorf("refused with %q, want the file and the key", refused["ERR"])
	}
	if h, _, err := d.Health(); err != nil || h.Status != "ok" || h.Running != 2 {
		t.Fatalf("after the refused reload: %+v %v", h, err)
	}
	waitNotify(t, notify, mark, "READY=1")
	msgs, _ = notify.since(mark)
	if !slices.ContainsFunc(msgs, func(m string) bool {
		return strings.HasPrefix(m, "STATUS=") && strings.Contains(m, "reload refused, running with the previous configuration: ") && strings.Contains(m, "retention.max_age")
	}) {
		t.Errorf("STATUS does not say the reload was refused: %q", msgs)
	}

	steer(t, d, ra.ID)
	steer(t, d, rb.ID)
	for _, id := range append([]string{ra.ID, rb.ID}, queued...) {
		if r := d.Wait(t, id, 2*time.Minute); r.State != "exited" || r.Status != "ok" {
			t.Errorf("run %s after the reloads: %+v", id, r)
		}
	}
	// The queued sandbox turn started after the good reload: 300m from inside its container.
	var sb struct {
		Cgroup map[string]string `json:"cgroup"`
	}
	if err := json.Unmarshal([]byte(d.GetRun(t, queued[1]).Result), &sb); err != nil {
		t.Fatal(err)
	}
	if got := sb.Cgroup["memory"]; got != strconv.Itoa(300<<20) {
		t.Errorf("memory limit inside a turn started after the reload: %q, want %d", got, 300<<20)
	}
	if runs := d.Runs(t, ""); len(runs) != 4 {
		t.Errorf("%d runs, want the 4 submitted", len(runs))
	}
}

// waitNotify waits for a message want after the first k.
func waitNotify(t *testing.T, n *notifications, k int, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		msgs, _ := n.since(k)
		if slices.Contains(msgs, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q among %q", want, msgs)
		}
	}
}

// TestRetentionAndBackup prunes a real daemon's store and run logs by its rules through
// `arizukod prune`, keeping a running turn (which then ends normally), and backs the store
// up with `arizukod backup`: the copy opens as a database with the same rows.
func TestRetentionAndBackup(t *testing.T) {
	daemontest.JournalOn(t)
	e := daemontest.Podman4(t)
	d := daemontest.New(t, daemontest.Config{Engine: e,
		TOML: "[retention]\ninterval = \"0\"\nruns_max_count = 2\nlogs_max_count = 1\n"})
	d.Start(t)
	d.AddGroup(t, "main")
	var done []string
	for i := range 3 {
		r := d.Turn(t, "main", fmt.Sprintf("reply %d", i))
		if r.Status != "ok" {
			t.Fatalf("turn %d: %+v", i, r)
		}
		done = append(done, r.ID)
	}
	running := d.Submit(t, "main", "await reply still here")
	awaiting(t, running.ID)

	cli := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(d.Bin, append(args, "--socket", d.Socket)...)
		cmd.Env = d.Env()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("arizukod %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	var dry, rep retention.Report
	if err := json.Unmarshal(cli("prune", "--dry-run", "--json"), &dry); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(cli("prune", "--json"), &rep); err != nil {
		t.Fatal(err)
	}
	// The newest two runs are the running one and the last finished one; three logs, one kept.
	if !dry.DryRun || dry.Runs != 2 || dry.Logs != 2 || rep.Runs != 2 || rep.Logs != 2 || len(rep.LogErrors) > 0 {
		t.Errorf("dry run %+v, prune %+v; want 2 runs and 2 logs", dry, rep)
	}
	runs := d.Runs(t, "")
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	if len(ids) != 2 || !strings.Contains(strings.Join(ids, " "), running.ID) || !strings.Contains(strings.Join(ids, " "), done[2]) {
		t.Errorf("runs kept %v, want %s (running) and %s", ids, running.ID, done[2])
	}
	logs, _ := filepath.Glob(filepath.Join(d.DataDir, "groups", "main", "logs", "container-*.log"))
	if len(logs) != 1 {
		t.Errorf("run logs kept: %v", logs)
	}
	steer(t, d, running.ID)
	if r := d.Wait(t, running.ID, 2*time.Minute); r.Status != "ok" || !strings.Contains(r.Result, "still here") {
		t.Errorf("the turn running through the pruning: %+v", r)
	}

	backup := filepath.Join(d.Dir, "backup.db")
	var res struct {
		File   string `json:"file"`
		Bytes  int64  `json:"bytes"`
		Direct bool   `json:"direct"`
	}
	if err := json.Unmarshal(cli("backup", "--json", backup), &res); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(backup)
	if err != nil || res.File != backup || res.Bytes != fi.Size() || res.Direct {
		t.Fatalf("backup %+v, file %v %v", res, fi, err)
	}
	if err := store.Verify(context.Background(), backup); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+backup+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	var result string
	if err := db.QueryRow(`SELECT COUNT(*) FROM runs`).Scan(&n); err != nil || n != 2 {
		t.Errorf("the backup has %d runs (%v), want 2", n, err)
	}
	if err := db.QueryRow(`SELECT result FROM runs WHERE id = ?`, running.ID).Scan(&result); err != nil || result != d.GetRun(t, running.ID).Result {
		t.Errorf("the backup's run %s: %q, %v", running.ID, result, err)
	}
	left, _ := filepath.Glob(filepath.Join(d.Dir, ".backup.db.tmp-*"))
	daemonLeft, _ := filepath.Glob(filepath.Join(d.DataDir, "backup-*"))
	if len(left)+len(daemonLeft) > 0 {
		t.Errorf("temporary copies left behind: %v %v", left, daemonLeft)
	}
}
