package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
)

// agentAnswer decodes the example agent's JSON report in a run's result.
func agentAnswer(t *testing.T, r apiwire.Run) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Result), &m); err != nil {
		t.Fatalf("run %s: %s %s %q: result %q is not JSON", r.ID, r.State, r.Status, r.Error, r.Result)
	}
	return m
}

// TestModelGateway runs turns whose agent, with network none, reaches a scripted Messages
// API only through the daemon's model gateway and a test server only through the egress
// proxy, on every rootful engine. The key is in the daemon's env file and nowhere else.
func TestModelGateway(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) { testModelGateway(t, e) })
	}
}

func testModelGateway(t *testing.T, e enginetest.Engine) {
	daemontest.JournalOn(t)
	fake := fakemodel.Start()
	defer fake.Close()
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		switch text := r.LastUserText(); text {
		case "please 429":
			return fakemodel.Reply{Status: 429, ErrorType: "rate_limit_error"}
		case "please 500":
			return fakemodel.Reply{Status: 500, ErrorType: "api_error"}
		case "burst":
			// Every token of the agent's max_tokens (256) used: the worst case a budget's
			// reservation allows for.
			return fakemodel.Reply{Text: "echo: burst", InputTokens: 21, OutputTokens: 256}
		default:
			return fakemodel.Reply{Text: "echo: " + text, InputTokens: 21, OutputTokens: 8}
		}
	}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the allowed host %s", r.URL.Path)
	}))
	defer target.Close()
	targetAddr := strings.TrimPrefix(target.URL, "http://")
	// inner is listed by name only: "localhost" resolves to loopback, which is refused.
	inner := httptest.NewServer(http.NotFoundHandler())
	defer inner.Close()
	_, innerPort, _ := strings.Cut(strings.TrimPrefix(inner.URL, "http://"), ":")

	key := "sk-ant-test-" + daemontest.RandHex(16)
	creds := t.TempDir()
	teamKey := "sk-ant-team-" + daemontest.RandHex(16)
	if err := os.WriteFile(filepath.Join(creds, "team"), []byte(teamKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemontest.New(t, daemontest.Config{Engine: e,
		EnvFile: "ANTHROPIC_API_KEY=" + key + "\nGH_TOKEN=ghp_" + daemontest.RandHex(8) + "\n",
		TOML:    fmt.Sprintf("[model]\nupstream = %q\ncredentials_dir = %q\n", fake.URL, creds)})
	d.Start(t)
	d.PutGroup(t, "main", fmt.Sprintf(`{"egress": [%q, "localhost:%s"], "model": {"requests_per_turn": 3}}`, targetAddr, innerPort))
	d.AddGroup(t, "other")

	// A streamed answer through the gateway, with the usage in the run.
	r := d.Turn(t, "main", "model hello gateway")
	if a := agentAnswer(t, r); a["status"] != float64(200) || a["text"] != "echo: hello gateway" {
		t.Fatalf("model turn: %+v", a)
	}
	got := d.GetRun(t, r.ID)
	if u := got.Usage; u == nil || u.Requests != 1 || u.InputTokens != 21 || u.OutputTokens != 8 || u.Model != "claude-test" {
		t.Errorf("usage of run %s: %+v", r.ID, got.Usage)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("X-Api-Key") != key {
		t.Fatalf("the upstream saw %d requests, the first with x-api-key %q", len(reqs), reqs[0].Header.Get("X-Api-Key"))
	}

	// The token is the turn's: the next turn cannot use it, nor can anything else.
	old := d.Turn(t, "main", "token").Result
	if !strings.HasPrefix(old, "arz-") {
		t.Fatalf("token turn answered %q", old)
	}
	for _, tc := range []struct {
		msg, want string
		code      float64
	}{
		{"model-as " + old + " hi", "authentication_error", 401},
		{"model-as nothing hi", "authentication_error", 401},
		{"model-raw GET /v1/models", "permission_error", 403},
		{"model-raw POST /v1/complete", "permission_error", 403},
		{"model please 429", "rate_limit_error", 429},
		{"model please 500", "api_error", 500},
	} {
		a := agentAnswer(t, d.Turn(t, "main", tc.msg))
		if a["status"] != tc.code || !strings.Contains(fmt.Sprint(a), tc.want) {
			t.Errorf("%q: %v, want %v %s", tc.msg, a, tc.code, tc.want)
		}
	}
	if _, code, err := d.Health(); err != nil || code != http.StatusOK {
		t.Errorf("health after upstream errors: %d %v", code, err)
	}

	// Egress: the listed address is reached; a name resolving to loopback, an unlisted
	// port and every host of a group without a list are refused, naming the host.
	eg := d.Turn(t, "main", "fetch "+target.URL+"/hi")
	if a := agentAnswer(t, eg); a["status"] != float64(200) || a["body"] != "hello from the allowed host /hi" {
		t.Errorf("allowed fetch: %v", a)
	}
	if run := d.GetRun(t, eg.ID); len(run.Egress) != 1 || run.Egress[0].Host != targetAddr || run.Egress[0].BytesDown == 0 {
		t.Errorf("egress of run %s: %+v", eg.ID, run.Egress)
	}
	for _, tc := range []struct{ folder, url, want string }{
		{"main", "http://localhost:" + innerPort + "/", "internal address"},
		{"main", "http://127.0.0.1:1/", "127.0.0.1:1 is not on this group's egress list"},
		{"other", target.URL, targetAddr + " is not on this group's egress list"},
	} {
		a := agentAnswer(t, d.Turn(t, tc.folder, "fetch "+tc.url))
		if a["status"] != float64(403) || !strings.Contains(fmt.Sprint(a["body"]), tc.want) {
			t.Errorf("%s fetch %s: %v, want 403 %q", tc.folder, tc.url, a, tc.want)
		}
	}

	// Budget: a request reserves what it may use (its max_tokens, 256, and a token for
	// every 3 bytes of its body, 290 here) before it is forwarded, so 8 parallel requests
	// of a child's turn get only as many forwarded as fit in its parent's 1000 tokens: 3
	// when all are in flight at once, 2 when one has ended (using 277) before the third
	// reserves. What the child used is spent from the parent's budget; the gateway says
	// why it refuses, and the run shows the reason.
	d.PutGroup(t, "tight", `{"model": {"tokens_per_day": 1000}}`)
	d.AddGroup(t, "tight/kid")
	burst := d.Turn(t, "tight/kid", "model-burst 8 burst")
	codes := map[string]int{}
	statuses, _ := agentAnswer(t, burst)["statuses"].([]any)
	for _, c := range statuses {
		codes[fmt.Sprint(c)]++
	}
	u := d.GetRun(t, burst.ID).Usage
	if codes["200"] < 2 || codes["200"] > 3 || codes["403"] != 8-codes["200"] || u == nil || u.InputTokens+u.OutputTokens > 1000 || !strings.Contains(u.Refused, "tokens_per_day of tight") {
		t.Errorf("8 parallel requests under a budget of 1000 tokens: statuses %v, usage %+v; want 2 or 3 forwarded using at most 1000 tokens, the rest refused", codes, u)
	}
	// The parent's own turns spend what is left (about 29 tokens each; with 2 of the burst
	// forwarded, up to 6 turns fit before a request's reservation does not), and then are
	// refused.
	var over apiwire.Run
	for range 12 {
		if over = d.Turn(t, "tight", "model second"); agentAnswer(t, over)["status"] == float64(403) {
			break
		}
	}
	if a := agentAnswer(t, over); a["status"] != float64(403) || !strings.Contains(fmt.Sprint(a), "tokens_per_day") {
		t.Errorf("over the daily budget: %v", a)
	}
	if u := d.GetRun(t, over.ID).Usage; u == nil || !strings.Contains(u.Refused, "tokens_per_day") {
		t.Errorf("the run does not say why the gateway refused: %+v", u)
	}

	// A group's credential and models bind the groups below it: a child with no policy
	// of its own reaches the model with its parent's credential, and one whose models
	// have none in common with its parent's reaches none.
	d.PutGroup(t, "team", `{"model": {"credential": "team", "models": ["claude-test", "claude-big"]}}`)
	d.AddGroup(t, "team/kid")
	d.PutGroup(t, "team/narrow", `{"model": {"models": ["claude-other"]}}`)
	n := len(fake.Requests())
	if a := agentAnswer(t, d.Turn(t, "team/kid", "model delegated")); a["status"] != float64(200) {
		t.Errorf("a child of a group with a credential: %v", a)
	}
	if reqs := fake.Requests(); len(reqs) != n+1 || reqs[n].Header.Get("X-Api-Key") != teamKey {
		t.Errorf("the upstream saw %d requests of the child, not one with its parent's credential", len(reqs)-n)
	}
	if a := agentAnswer(t, d.Turn(t, "team/narrow", "model narrowed")); a["status"] != float64(403) || !strings.Contains(fmt.Sprint(a), "allowed: none") {
		t.Errorf("a child whose models its parent does not allow: %v", a)
	}

	// The key is nowhere in the container: not in its environment, not in its files.
	if a := agentAnswer(t, d.Turn(t, "main", "scan sk-ant-test-")); a["hits"] != nil {
		t.Errorf("the model key is inside the container: %v", a["hits"])
	}
	es := daemontest.WaitJournal(t, 5*time.Second, daemontest.HasMessage("turn finished"), "_PID="+strconv.Itoa(d.Pid()))
	seen := false
	for _, en := range es {
		if en["ARIZUKO_RUN_ID"] == r.ID && en["ARIZUKO_INPUT_TOKENS"] == "21" && en["ARIZUKO_OUTPUT_TOKENS"] == "8" {
			seen = true
		}
		for k, v := range en {
			if strings.Contains(v, key) {
				t.Errorf("journal entry %q: %s holds the key", en["MESSAGE"], k)
			}
		}
	}
	if !seen {
		t.Errorf("no journal entry of run %s carries ARIZUKO_INPUT_TOKENS=21 ARIZUKO_OUTPUT_TOKENS=8", r.ID)
	}
	d.Stop(t)
	var scanned int
	filepath.WalkDir(d.DataDir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || !de.Type().IsRegular() {
			return nil
		}
		scanned++
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(key)) {
			t.Errorf("%s holds the key", p)
		}
		return nil
	})
	if b, err := os.ReadFile(d.StderrLog); err != nil || bytes.Contains(b, []byte(key)) {
		t.Errorf("the daemon's stderr holds the key (%v)", err)
	}
	t.Logf("%s: key only in the env file outside data_dir; %d files of data_dir (SQLite, run logs, env) clean", e.Name, scanned)
}
