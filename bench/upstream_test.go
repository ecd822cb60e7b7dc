package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/fakemodel"
)

// request is a Messages request whose last message holds blocks.
func request(t *testing.T, blocks string) fakemodel.Request {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"earlier"},{"role":"assistant","content":"x"},`+
		`{"role":"user","content":`+blocks+`}]}`), &body); err != nil {
		t.Fatal(err)
	}
	return fakemodel.Request{Body: body}
}

func TestFreshToolResult(t *testing.T) {
	u := &upstream{answered: map[string]bool{}}
	steps := []struct {
		name, blocks, want string
		fresh              bool
	}{
		{"a new message", `[{"type":"text","text":"bench-tool 0"}]`, "", false},
		{"the answer to the tool_use", `[{"type":"tool_result","tool_use_id":"toolu_1","content":"{\"outbox_id\":1}"}]`, `{"outbox_id":1}`, true},
		// A resumed session's next turn repeats the tool result before the new text.
		{"the next turn of the resumed session", `[{"type":"tool_result","tool_use_id":"toolu_1","content":"{\"outbox_id\":1}"},{"type":"text","text":"bench-tool 1"}]`, "", false},
		{"its tool result, after the earlier one", `[{"type":"tool_result","tool_use_id":"toolu_1","content":"{\"outbox_id\":1}"},` +
			`{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"{\"outbox_id\":2}"}]},{"type":"text","text":"bench-tool 1"}]`, `{"outbox_id":2}`, true},
		{"a plain turn after it", `[{"type":"tool_result","tool_use_id":"toolu_1","content":"a"},{"type":"tool_result","tool_use_id":"toolu_2","content":"b"},{"type":"text","text":"bench-plain 2"}]`, "", false},
	}
	for _, s := range steps {
		got, fresh := u.freshToolResult(request(t, s.blocks))
		if got != s.want || fresh != s.fresh {
			t.Errorf("%s: freshToolResult = %q, %v; want %q, %v", s.name, got, fresh, s.want, s.fresh)
		}
	}
}

func TestTurnAccountCheck(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		a    turnAccount
		kind string
		ok   bool
	}{
		{"a plain turn that asked the model", turnAccount{first: now, requests: 1}, msgPlain, true},
		{"a turn that never asked the model", turnAccount{}, msgPlain, false},
		{"a tool turn whose reply reached the outbox", turnAccount{first: now, requests: 2, toolOK: 1}, msgTool, true},
		{"a tool turn that never called the tool", turnAccount{first: now, requests: 1}, msgTool, false},
		{"a tool turn whose call failed", turnAccount{first: now, requests: 2, toolBad: []string{"refused"}}, msgTool, false},
	} {
		if err := tc.a.check(tc.kind); (err == nil) != tc.ok {
			t.Errorf("%s: check = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestRefusal(t *testing.T) {
	for log, want := range map[string]string{
		"starting\narizukod serve: /var/tmp/x/arizukod.toml:12: warm_agents: unknown key\n": "warm_agents: unknown key",
		"something else went wrong": "something else went wrong",
	} {
		if got := refusal(log); got != want {
			t.Errorf("refusal(%q) = %q, want %q", log, got, want)
		}
	}
}
