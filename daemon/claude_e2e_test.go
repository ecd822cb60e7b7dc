package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
	"github.com/arizuko/arizukod/store"
)

// TestClaudeAgent runs the real Claude Code binary in the built image, in the hardened
// container with network none, against a scripted Messages API behind the model gateway:
// a plain turn, a resumed session, /compact archiving the session as an episode through
// the PreCompact hook, a routed chat message whose send_reply (through
// router.sock, without a chat_jid) lands in the outbox for its chat, a steer within the turn, the soft deadline, the tier's tool list, the sandbox
// probed by Claude Code's Bash tool, and `claude mcp list` run by it.
func TestClaudeAgent(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) { testClaudeAgent(t, e) })
	}
}

// nudgeRE finds the diary nudge in a turn's message, and its diary file.
var nudgeRE = regexp.MustCompile(`diary-nudge turn=[\s\S]*?/workspace/diary/(\d{4}-\d\d-\d\d)\.md`)

func testClaudeAgent(t *testing.T, e enginetest.Engine) {
	fake := fakemodel.Start()
	defer fake.Close()
	// The turns share the folder's session, so every request carries the earlier tool
	// results: only the request right after a tool call is answered with its result.
	awaiting := false
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		if res, ok := r.ToolResult(); ok && awaiting {
			awaiting = false
			return fakemodel.Reply{Text: "tool said: " + res}
		}
		if m := nudgeRE.FindStringSubmatch(r.LastUserText()); m != nil && !awaiting {
			// The diary nudge of every 100th turn: the model writes the entry it asks for.
			awaiting = true
			return fakemodel.Reply{ToolUse: &fakemodel.ToolUse{Name: "Write", Input: map[string]any{
				"file_path": "/workspace/diary/" + string(m[1]) + ".md",
				"content":   "---\nsummary: Written when nudged\n---\n\nTurn 100.\n"}}}
		}
		switch text := r.LastUserText(); {
		case strings.HasSuffix(text, "slow please"):
			time.Sleep(4 * time.Second)
			return fakemodel.Reply{Text: "slow answer"}
		case strings.HasSuffix(text, "hang please"):
			select {
			case <-r.Done:
			case <-time.After(2 * time.Minute):
			}
			return fakemodel.Reply{Text: "too late"}
		case strings.HasSuffix(text, "please use send_reply"):
			awaiting = true
			return fakemodel.Reply{ToolUse: &fakemodel.ToolUse{Name: "mcp__arizuko__send_reply",
				Input: map[string]any{"text": "hello from claude"}}}
		case strings.HasSuffix(text, "please probe"):
			awaiting = true
			return fakemodel.Reply{ToolUse: &fakemodel.ToolUse{Name: "Bash", Input: map[string]any{
				"command":     "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; ls /sys/class/net; touch /usr/probe 2>&1; id -u",
				"description": "probe the sandbox"}}}
		case strings.HasSuffix(text, "please list mcp"):
			awaiting = true
			return fakemodel.Reply{ToolUse: &fakemodel.ToolUse{Name: "Bash",
				Input: map[string]any{"command": "claude mcp list", "description": "list MCP servers"}}}
		default:
			return fakemodel.Reply{Text: "echo: " + text}
		}
	}
	key := "sk-ant-test-" + daemontest.RandHex(16)
	d := daemontest.New(t, daemontest.Config{Engine: e, Claude: true, RunTimeout: "3m",
		EnvFile: "ANTHROPIC_API_KEY=" + key + "\n",
		TOML:    fmt.Sprintf("[model]\nupstream = %q\n", fake.URL)})
	d.Start(t)
	d.AddGroup(t, "main")
	turn := func(msg, session string) apiwire.Run {
		t.Helper()
		r, err := d.Client.CreateRun(context.Background(), apiwire.CreateRunRequest{Folder: "main", SessionID: session,
			Messages: []contract.Message{{Role: "user", Content: msg}}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Wait(t, r.ID, 3*time.Minute)
	}

	// (1) A plain turn: the fake's text is the result, with a session id.
	start := time.Now()
	first := turn("hello there", "")
	if first.Status != "ok" || first.Result != "echo: hello there" || first.NewSessionID == "" {
		t.Fatalf("plain turn: %s %s %q %q (session %q)", first.State, first.Status, first.Result, first.Error, first.NewSessionID)
	}
	t.Logf("%s: a plain Claude Code turn in %s, %d model requests", e.Name, time.Since(start).Round(time.Millisecond), len(fake.Requests()))
	reqs := fake.Requests()
	last := reqs[len(reqs)-1]
	if last.Header.Get("X-Api-Key") != key {
		t.Errorf("the upstream got x-api-key %q, want the daemon's key", last.Header.Get("X-Api-Key"))
	}
	if tools := last.ToolNames(); !slices.Contains(tools, "mcp__arizuko__send_reply") {
		t.Errorf("the model was not offered arizuko's tools: %v", tools)
	}

	// (2) The next turn resumes the session: the fake sees the earlier exchange.
	second := turn("and again", first.NewSessionID)
	reqs = fake.Requests()
	raw := string(reqs[len(reqs)-1].Raw)
	if second.Status != "ok" || second.Result != "echo: and again" || !strings.Contains(raw, "hello there") {
		t.Errorf("resumed turn: %s %q %q; its request holds the first exchange: %v", second.Status, second.Result, second.Error, strings.Contains(raw, "hello there"))
	}

	// (2b) "/compact" in the resumed session makes Claude Code compact its context (it asks
	// the model for a summary) and fire the PreCompact hook that arizukod wired in
	// settings.json: the runner archives the session as an episode in the group's
	// episodes/, with the earlier exchange and without tool payloads.
	n := len(fake.Requests())
	compacted := turn("/compact", first.NewSessionID)
	episodes, _ := filepath.Glob(filepath.Join(d.DataDir, "groups", "main", "episodes", "*.md"))
	t.Logf("%s: /compact: %s %q %q, %d model requests, episodes %v", e.Name, compacted.Status, compacted.Result, compacted.Error, len(fake.Requests())-n, episodes)
	if compacted.Status != "ok" || len(episodes) != 1 {
		t.Errorf("after /compact (%s %q) episodes/ holds %v, want one episode", compacted.Status, compacted.Error, episodes)
	} else if ep, err := os.ReadFile(episodes[0]); err != nil || !bytes.HasPrefix(ep, []byte("---\nsummary: \"hello there\"\ndate: ")) ||
		!bytes.Contains(ep, []byte("\n## Assistant\n\necho: and again\n")) {
		t.Errorf("episode %s (%v):\n%s", episodes[0], err, ep)
	} else if !regexp.MustCompile(`^\d{4}-\d\d-\d\d-[0-9a-f-]{8}-\d{6}\.md$`).MatchString(filepath.Base(episodes[0])) {
		t.Errorf("episode name %s, want YYYY-MM-DD-<session>-HHMMSS.md", filepath.Base(episodes[0]))
	}

	// (2c) The /compact noted the compacted session in the day's diary too.
	if diaries, _ := filepath.Glob(filepath.Join(d.DataDir, "groups", "main", "diary", "*.md")); len(diaries) != 1 {
		t.Errorf("after /compact diary/ holds %v, want one file", diaries)
	} else if b, err := os.ReadFile(diaries[0]); err != nil || !bytes.HasPrefix(b, []byte("---\nsummary: \"Compacted a session: hello there\"\n---\n")) ||
		!bytes.Contains(b, []byte(" (session compacted)\n\nhello there\n\nThe session so far is archived in episodes/"+filepath.Base(episodes[0]))) {
		t.Errorf("diary %s after /compact (%v):\n%s", diaries[0], err, b)
	}

	// (2d) The group's 100th turn (its count in the session home set to 99 turns before)
	// asks Claude Code, in the turn's message, to write a diary entry; the model writes it with
	// Claude Code's Write tool, into the group's diary on the host. The next turn is not
	// nudged.
	counter := filepath.Join(d.DataDir, "sessions", "main", ".arizuko", "turns")
	if err := os.MkdirAll(filepath.Dir(counter), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(counter, []byte("99\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n = len(fake.Requests())
	nudged := turn("what is new", "")
	var nudgeDate string
	for _, r := range fake.Requests()[n:] {
		if m := nudgeRE.FindStringSubmatch(r.LastUserText()); m != nil && strings.HasPrefix(m[0], `diary-nudge turn="100"`) {
			nudgeDate = string(m[1])
		}
	}
	written, err := os.ReadFile(filepath.Join(d.DataDir, "groups", "main", "diary", nudgeDate+".md"))
	if nudged.Status != "ok" || nudgeDate == "" || err != nil || !bytes.Equal(written, []byte("---\nsummary: Written when nudged\n---\n\nTurn 100.\n")) {
		t.Errorf("the 100th turn: %s %q %q, nudge for %q, diary %q (%v)", nudged.Status, nudged.Result, nudged.Error, nudgeDate, written, err)
	}
	if b, _ := os.ReadFile(counter); string(b) != "100\n" {
		t.Errorf("turn count after the nudged turn: %q", b)
	}
	n = len(fake.Requests())
	if next := turn("and now", ""); next.Status != "ok" || next.Result != "echo: and now" {
		t.Errorf("the 101st turn: %s %q %q", next.Status, next.Result, next.Error)
	}
	for _, r := range fake.Requests()[n:] {
		if nudgeRE.MatchString(r.LastUserText()) {
			t.Errorf("the 101st turn was nudged too: %q", r.LastUserText())
		}
	}

	// (3) A chat message routed by POST /v1/messages whose model calls send_reply without
	// a chat_jid: Claude Code calls the MCP server over router.sock, the outbox gets the
	// row for the message's chat, and the tool's result goes back to the model, which was
	// told who wrote the message and where.
	st := d.OpenStore(t)
	if _, err := st.AddRoute(context.Background(), store.Route{Seq: 1, Match: "platform=telegram", Target: "main"}); err != nil {
		t.Fatal(err)
	}
	id := routeChat(t, d, "tg:42", "please use send_reply")
	third := inboxTurn(t, d, st, id)
	if third.Status != "ok" || !strings.HasPrefix(third.Result, "tool said: ") {
		t.Errorf("tool turn: %s %q %q", third.Status, third.Result, third.Error)
	}
	if !slices.ContainsFunc(fake.Requests(), func(r fakemodel.Request) bool {
		return strings.HasPrefix(r.LastUserText(), "[from tg:7 in tg:42 at ")
	}) {
		t.Errorf("the model was not told the message's sender and chat")
	}
	// The reply, then the turn's result: both to the message's chat.
	if items := outbox(t, d); len(items) != 2 || items[0].Target != "tg:42" || items[0].Content != "hello from claude" || items[0].RunID != third.ID ||
		items[1].Kind != "result" || items[1].Target != "tg:42" || items[1].Content != third.Result {
		t.Errorf("outbox after send_reply: %+v, want a reply and the result to tg:42 by run %s", items, third.ID)
	}

	// (5) A steer during a slow answer reaches the model in the same turn.
	slow, err := d.Client.CreateRun(context.Background(), apiwire.CreateRunRequest{Folder: "main",
		Messages: []contract.Message{{Role: "user", Content: "slow please"}}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		reqs := fake.Requests()
		if reqs[len(reqs)-1].LastUserText() == "slow please" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow request never reached the fake")
		}
	}
	if code, body, err := d.Do(http.MethodPost, "/v1/runs/"+slow.ID+"/steer", "application/json",
		[]byte(`{"messages":[{"role":"user","content":"steer: turn left"}]}`)); err != nil || code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("steer: %d %s %v", code, body, err)
	}
	steered := d.Wait(t, slow.ID, 3*time.Minute)
	sawSteer := slices.ContainsFunc(fake.Requests(), func(r fakemodel.Request) bool { return r.LastUserText() == "steer: turn left" })
	if steered.Status != "ok" || !sawSteer || steered.Result != "echo: steer: turn left" {
		t.Errorf("steered turn: %s %q %q; the model saw the steer: %v", steered.Status, steered.Result, steered.Error, sawSteer)
	}

	// (6) At the soft deadline the _close sentinel ends a hung turn ok, with what it has.
	d.PutGroup(t, "main/quick", `{"timeout": 40000}`)
	start = time.Now()
	hung, err := d.Client.CreateRun(context.Background(), apiwire.CreateRunRequest{Folder: "main/quick",
		Messages: []contract.Message{{Role: "user", Content: "hang please"}}})
	if err != nil {
		t.Fatal(err)
	}
	closed := d.Wait(t, hung.ID, 2*time.Minute)
	if closed.Status != "ok" || closed.NewSessionID == "" || time.Since(start) > 35*time.Second {
		t.Errorf("a hung turn at its soft deadline: %s %s %q %q after %s", closed.Status, closed.Failure, closed.Result, closed.Error, time.Since(start).Round(time.Second))
	}

	// (4) A tool the group's tier forbids is not even offered: main/a/b/c is tier 3, which
	// may only send_reply.
	for _, f := range []string{"main/a", "main/a/b", "main/a/b/c"} {
		d.AddGroup(t, f)
	}
	n = len(fake.Requests())
	if r, err := d.Client.CreateRun(context.Background(), apiwire.CreateRunRequest{Folder: "main/a/b/c",
		Messages: []contract.Message{{Role: "user", Content: "hello worker"}}}); err != nil {
		t.Fatal(err)
	} else if got := d.Wait(t, r.ID, 3*time.Minute); got.Status != "ok" {
		t.Errorf("tier 3 turn: %s %q", got.Status, got.Error)
	}
	for _, r := range fake.Requests()[n:] {
		var ours []string
		for _, name := range r.ToolNames() {
			if strings.HasPrefix(name, "mcp__arizuko__") {
				ours = append(ours, name)
			}
		}
		if !slices.Equal(ours, []string{"mcp__arizuko__send_reply"}) {
			t.Errorf("a tier-3 turn was offered %v, want only mcp__arizuko__send_reply", ours)
		}
	}

	// The sandbox holds with this image, probed by Claude Code's own Bash tool: no
	// capabilities, no_new_privs, only lo, a read-only root.
	probe := turn("please probe", "")
	for _, want := range []string{"CapEff:\t0000000000000000", "NoNewPrivs:\t1", "lo\n", "Read-only file system"} {
		if !strings.Contains(probe.Result, want) {
			t.Errorf("sandbox probe from Claude Code's Bash tool lacks %q: %s %q %q", want, probe.Status, probe.Result, probe.Error)
		}
	}
	if strings.Contains(probe.Result, "eth0") {
		t.Errorf("the container has a network interface besides lo: %q", probe.Result)
	}

	// (7) Claude Code's Bash tool runs `claude mcp list` inside the turn: arizuko connected.
	fourth := turn("please list mcp", "")
	if fourth.Status != "ok" || !strings.Contains(fourth.Result, "arizuko") || !strings.Contains(fourth.Result, "Connected") {
		t.Errorf("claude mcp list inside a turn: %s %q %q", fourth.Status, fourth.Result, fourth.Error)
	}
}
