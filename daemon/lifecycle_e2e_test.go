package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/store"
)

// sidecarImage is the example sidecar (an MCP echo server), imported once per engine.
const sidecarImage = "localhost/arizuko-sidecar:daemontest"

var sidecarImports sync.Map // engine URI -> *sync.Once

func ensureSidecarImage(t *testing.T, e enginetest.Engine, eng engine.Engine) {
	t.Helper()
	bin, err := enginetest.StaticBinary("github.com/arizuko/arizukod/examples/sidecar", "sidecar")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := sidecarImports.LoadOrStore(e.URI, new(sync.Once))
	var ierr error
	v.(*sync.Once).Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ierr = engine.ImportStatic(ctx, eng, sidecarImage, bin)
	})
	if ierr != nil {
		t.Fatalf("import the sidecar image into %s: %v", e.Name, ierr)
	}
}

// TestRestartKeepsTurnTools stops the daemon gracefully while a turn waits, starts it again
// and only then has the adopted turn use everything that lives as long as its container:
// the MCP server, a sidecar, the model gateway and the egress proxy. Each must answer as it
// did before the restart.
func TestRestartKeepsTurnTools(t *testing.T) {
	daemontest.JournalOn(t)
	e := daemontest.Podman4(t)
	fake := fakemodel.Start()
	defer fake.Close()
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Text: "echo: " + r.LastUserText(), InputTokens: 3, OutputTokens: 2}
	}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	defer target.Close()
	d := daemontest.New(t, daemontest.Config{Engine: e,
		EnvFile: "ANTHROPIC_API_KEY=sk-ant-test-" + daemontest.RandHex(16) + "\n",
		TOML:    fmt.Sprintf("[model]\nupstream = %q\n", fake.URL)})
	ensureSidecarImage(t, e, d.Eng)
	d.Start(t)
	d.PutGroup(t, "main", fmt.Sprintf(`{"egress": [%q], "sidecars": [{"name": "echo", "image": %q}]}`,
		strings.TrimPrefix(target.URL, "http://"), sidecarImage))

	cmds := []string{
		"mcp list",
		`mcp-socket echo.sock echo {"text":"sidecar after restart"}`,
		"model after restart",
		"fetch " + target.URL + "/after-restart",
	}
	run := d.Submit(t, "main", "await all "+strings.Join(cmds, " ;; "))
	d.WaitRunning(t, run.ID, 30*time.Second)
	daemontest.WaitJournal(t, 30*time.Second, daemontest.HasMessage("await: waiting for SIGUSR1"), "ARIZUKO_RUN_ID="+run.ID)

	d.Stop(t)
	d.Start(t)
	// Steer as soon as the daemon adopts the run: until the turn's servers are back the
	// answer is 409, and once it is 202 they must all answer.
	daemontest.WaitJournal(t, 30*time.Second, daemontest.HasMessage("adopting run"), "ARIZUKO_RUN_ID="+run.ID, "_PID="+strconv.Itoa(d.Pid()))
	refused := 0
	for deadline := time.Now().Add(time.Minute); ; {
		code, body, err := d.Do(http.MethodPost, "/v1/runs/"+run.ID+"/steer", "application/json", []byte(`{"messages":[{"content":"go"}]}`))
		if err == nil && code == http.StatusAccepted {
			break
		}
		if err != nil || code != http.StatusConflict || time.Now().After(deadline) {
			d.Do(http.MethodDelete, "/v1/runs/"+run.ID, "", nil)
			t.Fatalf("steer of the adopted run: %d %s %v", code, body, err)
		}
		refused++
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("steer refused %d times (409) until the adopted turn's servers were back", refused)
	r := d.Wait(t, run.ID, 2*time.Minute)
	if r.State != "exited" || r.Status != "ok" {
		t.Fatalf("adopted run: %+v", r)
	}
	var outs []contract.Output
	if err := json.Unmarshal([]byte(r.Result), &outs); err != nil || len(outs) != len(cmds) {
		t.Fatalf("adopted run's answer %q: %v", r.Result, err)
	}
	want := []string{`"send_reply"`, `sidecar after restart`, `echo: after restart`, `hello /after-restart`}
	for i, o := range outs {
		if o.Status != contract.StatusOK || !strings.Contains(o.Result, want[i]) {
			t.Errorf("after the restart, %q answered %s %q %q; want %s", cmds[i], o.Status, o.Result, o.Error, want[i])
		}
	}
	if u := d.GetRun(t, run.ID).Usage; u == nil || u.Requests != 1 {
		t.Errorf("the adopted turn's model usage was not recorded: %+v", u)
	}
}

// TestAdoptedTurnWithoutInputRunsAgain leaves what a daemon killed between starting a
// container and writing its input leaves: a running run whose agent read EOF and answered
// fatal "read stdin: EOF", and one whose container was created and never started. The
// next daemon adopts both, sees that neither input reached its agent, and runs them again
// in new containers, where they answer. A third run got its input and a kill request
// while no daemon ran: it is adopted only to be stopped, and ends killed; a fourth got its
// kill request before it had a container, and ends killed without one.
func TestAdoptedTurnWithoutInputRunsAgain(t *testing.T) {
	daemontest.JournalOn(t)
	e := daemontest.Podman4(t)
	d := daemontest.New(t, daemontest.Config{Engine: e})
	d.Start(t)
	d.AddGroup(t, "main")
	d.AddGroup(t, "idle")
	d.AddGroup(t, "doomed")
	d.AddGroup(t, "unborn")
	d.Stop(t)

	ctx := context.Background()
	st := d.OpenStore(t)
	image := enginetest.EnsureAgentImage(t, e, d.Eng)
	left := map[string]string{} // folder -> run id
	var doomed, unborn string
	for _, folder := range []string{"main", "idle", "doomed", "unborn"} {
		if _, err := st.CreateRun(ctx, store.Run{Folder: folder, Input: json.RawMessage(`{"messages":[{"role":"user","content":"reply again in ` + folder + `"}]}`)}); err != nil {
			t.Fatal(err)
		}
		run, err := st.StartNext(ctx, 5)
		if err != nil || run == nil || run.Folder != folder {
			t.Fatalf("start the %s run: %+v %v", folder, run, err)
		}
		if folder == "unborn" {
			unborn = run.ID
			if _, err := st.RequestKill(ctx, run.ID); err != nil {
				t.Fatal(err)
			}
			continue
		}
		name := runner.ContainerName(groupfolder.Folder(folder), "", time.Now())
		id, err := d.Eng.Create(ctx, engine.Spec{Name: name, Image: image, Stdin: true,
			Labels: map[string]string{engine.LabelInstance: d.Instance, engine.LabelFolder: folder, engine.LabelRun: run.ID, engine.LabelRole: "agent"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetContainer(ctx, run.ID, name); err != nil {
			t.Fatal(err)
		}
		if folder == "idle" {
			left[folder] = run.ID
			continue // created, never started
		}
		// Started with its stdin attached, and the attachment gone before a byte was
		// written: the daemon died.
		att, err := d.Eng.Attach(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Eng.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		if folder == "doomed" {
			doomed = run.ID
			if _, err := att.Stdin.Write([]byte(`{"messages":[{"role":"user","content":"hang 2m"}]}` + "\n")); err != nil {
				t.Fatal(err)
			}
			att.Close()
			if err := st.MarkInputSent(ctx, run.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := st.RequestKill(ctx, run.ID); err != nil {
				t.Fatal(err)
			}
			continue
		}
		left[folder] = run.ID
		att.Close()
		if s, err := d.Eng.Wait(ctx, id); err != nil || s.Running {
			t.Fatalf("the container did not end on its closed stdin: %+v %v", s, err)
		}
		var out strings.Builder
		if err := d.Eng.Logs(ctx, id, &out, io.Discard); err != nil || !strings.Contains(out.String(), "read stdin: EOF") {
			t.Fatalf("the agent printed %q (%v), want its fatal read stdin: EOF", out.String(), err)
		}
	}

	d.Start(t)
	for folder, id := range left {
		r := d.Wait(t, id, 2*time.Minute)
		if r.State != "exited" || r.Status != "ok" || r.Result != "again in "+folder || r.Attempt != 2 {
			t.Errorf("%s: the run without input ended %+v, want it run again and answered", folder, r)
		}
	}
	for _, id := range []string{doomed, unborn} {
		if r := d.Wait(t, id, 2*time.Minute); r.State != "killed" || r.Attempt != 1 {
			t.Errorf("a run killed while no daemon ran ended %+v, want killed", r)
		}
	}
	es, err := daemontest.Journal("_PID="+strconv.Itoa(d.Pid()), "MESSAGE=the turn's input never reached the agent: run requeued")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 {
		t.Errorf("%d requeues, want 2", len(es))
	}
	for _, en := range es {
		t.Logf("%s: %s", en["ARIZUKO_FOLDER"], en["ERR"])
	}
}

// TestRacesEndAsTheStateMachineSays fires 1000 concurrent steer, kill and get requests at
// runs while they start, run and finish on a real daemon and engine. Every answer is one
// the state machine allows (steer 202 or 409, kill 202 or 409, get 200), never a 5xx, and
// every run ends exited or killed.
func TestRacesEndAsTheStateMachineSays(t *testing.T) {
	e := daemontest.Podman4(t)
	d := daemontest.New(t, daemontest.Config{Engine: e, MaxRunning: 8})
	d.Start(t)
	const folders, perFolder, requests, workers = 10, 4, 1000, 32
	var ids []string
	for i := range folders {
		f := fmt.Sprintf("race%02d", i)
		d.AddGroup(t, f)
		for j := range perFolder {
			msg := "sleep 300ms"
			if j%2 == 1 {
				msg = "steer"
			}
			ids = append(ids, d.Submit(t, f, msg).ID)
		}
	}
	type call struct{ method, path, body string }
	calls := make(chan call, requests)
	for i := range requests {
		id := ids[(i*7)%len(ids)]
		switch i % 10 {
		case 0, 1: // kills are rarer, so that most runs still finish on their own
			if i%20 == 0 {
				calls <- call{http.MethodDelete, "/v1/runs/" + id, ""}
			} else {
				calls <- call{http.MethodGet, "/v1/runs/" + id, ""}
			}
		case 2, 3, 4, 5, 6:
			calls <- call{http.MethodPost, "/v1/runs/" + id + "/steer", `{"messages":[{"content":"race ` + strconv.Itoa(i) + `"}]}`}
		default:
			calls <- call{http.MethodGet, "/v1/runs/" + id, ""}
		}
	}
	close(calls)
	allowed := map[string][]int{
		http.MethodPost:   {http.StatusAccepted, http.StatusConflict},
		http.MethodDelete: {http.StatusAccepted, http.StatusConflict},
		http.MethodGet:    {http.StatusOK},
	}
	var mu sync.Mutex
	counts := map[string]int{}
	var wrong []string
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range calls {
				var body []byte
				if c.body != "" {
					body = []byte(c.body)
				}
				code, resp, err := d.Do(c.method, c.path, "application/json", body)
				mu.Lock()
				counts[fmt.Sprintf("%s %d", c.method, code)]++
				if err != nil || !slices.Contains(allowed[c.method], code) {
					wrong = append(wrong, fmt.Sprintf("%s %s: %d %s %v", c.method, c.path, code, resp, err))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d requests over %d runs: %v", requests, len(ids), counts)
	for _, w := range wrong {
		t.Error(w)
	}
	// The steer turns still waiting get their message once they run; then all have ended.
	ends := map[string]int{}
	pending := slices.Clone(ids)
	for deadline := time.Now().Add(3 * time.Minute); len(pending) > 0; {
		var still []string
		for _, id := range pending {
			r := d.GetRun(t, id)
			switch {
			case r.State == "running":
				d.Do(http.MethodPost, "/v1/runs/"+id+"/steer", "application/json", []byte(`{"messages":[{"content":"last"}]}`))
				still = append(still, id)
			case r.State == "queued":
				still = append(still, id)
			default:
				ends[r.State+"/"+r.Failure]++
				if r.State != "exited" && r.State != "killed" {
					t.Errorf("run %s ended %s %s %q", id, r.State, r.Failure, r.Error)
				}
			}
		}
		pending = still
		if time.Now().After(deadline) {
			t.Fatalf("runs not ended after 3 minutes: %v", pending)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("runs ended: %v", ends)
}

// TestAgentEchoingACredentialLeavesItNowhere runs a hostile agent that reads a credential
// from the env file it is given and puts it in everything it can: its answer's result,
// error and session id, its stderr and an outbox message. The daemon stores and logs all of
// them with the value replaced by [REDACTED:NAME], and after the daemon stops the value is
// in no file of its data directory but the env file itself, not in its stderr and not in
// its journal.
func TestAgentEchoingACredentialLeavesItNowhere(t *testing.T) {
	daemontest.JournalOn(t)
	e := daemontest.Podman4(t)
	key := "ghp_" + daemontest.RandHex(16)
	d := daemontest.New(t, daemontest.Config{Engine: e, EnvFile: "GH_TOKEN=" + key + "\n"})
	d.Start(t)
	d.AddGroup(t, "main")
	r := d.Turn(t, "main", "leak GH_TOKEN")
	const marker = "[REDACTED:GH_TOKEN]"
	got := d.GetRun(t, r.ID)
	for field, v := range map[string]string{"result": got.Result, "error": got.Error, "newSessionId": got.NewSessionID} {
		if strings.Contains(v, key) || !strings.Contains(v, marker) {
			t.Errorf("run %s: %s is %q, want the value redacted", r.ID, field, v)
		}
	}
	var outbox struct {
		Items []struct {
			Content string `json:"content"`
		} `json:"items"`
	}
	code, body, err := d.Do(http.MethodGet, "/v1/groups/main/outbox", "", nil)
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &outbox) != nil {
		t.Fatalf("outbox: %d %s %v", code, body, err)
	}
	if len(outbox.Items) != 1 || !strings.Contains(outbox.Items[0].Content, marker) {
		t.Errorf("outbox %s: want one message with the value redacted", body)
	}
	pid := strconv.Itoa(d.Pid())
	daemontest.WaitJournal(t, 10*time.Second, daemontest.HasMessage("leak: "+marker), "_PID="+pid)
	d.Stop(t)

	where := scanFor(t, d, key)
	if len(where) > 0 {
		t.Errorf("the credential is stored or logged in: %v", where)
	}
	es, err := daemontest.Journal("_PID=" + pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range es {
		for k, v := range en {
			if strings.Contains(v, key) {
				t.Errorf("journal entry %q: %s holds the credential", en["MESSAGE"], k)
			}
		}
	}
	t.Logf("%d journal entries and the data directory checked", len(es))
}

// scanFor lists the files of the daemon's directory (its data directory, stderr log and
// configuration) that hold s, but the env file the daemon hands to containers.
func scanFor(t *testing.T, d *daemontest.Daemon, s string) []string {
	t.Helper()
	var hits []string
	envFile := filepath.Join(d.DataDir, "env", "env")
	filepath.WalkDir(d.Dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || !de.Type().IsRegular() || p == envFile || p == filepath.Join(d.Dir, "env") {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(s)) {
			hits = append(hits, p)
		}
		return nil
	})
	return hits
}

// TestClearSessionWinsOverTheTurnsSession: a turn that calls clear_session and then
// answers with the session it had leaves its folder without a session.
func TestClearSessionWinsOverTheTurnsSession(t *testing.T) {
	e := daemontest.Podman4(t)
	d := daemontest.New(t, daemontest.Config{Engine: e})
	d.Start(t)
	d.AddGroup(t, "main")
	st := d.OpenStore(t)
	ctx := context.Background()
	first := d.Turn(t, "main", "reply one")
	if s, err := st.GetSession(ctx, "main"); err != nil || s == "" || s != first.NewSessionID {
		t.Fatalf("session after the first turn: %q %v (run said %q)", s, err, first.NewSessionID)
	}
	cleared := d.Turn(t, "main", "mcp clear_session {}")
	if cleared.Status != "ok" || !strings.Contains(cleared.Result, `\"cleared\":\"main\"`) || cleared.NewSessionID != first.NewSessionID {
		t.Fatalf("clear_session turn: %+v", cleared)
	}
	if s, err := st.GetSession(ctx, "main"); err != nil || s != "" {
		t.Errorf("session after the turn that cleared it: %q %v, want none", s, err)
	}
}

// TestTaskRunsGetTheirOwnContainers runs the same task twice back to back: the second run's
// container is created while the first's may still be being removed, so each has a name
// of its own.
func TestTaskRunsGetTheirOwnContainers(t *testing.T) {
	e := daemontest.Podman4(t)
	d := daemontest.New(t, daemontest.Config{Engine: e})
	d.Start(t)
	d.AddGroup(t, "main")
	st := d.OpenStore(t)
	ctx := context.Background()
	var ids []string
	for range 3 {
		r, err := st.CreateRun(ctx, store.Run{Folder: "main", Kind: store.KindTask, TaskID: "t_again",
			Input: json.RawMessage(`{"messages":[{"role":"user","content":"noop"}],"senderJid":"scheduler-isolated:t_again"}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	names := map[string]bool{}
	for _, id := range ids {
		r := d.Wait(t, id, 2*time.Minute)
		if r.State != "exited" || r.Status != "ok" || !strings.HasPrefix(r.Container, "arizuko-main-task-t_again-") || names[r.Container] {
			t.Errorf("task run %s: %s %s %q in container %q", id, r.State, r.Failure, r.Error, r.Container)
		}
		names[r.Container] = true
	}
}
