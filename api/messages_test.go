package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/queue"
	"github.com/arizuko/arizukod/store"
)

// messagesServer is the API over a real store with main registered and a route of
// telegram messages to it, and a queue that runs nothing.
func messagesServer(t *testing.T) (*api.Server, *store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.UpsertGroup(ctx, store.Group{Folder: "main"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddRoute(ctx, store.Route{Seq: 1, Match: "platform=telegram", Target: "main"}); err != nil {
		t.Fatal(err)
	}
	return api.New(st, idleQueue{changed: make(chan struct{})}, okHealth{}, slog.New(slog.NewTextHandler(io.Discard, nil))), st
}

func serve(t *testing.T, srv *api.Server, method, path, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, "http://arizukod"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// TestInboxKeepsChatAndSender: both ways into a group's inbox keep each message's chat
// and sender, a message's own taking precedence over the request's.
func TestInboxKeepsChatAndSender(t *testing.T) {
	srv, st := messagesServer(t)
	ctx := context.Background()
	for _, c := range []struct{ path, body string }{
		{"/v1/messages", `{"platform":"telegram","chatJid":"tg:-100","sender":"tg:1","content":"routed"}`},
		{"/v1/groups/main/messages", `{"senderJid":"tg:2","chatJid":"tg:-200","messages":[{"content":"posted"},` +
			`{"content":"own sender and chat","senderJid":"tg:3","chatJid":"tg:-300"},{"content":"no chat"}]}`},
		{"/v1/groups/main/messages", `{"messages":[{"content":"nothing known"}]}`},
	} {
		if code, body := serve(t, srv, http.MethodPost, c.path, c.body); code != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", c.path, code, body)
		}
	}
	pending, err := st.PendingInbox(ctx, "main", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ content, sender, chat string }{
		{"routed", "tg:1", "tg:-100"},
		{"posted", "tg:2", "tg:-200"},
		{"own sender and chat", "tg:3", "tg:-300"},
		{"no chat", "tg:2", "tg:-200"},
		{"nothing known", "", ""},
	}
	if len(pending) != len(want) {
		t.Fatalf("%d messages in the inbox, want %d: %+v", len(pending), len(want), pending)
	}
	for i, w := range want {
		if m := pending[i]; m.Content != w.content || m.SenderJID != w.sender || m.ChatJID != w.chat || m.CreatedAt == 0 {
			t.Errorf("message %d: %q from %q in %q at %d, want %q from %q in %q", i, m.Content, m.SenderJID, m.ChatJID, m.CreatedAt, w.content, w.sender, w.chat)
		}
	}
}

// TestRunKeepsChat: POST /v1/runs keeps the run's chat and each message's sender and chat
// in the run's input.
func TestRunKeepsChat(t *testing.T) {
	srv, st := messagesServer(t)
	code, body := serve(t, srv, http.MethodPost, "/v1/runs", `{"folder":"main","chatJid":"tg:-100","senderJid":"tg:1",`+
		`"messages":[{"content":"a","senderJid":"tg:2","chatJid":"tg:-200","time":"2030-01-02T15:04:05Z"},{"content":"b"}]}`)
	if code != http.StatusAccepted {
		t.Fatalf("POST /v1/runs: %d %s", code, body)
	}
	var run apiwire.Run
	if err := json.Unmarshal([]byte(body), &run); err != nil {
		t.Fatal(err)
	}
	stored, err := st.GetRun(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var in queue.RunInput
	if err := json.Unmarshal(stored.Input, &in); err != nil {
		t.Fatal(err)
	}
	m := in.Messages
	if in.ChatJID != "tg:-100" || in.SenderJID != "tg:1" || len(m) != 2 ||
		m[0].SenderJID != "tg:2" || m[0].ChatJID != "tg:-200" || m[0].Time != "2030-01-02T15:04:05Z" || m[1].ChatJID != "" {
		t.Errorf("stored input %s", stored.Input)
	}
}

// TestMessageFieldsRefused: a bad chat, sender or time is a 400 naming the field, and
// nothing is stored.
func TestMessageFieldsRefused(t *testing.T) {
	srv, st := messagesServer(t)
	long := strings.Repeat("x", api.MaxJIDBytes+1)
	tests := []struct {
		name, path, body, field string
	}{
		{"inbox chat too long", "/v1/groups/main/messages", `{"chatJid":"` + long + `","messages":[{"content":"x"}]}`, "chatJid"},
		{"inbox chat with a newline", "/v1/groups/main/messages", `{"chatJid":"tg:1\n","messages":[{"content":"x"}]}`, "chatJid"},
		{"inbox sender with NUL", "/v1/groups/main/messages", `{"senderJid":"a\u0000b","messages":[{"content":"x"}]}`, "senderJid"},
		{"inbox message chat too long", "/v1/groups/main/messages", `{"messages":[{"content":"x","chatJid":"` + long + `"}]}`, "messages[0].chatJid"},
		{"inbox message time", "/v1/groups/main/messages", `{"messages":[{"content":"x","time":"2030-01-02T15:04:05Z"}]}`, "messages[0].time"},
		{"inbox chat_jid is the old name", "/v1/groups/main/messages", `{"chat_jid":"tg:1","messages":[{"content":"x"}]}`, "chat_jid"},
		{"inbound chat_jid is the old name", "/v1/messages", `{"platform":"telegram","chat_jid":"tg:1","content":"x"}`, "chat_jid"},
		{"group container_config is the old name", "/v1/groups", `{"folder":"newg","container_config":{}}`, "container_config"},
		{"inbound chat too long", "/v1/messages", `{"platform":"telegram","chatJid":"` + long + `","content":"x"}`, "chatJid"},
		{"inbound sender with a tab", "/v1/messages", `{"platform":"telegram","sender":"a\tb","content":"x"}`, "sender"},
		{"run chat too long", "/v1/runs", `{"folder":"main","chatJid":"` + long + `","messages":[{"content":"x"}]}`, "chatJid"},
		{"run message time not RFC 3339", "/v1/runs", `{"folder":"main","messages":[{"content":"x","time":"yesterday"}]}`, "messages[0].time"},
		{"run message sender with ESC", "/v1/runs", `{"folder":"main","messages":[{"content":"x","senderJid":"\u001b[2J"}]}`, "messages[0].senderJid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := serve(t, srv, http.MethodPost, tt.path, tt.body)
			var e struct{ Error, Field string }
			json.NewDecoder(bytes.NewReader([]byte(body))).Decode(&e)
			if code != http.StatusBadRequest || e.Field != tt.field || !strings.Contains(e.Error, tt.field) {
				t.Errorf("HTTP %d %s, want 400 naming %s", code, body, tt.field)
			}
			if strings.HasSuffix(tt.name, "the old name") && !strings.Contains(e.Error, "camelCase") {
				t.Errorf("%s: %q does not give the field's name now", tt.name, e.Error)
			}
		})
	}
	if pending, err := st.PendingInbox(context.Background(), "main", 0); err != nil || len(pending) != 0 {
		t.Errorf("refused requests stored messages: %+v %v", pending, err)
	}
	if runs, err := st.ListRuns(context.Background(), store.RunFilter{}); err != nil || len(runs) != 0 {
		t.Errorf("refused requests made runs: %d %v", len(runs), err)
	}
}
