package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
)

// TestClaudeAgent runs the real Claude Code binary in the built image, in the hardened
// container with network none, against a scripted Messages API behind the model gateway:
// a plain turn, a resumed session, an MCP tool call through router.sock that lands in the
// outbox, and `claude mcp list` run by Claude Code's own Bash tool.
func TestClaudeAgent(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) { testClaudeAgent(t, e) })
	}
}

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
		switch text := r.LastUserText(); {
		case strings.HasSuffix(text, "please use send_reply"):
			awaiting = true
			return fakemodel.Reply{ToolUse: &fakemodel.ToolUse{Name: "mcp__arizuko__send_reply",
				Input: map[string]any{"text": "hello from claude", "chat_jid": "tg:42"}}}
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
	turn := func(msg, session string) api.Run {
		t.Helper()
		r, err := d.Client.CreateRun(context.Background(), api.CreateRunRequest{Folder: "main", SessionID: session,
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

	// (3) The model calls send_reply: Claude Code calls the MCP server over router.sock,
	// the outbox gets the row, and the tool's result goes back to the model.
	third := turn("please use send_reply", "")
	if third.Status != "ok" || !strings.HasPrefix(third.Result, "tool said: ") {
		t.Errorf("tool turn: %s %q %q", third.Status, third.Result, third.Error)
	}
	var outbox struct {
		Items []struct {
			Target  string `json:"target"`
			Content string `json:"content"`
		} `json:"items"`
	}
	code, body, err := daemontest.Do(d.Socket, http.MethodGet, "/v1/groups/main/outbox", "", nil)
	if err != nil || code != 200 {
		t.Fatalf("outbox: %d %v", code, err)
	}
	json.Unmarshal(body, &outbox)
	if !strings.Contains(string(body), "hello from claude") || !strings.Contains(string(body), "tg:42") {
		t.Errorf("outbox after send_reply: %s", body)
	}

	// (7) Claude Code's Bash tool runs `claude mcp list` inside the turn: arizuko connected.
	fourth := turn("please list mcp", "")
	if fourth.Status != "ok" || !strings.Contains(fourth.Result, "arizuko") || !strings.Contains(fourth.Result, "Connected") {
		t.Errorf("claude mcp list inside a turn: %s %q %q", fourth.Status, fourth.Result, fourth.Error)
	}
}
