package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/store"
)

// TestReplies runs the example agent through a real daemon on every rootful engine: an
// inbound chat message routed by POST /v1/messages whose agent calls send_reply without a
// chat_jid leaves an outbox row for the message's chat; a batch of two senders reaches the
// agent with each message's sender, chat and time; a turn that answers no chat gets a tool
// error and leaves no row; POST /v1/runs's chatJid is the chat its turn answers. The group
// sets deliver_result false, so the rows are the tools' only.
func TestReplies(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) { testReplies(t, e) })
	}
}

func testReplies(t *testing.T, e enginetest.Engine) {
	ctx := context.Background()
	t0 := time.Now()
	d := daemontest.New(t, daemontest.Config{Engine: e})
	d.Start(t)
	t.Logf("%s: daemon up in %s", e.Name, time.Since(t0).Round(time.Millisecond))
	// This agent answers through send_reply: its turns' results stay out of the outbox.
	d.PutGroup(t, "main", `{"deliver_result": false}`)
	st := d.OpenStore(t)
	if _, err := st.AddRoute(ctx, store.Route{Seq: 1, Match: "platform=telegram", Target: "main"}); err != nil {
		t.Fatal(err)
	}

	// (1) A chat message through the routes (`arizukod inbox route`, which is
	// POST /v1/messages): its turn's send_reply without chat_jid answers its chat.
	t0 = time.Now()
	out, err := exec.Command(d.Bin, "inbox", "route", "--socket", d.Socket, "--platform", "telegram",
		"--chat", "tg:-100", "--sender", "tg:1", "--message", `mcp send_reply {"text":"hello back"}`).CombinedOutput()
	if err != nil {
		t.Fatalf("arizukod inbox route: %v\n%s", err, out)
	}
	var routed struct {
		Folder string  `json:"folder"`
		IDs    []int64 `json:"ids"`
	}
	if err := json.Unmarshal(out, &routed); err != nil || routed.Folder != "main" || len(routed.IDs) != 1 {
		t.Fatalf("arizukod inbox route printed %s (%v)", out, err)
	}
	r := inboxTurn(t, d, st, routed.IDs[0])
	if a := agentAnswer(t, r); a["isError"] != false {
		t.Errorf("send_reply without chat_jid in a routed turn: %v", a)
	}
	items := outbox(t, d)
	if len(items) != 1 || items[0].Target != "tg:-100" || items[0].Kind != "reply" || items[0].Content != "hello back" || items[0].RunID != r.ID {
		t.Fatalf("outbox after the routed turn: %+v, want one reply to tg:-100 by run %s", items, r.ID)
	}
	t.Logf("%s: routed message to outbox row in %s", e.Name, time.Since(t0).Round(time.Millisecond))

	// (2) A batch of two senders in one request: the agent sees each message's sender,
	// chat and time, and the turn answers the batch's chat.
	code, body, err := d.Do(http.MethodPost, "/v1/groups/main/messages", "application/json",
		[]byte(`{"chatJid":"tg:-200","messages":[{"content":"from alice","senderJid":"tg:1"},{"content":"messages","senderJid":"tg:2"}]}`))
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("POST /v1/groups/main/messages: %d %s %v", code, body, err)
	}
	var posted struct {
		IDs []int64 `json:"ids"`
	}
	json.Unmarshal(body, &posted)
	r = inboxTurn(t, d, st, posted.IDs[len(posted.IDs)-1])
	var seen struct {
		ChatJID   string             `json:"chatJid"`
		SenderJID string             `json:"senderJid"`
		Messages  []contract.Message `json:"messages"`
	}
	if err := json.Unmarshal([]byte(r.Result), &seen); err != nil {
		t.Fatalf("messages turn: %s %q %q (an echo means the image holds an example agent without the messages command)", r.Status, r.Result, r.Error)
	}
	if seen.ChatJID != "tg:-200" || seen.SenderJID != "tg:2" || len(seen.Messages) != 2 {
		t.Fatalf("the batched turn saw %+v", seen)
	}
	for i, want := range []struct{ sender, content string }{{"tg:1", "from alice"}, {"tg:2", "messages"}} {
		m := seen.Messages[i]
		if _, terr := time.Parse(time.RFC3339Nano, m.Time); m.SenderJID != want.sender || m.ChatJID != "tg:-200" || m.Content != want.content || terr != nil {
			t.Errorf("message %d of the batch: %+v, want %s from %s in tg:-200 with a time", i, m, want.content, want.sender)
		}
	}

	// (3) A turn that answers no chat: send_reply without chat_jid is a tool error naming
	// chat_jid, and the outbox gets no row without a target.
	code, body, err = d.Do(http.MethodPost, "/v1/groups/main/messages", "application/json",
		[]byte(`{"senderJid":"tg:1","messages":[{"content":"mcp send_reply {\"text\":\"nowhere\"}"}]}`))
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("POST /v1/groups/main/messages: %d %s %v", code, body, err)
	}
	json.Unmarshal(body, &posted)
	r = inboxTurn(t, d, st, posted.IDs[0])
	if a := agentAnswer(t, r); a["isError"] != true || !strings.Contains(fmt.Sprint(a["text"]), "chat_jid") {
		t.Errorf("send_reply in a turn that answers no chat: %v, want a tool error naming chat_jid", a)
	}
	if after := outbox(t, d); len(after) != 1 {
		t.Errorf("a reply to no chat reached the outbox: %+v", after)
	}

	// (4) POST /v1/runs with chatJid: that is the chat its turn answers.
	run, err := d.Client.CreateRun(ctx, apiwire.CreateRunRequest{Folder: "main", ChatJID: "tg:-300",
		Messages: []contract.Message{{Content: `mcp send_reply {"text":"from a run"}`}}})
	if err != nil {
		t.Fatal(err)
	}
	r = d.Wait(t, run.ID, 2*time.Minute)
	if a := agentAnswer(t, r); a["isError"] != false {
		t.Errorf("send_reply in a run with chatJid: %v", a)
	}
	if after := outbox(t, d); len(after) != 2 || after[1].Target != "tg:-300" || after[1].RunID != r.ID {
		t.Errorf("outbox after the run with chatJid: %+v", after)
	}
}

// routeChat posts content as a telegram message from tg:7 in chat (POST /v1/messages, which
// the group's routes send to main) and returns its inbox id.
func routeChat(t *testing.T, d *daemontest.Daemon, chat, content string) int64 {
	t.Helper()
	msg, _ := json.Marshal(map[string]string{"platform": "telegram", "chatJid": chat, "sender": "tg:7", "content": content})
	code, body, err := d.Do(http.MethodPost, "/v1/messages", "application/json", msg)
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("POST /v1/messages: %d %s %v", code, body, err)
	}
	var routed struct {
		IDs []int64 `json:"ids"`
	}
	if err := json.Unmarshal(body, &routed); err != nil || len(routed.IDs) != 1 {
		t.Fatalf("POST /v1/messages answered %s (%v), want one inbox id", body, err)
	}
	return routed.IDs[0]
}

// inboxTurn waits for the inbox run that covers message id to end.
func inboxTurn(t *testing.T, d *daemontest.Daemon, st *store.Store, id int64) apiwire.Run {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		runs, err := st.ListRuns(context.Background(), store.RunFilter{Folder: "main"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.InboxFirst <= id && id <= r.InboxLast {
				return d.Wait(t, r.ID, 2*time.Minute)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no inbox run covers message %d after a minute", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// outbox is main's outbox, oldest first.
func outbox(t *testing.T, d *daemontest.Daemon) []apiwire.OutboxItem {
	t.Helper()
	var out struct {
		Items []apiwire.OutboxItem `json:"items"`
	}
	if err := d.Client.Do(context.Background(), http.MethodGet, "/v1/groups/main/outbox", nil, &out); err != nil {
		t.Fatal(err)
	}
	return out.Items
}
