package ipc_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/arizuko/arizukod/ipc"
)

// TestHeldServer: a server held for a warm agent answers initialize and tools/list on a
// connection made before its turn, refuses every tools/call (nothing reaches the outbox),
// and serves the same connection once Bind gives it its turn, with the turn's chat and run;
// a second Bind is refused.
func TestHeldServer(t *testing.T) {
	e := newEnv(t)
	s := e.start(t, "main", func(c *ipc.ServerConfig) { c.Held = true })
	c := dial(t, s.SocketPath())
	if tools := listTools(t, c); !slices.Contains(tools, "send_reply") {
		t.Fatalf("tools/list before the turn: %v", tools)
	}
	mustFail(t, "send_reply before the turn", call(t, c, "send_reply", map[string]any{"text": "early", "chat_jid": "tg:1"}), "refused")
	if items, err := e.st.ListOutbox(e.ctx, "main", 0, 0); err != nil || len(items) != 0 {
		t.Fatalf("outbox after a refused call: %+v, %v", items, err)
	}
	if err := s.Bind(ipc.Binding{ReplyTo: "tg:-100", RunID: e.runID}); err != nil {
		t.Fatal(err)
	}
	mustOK(t, "send_reply after Bind", call(t, c, "send_reply", map[string]any{"text": "hi"}))
	items, err := e.st.ListOutbox(e.ctx, "main", 0, 0)
	if err != nil || len(items) != 1 || items[0].Target != "tg:-100" || items[0].RunID != e.runID || items[0].Content != "hi" {
		t.Fatalf("outbox after Bind: %+v, %v; want one reply to tg:-100 by the run", items, err)
	}
	if err := s.Bind(ipc.Binding{}); !errors.Is(err, ipc.ErrBound) {
		t.Errorf("a second Bind: %v, want ErrBound", err)
	}
}
