package ipc_test

import (
	"testing"

	"github.com/arizuko/arizukod/ipc"
)

// TestReplyTarget: send_reply without chat_jid goes to the chat the turn answers; a turn
// that answers no chat gets a tool error naming chat_jid, and the outbox gets no row
// without a target.
func TestReplyTarget(t *testing.T) {
	tests := []struct {
		name    string
		replyTo string
		args    map[string]any
		target  string // "": a tool error
	}{
		{"the turn's chat", "tg:-100", map[string]any{"text": "hi"}, "tg:-100"},
		{"a chat named", "tg:-100", map[string]any{"text": "hi", "chat_jid": "wa:1"}, "wa:1"},
		{"no chat known, one named", "", map[string]any{"text": "hi", "chat_jid": "wa:1"}, "wa:1"},
		{"no chat known", "", map[string]any{"text": "hi"}, ""},
		{"an empty chat named", "tg:-100", map[string]any{"text": "hi", "chat_jid": ""}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.start(t, "main", func(c *ipc.ServerConfig) { c.ReplyTo = tt.replyTo })
			r := call(t, dial(t, s.SocketPath()), "send_reply", tt.args)
			items, err := e.st.ListOutbox(e.ctx, "main", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tt.target == "" {
				mustFail(t, "send_reply", r, "chat_jid")
				if len(items) != 0 {
					t.Errorf("a refused reply left outbox rows: %+v", items)
				}
				return
			}
			if out := mustOK(t, "send_reply", r); out["chat_jid"] != tt.target {
				t.Errorf("result %v, want chat_jid %s", out, tt.target)
			}
			if len(items) != 1 || items[0].Target != tt.target || items[0].Kind != "reply" || items[0].Content != "hi" {
				t.Errorf("outbox %+v, want one reply to %s", items, tt.target)
			}
		})
	}
}
