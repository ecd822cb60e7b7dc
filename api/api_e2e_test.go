package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	daemontest.RemoveBinary()
	os.Exit(code)
}

// TestAPI drives a real arizukod on the test host's Podman 4 over its real unix socket:
// every route a client uses, with real containers of the example agent, then the peer
// check. The table of bad requests runs in process (TestBadInput).
func TestAPI(t *testing.T) {
	d := daemontest.New(t, daemontest.Config{Engine: daemontest.Podman4(t), SocketMode: "0666", RetryMax: 2, RetryBackoff: "1s",
		TOML: "[limits]\nallowed_networks = [\"" + allowedNetwork + "\"]"})
	start := time.Now()
	d.Start(t)
	t.Logf("daemon healthy %s after start", time.Since(start).Round(time.Millisecond))
	for _, f := range []string{"main", "kill", "steer", "sess", "inbox", "fatal", "misconf", "routed", "witness"} {
		d.AddGroup(t, f)
	}
	var finished apiwire.Run
	t.Run("turns", func(t *testing.T) {
		t.Run("run", func(t *testing.T) { t.Parallel(); finished = testRun(t, d) })
		t.Run("kill", func(t *testing.T) { t.Parallel(); testKill(t, d) })
		t.Run("steer", func(t *testing.T) { t.Parallel(); testSteer(t, d) })
		t.Run("session", func(t *testing.T) { t.Parallel(); testSession(t, d) })
		t.Run("inbox", func(t *testing.T) { t.Parallel(); testInbox(t, d) })
		t.Run("inbox-fatal", func(t *testing.T) { t.Parallel(); testInboxFatal(t, d) })
		t.Run("inbox-misconfig", func(t *testing.T) { t.Parallel(); testInboxMisconfig(t, d) })
	})
	if finished.ID == "" {
		t.Fatal("no finished run to use in the bad-input table")
	}
	t.Run("routes", func(t *testing.T) { testRoutes(t, d) })
	t.Run("networks", func(t *testing.T) { testNetworks(t, d) })
	t.Run("peer", func(t *testing.T) { testPeer(t, d) })
}

// testRun: POST /v1/runs answers 202 at once; GET ?wait= returns the agent's answer;
// the list filters by folder and state.
func testRun(t *testing.T, d *daemontest.Daemon) apiwire.Run {
	word := "hello-" + daemontest.RandHex(4)
	t0 := time.Now()
	code, body, err := d.Do(http.MethodPost, "/v1/runs", "application/json", []byte(`{"folder":"main","messages":[{"role":"user","content":"reply `+word+`"}]}`))
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("POST /v1/runs: %d %s %v", code, body, err)
	}
	accepted := time.Since(t0)
	var queued apiwire.Run
	if err := json.Unmarshal(body, &queued); err != nil || queued.ID == "" || queued.Folder != "main" || queued.Kind != "turn" {
		t.Fatalf("POST /v1/runs body %s: %v", body, err)
	}
	var run apiwire.Run
	if err := d.Client.Do(context.Background(), http.MethodGet, "/v1/runs/"+queued.ID+"?wait=60s", nil, &run); err != nil {
		t.Fatal(err)
	}
	t.Logf("run %s: 202 after %s, result after %s (container %s)", run.ID, accepted.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), run.Container)
	if run.State != "exited" || run.Status != "ok" || run.Result != word || run.ExitCode == nil || *run.ExitCode != 0 ||
		run.Container == "" || run.StartedAt == "" || run.EndedAt == "" || run.Attempt != 1 {
		t.Fatalf("finished run: %+v", run)
	}
	// A timeout is a Go duration or a number of milliseconds.
	for body, ms := range map[string]int64{`"timeout":"30s"`: 30000, `"timeout":45000`: 45000} {
		code, b, err := d.Do(http.MethodPost, "/v1/runs", "application/json", []byte(`{"folder":"main","messages":[{"content":"noop"}],`+body+`}`))
		var r apiwire.Run
		if err != nil || code != http.StatusAccepted || json.Unmarshal(b, &r) != nil || r.TimeoutMs != ms {
			t.Errorf("POST with %s: %d %s %v, want 202 and timeoutMs %d", body, code, b, err, ms)
			continue
		}
		if end := d.Wait(t, r.ID, time.Minute); end.Status != "ok" {
			t.Errorf("run with %s: %+v", body, end)
		}
	}
	has := func(runs []apiwire.Run) bool {
		return slices.ContainsFunc(runs, func(r apiwire.Run) bool { return r.ID == run.ID })
	}
	for q, want := range map[string]bool{
		"folder=main": true, "folder=main&state=exited": true, "state=exited": true,
		"folder=main&state=queued": false, "folder=main&state=running": false, "folder=kill": false, "state=killed": false,
	} {
		runs := d.Runs(t, q)
		if has(runs) != want {
			t.Errorf("GET /v1/runs?%s: run %s listed %v, want %v", q, run.ID, has(runs), want)
		}
		for _, r := range runs {
			if strings.Contains(q, "folder=main") && r.Folder != "main" || strings.Contains(q, "state=exited") && r.State != "exited" {
				t.Errorf("GET /v1/runs?%s lists %s (%s, %s)", q, r.ID, r.Folder, r.State)
			}
		}
	}
	return run
}

// testKill: DELETE ends a run that would hang for five minutes; its container is gone.
func testKill(t *testing.T, d *daemontest.Daemon) {
	run := d.Submit(t, "kill", "hang 5m")
	run = d.WaitRunning(t, run.ID, 30*time.Second)
	d.WaitContainerRunning(t, run.Container)
	t0 := time.Now()
	code, body, err := d.Do(http.MethodDelete, "/v1/runs/"+run.ID, "", nil)
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("DELETE: %d %s %v", code, body, err)
	}
	end := d.Wait(t, run.ID, time.Minute)
	t.Logf("kill: DELETE to final state in %s", time.Since(t0).Round(time.Millisecond))
	if end.State != "killed" || end.Failure != "killed" {
		t.Fatalf("killed run: %+v", end)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.Eng.Inspect(ctx, run.Container); !errors.Is(err, engine.ErrNoSuchContainer) {
		t.Errorf("container %s after the kill: inspect says %v, want no such container", run.Container, err)
	}
	if code, body, _ := d.Do(http.MethodDelete, "/v1/runs/"+run.ID, "", nil); code != http.StatusConflict {
		t.Errorf("second DELETE: %d %s, want 409", code, body)
	}
}

// testSteer: a running agent gets the steering message and answers with it.
func testSteer(t *testing.T, d *daemontest.Daemon) {
	daemontest.JournalOn(t)
	run := d.Submit(t, "steer", "steer")
	d.WaitRunning(t, run.ID, 30*time.Second)
	// The agent says on stderr when its SIGUSR1 handler is in place; the daemon forwards
	// that line to the journal with the run's id.
	daemontest.WaitJournal(t, 20*time.Second, daemontest.HasMessage("steer: waiting for SIGUSR1"), "ARIZUKO_RUN_ID="+run.ID)
	code, body, err := d.Do(http.MethodPost, "/v1/runs/"+run.ID+"/steer", "application/json", []byte(`{"messages":[{"content":"left"}]}`))
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("steer: %d %s %v", code, body, err)
	}
	end := d.Wait(t, run.ID, time.Minute)
	if end.Status != "ok" || end.Result != "steered: left" {
		t.Fatalf("steered run: %+v", end)
	}
	if code, body, _ := d.Do(http.MethodPost, "/v1/runs/"+run.ID+"/steer", "application/json", []byte(`{"messages":[{"content":"late"}]}`)); code != http.StatusConflict {
		t.Errorf("steer of an ended run: %d %s, want 409", code, body)
	}
}

// testSession: a turn's newSessionId becomes the folder's session, which the next turn
// without a sessionId continues; an explicit sessionId wins.
func testSession(t *testing.T, d *daemontest.Daemon) {
	sess := "sess-" + daemontest.RandHex(4)
	create := func(req apiwire.CreateRunRequest) apiwire.Run {
		r, err := d.Client.CreateRun(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return d.Wait(t, r.ID, time.Minute)
	}
	msg := []contract.Message{{Content: "reply a"}}
	first := create(apiwire.CreateRunRequest{Folder: "sess", Messages: msg, SessionID: sess})
	second := create(apiwire.CreateRunRequest{Folder: "sess", Messages: msg})
	third := create(apiwire.CreateRunRequest{Folder: "sess", Messages: msg, SessionID: "explicit"})
	fourth := create(apiwire.CreateRunRequest{Folder: "sess", Messages: msg})
	for i, c := range []struct {
		run  apiwire.Run
		want string
	}{{first, sess}, {second, sess}, {third, "explicit"}, {fourth, "explicit"}} {
		if c.run.Status != "ok" || c.run.NewSessionID != c.want {
			t.Errorf("turn %d: status %s newSessionId %q, want %q", i+1, c.run.Status, c.run.NewSessionID, c.want)
		}
	}
}

// inboxRuns are the runs of folder made from its inbox, read from the store.
func inboxRuns(t *testing.T, st *store.Store, folder string) []store.Run {
	runs, err := st.ListRuns(context.Background(), store.RunFilter{Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Run
	for _, r := range runs {
		if r.InboxFirst != 0 {
			out = append(out, r)
		}
	}
	slices.Reverse(out)
	return out
}

// waitCursor polls folder's cursor until done accepts it.
func waitCursor(t *testing.T, st *store.Store, folder string, timeout time.Duration, done func(store.Cursor) bool) store.Cursor {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, err := st.GetCursor(context.Background(), folder)
		if err != nil {
			t.Fatal(err)
		}
		if done(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("cursor of %s after %s: %+v", folder, timeout, c)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitFinal(t *testing.T, d *daemontest.Daemon, runs []store.Run) []apiwire.Run {
	t.Helper()
	var out []apiwire.Run
	for _, r := range runs {
		out = append(out, d.Wait(t, r.ID, time.Minute))
	}
	return out
}

// testInbox: two messages posted one after the other each run exactly once; the cursor
// ends past both.
func testInbox(t *testing.T, d *daemontest.Daemon) {
	st := d.OpenStore(t)
	a := d.AppendInbox(t, "inbox", "reply one")
	b := d.AppendInbox(t, "inbox", "reply two")
	c := waitCursor(t, st, "inbox", time.Minute, func(c store.Cursor) bool { return c.LastDoneID == b[0] })
	runs := inboxRuns(t, st, "inbox")
	final := waitFinal(t, d, runs)
	covered := map[int64]int{}
	for i, r := range runs {
		if final[i].Status != "ok" {
			t.Errorf("inbox run %s: %+v", r.ID, final[i])
		}
		for id := r.InboxFirst; id <= r.InboxLast; id++ {
			covered[id]++
		}
	}
	for _, id := range []int64{a[0], b[0]} {
		if covered[id] != 1 {
			t.Errorf("inbox message %d covered by %d runs, want 1", id, covered[id])
		}
	}
	if last := final[len(final)-1]; last.Result != "two" {
		t.Errorf("last inbox run answered %q, want two", last.Result)
	}
	if c.Parked() || c.Retries != 0 {
		t.Errorf("cursor: %+v", c)
	}
	t.Logf("inbox: 2 messages ran in %d run(s)", len(runs))
}

// testInboxFatal: a fatal answer rolls the cursor back; the messages run again after the
// backoff, and after retry_max retries the folder is parked with the reason. Unpark runs
// the pending messages again.
func testInboxFatal(t *testing.T, d *daemontest.Daemon) {
	st := d.OpenStore(t)
	reason := "boom-" + daemontest.RandHex(4)
	t0 := time.Now()
	ids := d.AppendInbox(t, "fatal", "fatal "+reason)
	c := waitCursor(t, st, "fatal", time.Minute, store.Cursor.Parked)
	parkedAfter := time.Since(t0)
	runs := inboxRuns(t, st, "fatal")
	final := waitFinal(t, d, runs)
	if len(runs) != 3 {
		t.Fatalf("%d inbox runs before parking, want 3 (the first and retry_max=2 retries)", len(runs))
	}
	for i, r := range final {
		if r.Attempt != i+1 || r.Status != "fatal" || r.State != "error" || runs[i].InboxFirst != ids[0] {
			t.Errorf("attempt %d: %+v", i+1, r)
		}
	}
	if c.LastDoneID >= ids[0] || !strings.Contains(c.ParkedReason, "gave up after 2 retries") || !strings.Contains(c.ParkedReason, reason) {
		t.Errorf("parked cursor: %+v", c)
	}
	t.Logf("fatal: 3 attempts, parked %s after the message with %q", parkedAfter.Round(time.Millisecond), c.ParkedReason)

	more := d.AppendInbox(t, "fatal", "reply recovered")
	// Every pass of the queue looks at all folders with pending messages: once a message
	// appended later to another folder got its turn, a pass has seen fatal's too.
	witness := d.AppendInbox(t, "witness", "reply witness")
	waitCursor(t, st, "witness", time.Minute, func(c store.Cursor) bool { return c.LastDoneID == witness[0] })
	if n := len(inboxRuns(t, st, "fatal")); n != 3 {
		t.Fatalf("a parked folder made a run: %d inbox runs", n)
	}
	code, body, err := d.Do(http.MethodPost, "/v1/groups/fatal/unpark", "", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("unpark: %d %s %v", code, body, err)
	}
	c = waitCursor(t, st, "fatal", time.Minute, func(c store.Cursor) bool { return c.LastDoneID == more[0] })
	runs = inboxRuns(t, st, "fatal")
	last := d.Wait(t, runs[len(runs)-1].ID, time.Minute)
	if len(runs) != 4 || last.Result != "recovered" || runs[3].InboxFirst != ids[0] || runs[3].InboxLast != more[0] || c.Parked() {
		t.Errorf("after unpark: %d runs, last %+v, cursor %+v", len(runs), last, c)
	}
}

// testInboxMisconfig: an agent that exits 126 (its entrypoint cannot run) parks the folder
// at once, without retries.
func testInboxMisconfig(t *testing.T, d *daemontest.Daemon) {
	st := d.OpenStore(t)
	ids := d.AppendInbox(t, "misconf", "exit 126")
	// A parked cursor is never retried: the store makes no inbox run of a parked folder.
	c := waitCursor(t, st, "misconf", time.Minute, store.Cursor.Parked)
	runs := inboxRuns(t, st, "misconf")
	final := waitFinal(t, d, runs)
	if len(runs) != 1 || final[0].Failure != "misconfig" || !final[0].Terminal || final[0].ExitCode == nil || *final[0].ExitCode != 126 {
		t.Fatalf("misconfig runs: %+v", final)
	}
	if c.LastDoneID >= ids[0] || c.Retries != 0 || !strings.Contains(c.ParkedReason, "126") {
		t.Errorf("parked cursor: %+v", c)
	}
	t.Logf("misconfig: parked at once with %q", c.ParkedReason)
	more := d.AppendInbox(t, "misconf", "reply fixed")
	if code, body, err := d.Do(http.MethodPost, "/v1/groups/misconf/unpark", "", nil); err != nil || code != http.StatusOK {
		t.Fatalf("unpark: %d %s %v", code, body, err)
	}
	waitCursor(t, st, "misconf", time.Minute, func(c store.Cursor) bool { return c.LastDoneID == more[0] && !c.Parked() })
}

// testRoutes: the operator's routes through `arizukod routes` (the CLI over the real
// socket): added, listed as the operator's, routing POST /v1/messages into the group's inbox
// (whose turn runs), deleted; a mistaken command line is a usage error.
func testRoutes(t *testing.T, d *daemontest.Daemon) {
	cli := func(args ...string) (string, int) {
		cmd := exec.Command(daemontest.Binary(t), append(args, "--socket", d.Socket)...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("arizukod %v: %v", args, err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := cli("routes", "add", "routed", "--seq", "5", "--match", "room=e2e   platform=test")
	var added apiwire.Route
	if code != 0 || json.Unmarshal([]byte(out), &added) != nil || added.ID == 0 || added.Match != "platform=test room=e2e" || added.Owner != "" {
		t.Fatalf("routes add: exit %d: %s", code, out)
	}
	out, code = cli("routes", "list", "--json")
	var listed []apiwire.Route
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || !slices.ContainsFunc(listed, func(r apiwire.Route) bool { return r == added }) {
		t.Errorf("routes list --json: exit %d: %s, want %+v in it", code, out, added)
	}
	if out, code = cli("routes"); code != 0 || !strings.Contains(out, "(operator)") || !strings.Contains(out, "platform=test room=e2e") {
		t.Errorf("routes: exit %d: %s", code, out)
	}
	msg := []byte(`{"platform":"test","room":"e2e","sender":"tg:1","content":"noop"}`)
	status, body, err := d.Do(http.MethodPost, "/v1/messages", "application/json", msg)
	var routed struct {
		Folder string  `json:"folder"`
		IDs    []int64 `json:"ids"`
	}
	if err != nil || status != http.StatusAccepted || json.Unmarshal(body, &routed) != nil || routed.Folder != "routed" || len(routed.IDs) != 1 {
		t.Fatalf("POST /v1/messages: %d %s %v", status, body, err)
	}
	waitCursor(t, d.OpenStore(t), "routed", time.Minute, func(c store.Cursor) bool { return c.LastDoneID == routed.IDs[0] })
	if out, code = cli("routes", "delete", fmt.Sprint(added.ID)); code != 0 {
		t.Errorf("routes delete: exit %d: %s", code, out)
	}
	if status, body, _ := d.Do(http.MethodPost, "/v1/messages", "application/json", msg); status != http.StatusUnprocessableEntity {
		t.Errorf("after delete, POST /v1/messages: %d %s, want 422", status, body)
	}
	for _, args := range [][]string{{"routes", "add", "routed", "--seq", "1"}, {"routes", "add", "--seq", "1", "--match", ""}, {"routes", "delete"}, {"routes", "list", "--color"}, {"routes", "move", "1"}} {
		if out, code := cli(args...); code != 2 || !strings.Contains(out, "usage: arizukod routes") {
			t.Errorf("arizukod %v: exit %d, want 2 with the usage: %s", args, code, out)
		}
	}
	if out, code := cli("routes", "delete", fmt.Sprint(added.ID)); code != 1 || !strings.Contains(out, "`arizukod routes` lists them") {
		t.Errorf("delete again: exit %d: %s, want 1 saying what to do", code, out)
	}
}

// testPeer: the socket is world-writable here (socket_mode 0666), so only the daemon's
// check of the peer's credentials stands between another user and the API.
func testPeer(t *testing.T, d *daemontest.Daemon) {
	user := os.Getenv("ARIZUKO_TEST_ROOTLESS_USER")
	if user == "" {
		user = "arizukotest"
	}
	if _, err := exec.LookPath("curl"); err != nil {
		enginetest.Missing(t, "curl: %v", err)
	}
	if err := exec.Command("id", user).Run(); err != nil {
		enginetest.Missing(t, "no user %s to connect as: %v", user, err)
	}
	curl := func(as string) (string, string) {
		args := []string{"-sS", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", d.Socket, "http://arizukod/health"}
		cmd := exec.Command("curl", args...)
		if as != "" {
			cmd = exec.Command("runuser", append([]string{"-u", as, "--", "curl"}, args...)...)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("curl as %q: %v\n%s", as, err, out)
		}
		s := strings.TrimSpace(string(out))
		i := strings.LastIndexByte(s, '\n')
		return s[i+1:], s[:max(i, 0)]
	}
	code, body := curl(user)
	if code != "403" || !strings.Contains(body, "forbidden") || !strings.Contains(body, "is not the service user") {
		t.Errorf("as %s: HTTP %s %s, want 403 with a reason", user, code, body)
	}
	t.Logf("as %s: HTTP %s %s", user, code, strings.TrimSpace(body))
	if code, body := curl(""); code != "200" {
		t.Errorf("as root: HTTP %s %s, want 200", code, body)
	}
}

// allowedNetwork is the network TestAPI's daemon allows (limits.allowed_networks); its
// engine has no network of that name.
const allowedNetwork = "agents"

// testNetworks: POST /v1/groups accepts every network a group may name, and a turn then
// gets that network (the agent's interfaces, seen from inside) or a terminal
// misconfiguration naming the mode and the engine. A network that reached the store behind
// the API's back (an old row) is refused by the runner all the same, before any container.
func testNetworks(t *testing.T, d *daemontest.Daemon) {
	h, _, err := d.Health()
	if err != nil {
		t.Fatal(err)
	}
	engine := h.Engine.Name + " " + h.Engine.Version
	st := d.OpenStore(t)
	for i, tc := range []struct {
		network string
		stored  bool     // written to the store directly, as an old row would be
		ifaces  []string // the agent's interfaces; nil: the turn is not run
		refuse  string   // the turn is a terminal misconfig saying this
	}{
		{network: "", ifaces: []string{"lo"}},
		{network: "none", ifaces: []string{"lo"}},
		{network: "slirp4netns", ifaces: []string{"lo", "tap0"}},
		{network: "slirp", ifaces: []string{"lo", "tap0"}},
		{network: "pasta", refuse: engine + " has no pasta network"},
		{network: allowedNetwork, refuse: allowedNetwork},
		// Podman's bridge would add a bridge to the shared host's network namespace:
		// runtime's TestBridgeNetworks runs it on an engine in a namespace of its own.
		{network: "bridge"},
		{network: "host", stored: true, refuse: `"host" would give the agent the host's network`},
		{network: "container:4f1c2a9b", stored: true, refuse: "would share another network namespace"},
		{network: "ns:/proc/1/ns/net", stored: true, refuse: "would share another network namespace"},
		{network: "lab", stored: true, refuse: `"lab" is not in limits.allowed_networks`},
	} {
		folder := "net" + string(rune('a'+i))
		t.Run(folder+"="+tc.network, func(t *testing.T) {
			cc, _ := json.Marshal(map[string]string{"network": tc.network})
			if tc.stored {
				if _, err := st.UpsertGroup(context.Background(), store.Group{Folder: folder, ContainerConfig: cc}); err != nil {
					t.Fatal(err)
				}
			} else {
				d.PutGroup(t, folder, string(cc))
			}
			if tc.ifaces == nil && tc.refuse == "" {
				return
			}
			r := d.Turn(t, folder, "sandbox")
			if tc.refuse != "" {
				if r.Failure != "misconfig" || !r.Terminal || !strings.Contains(r.Error, tc.refuse) {
					t.Fatalf("run %+v, want a terminal misconfig saying %q", r, tc.refuse)
				}
				return
			}
			var s struct {
				Interfaces []string `json:"interfaces"`
			}
			if r.Status != "ok" || json.Unmarshal([]byte(r.Result), &s) != nil {
				t.Fatalf("run %+v", r)
			}
			if got := slices.Sorted(slices.Values(s.Interfaces)); !slices.Equal(got, tc.ifaces) {
				t.Errorf("interfaces from inside %v, want %v", got, tc.ifaces)
			}
		})
	}
}
