package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/delivery"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
	"github.com/arizuko/arizukod/store"
)

// deliveryDaemon is a daemon on Podman 4 with a short visibility timeout and a webhook
// for the chats wh:*, whose receiver socket is hookSock (nothing listens there at first).
func deliveryDaemon(t *testing.T, maxRunning int) (d *daemontest.Daemon, hookSock string, secret []byte) {
	fake := fakemodel.Start()
	t.Cleanup(fake.Close)
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Text: "echo: " + r.LastUserText(), InputTokens: 21, OutputTokens: 8}
	}
	dir := t.TempDir()
	hookSock = filepath.Join(dir, "hook.sock")
	secret = []byte("shared-" + daemontest.RandHex(8))
	if err := os.WriteFile(filepath.Join(dir, "secret"), append(secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	d = daemontest.New(t, daemontest.Config{Engine: daemontest.Podman4(t), MaxRunning: maxRunning,
		EnvFile: "ANTHROPIC_API_KEY=sk-ant-test-" + daemontest.RandHex(8) + "\n", TOML: fmt.Sprintf(`
[model]
upstream = %q

[delivery]
visibility_timeout = "2s"
max_attempts = 5

[[webhook]]
url = "unix:%s"
secret_file = %q
platform = "wh"
backoff = "1s"
max_backoff = "2s"
`, fake.URL, hookSock, filepath.Join(dir, "secret"))})
	d.Start(t)
	return d, hookSock, secret
}

// route sends content as a chat message of chat through POST /v1/messages.
func route(t *testing.T, d *daemontest.Daemon, chat, content string) {
	t.Helper()
	body, _ := json.Marshal(apiwire.InboundMessage{Platform: "test", ChatJID: chat, Sender: chat + "/user", Content: content})
	if code, out, err := d.Do(http.MethodPost, "/v1/messages", "application/json", body); err != nil || code != http.StatusAccepted {
		t.Fatalf("POST /v1/messages (%s): %d %s %v", chat, code, out, err)
	}
}

// settle waits until every message of folders was handled: their turns ended and wrote
// their rows.
func settle(t *testing.T, st *store.Store, folders ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for _, f := range folders {
		for {
			pending, err := st.PendingInbox(context.Background(), f, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(pending) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("folder %s still has %d messages unhandled", f, len(pending))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// consumer is a gateway reading GET /v1/outbox: it records every row it is handed and
// acks them.
type consumer struct {
	mu   sync.Mutex
	rows []apiwire.OutboxRow
	at   map[int64]time.Time // when each row was handed out first
	errs []string
}

func (c *consumer) run(ctx context.Context, cl *apiwire.Client, q apiwire.OutboxQuery) {
	for ctx.Err() == nil {
		lease, err := cl.LeaseOutbox(ctx, q)
		rows := lease.Items
		if err != nil {
			if ctx.Err() == nil {
				c.mu.Lock()
				c.errs = append(c.errs, err.Error())
				c.mu.Unlock()
			}
			continue
		}
		if len(rows) == 0 {
			continue
		}
		now := time.Now()
		ids := make([]int64, len(rows))
		c.mu.Lock()
		for i, r := range rows {
			ids[i] = r.ID
			if _, ok := c.at[r.ID]; !ok {
				c.at[r.ID] = now
			}
		}
		c.rows = append(c.rows, rows...)
		c.mu.Unlock()
		if _, err := cl.AckOutbox(context.WithoutCancel(ctx), lease.Lease, ids...); err != nil {
			c.mu.Lock()
			c.errs = append(c.errs, "ack: "+err.Error())
			c.mu.Unlock()
		}
	}
}

func (c *consumer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.rows)
}

// waitFor polls cond every 100 ms for up to limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkOnceInOrder reports a row handed out twice, out of id order, or missing from want.
func checkOnceInOrder(t *testing.T, who string, got []apiwire.OutboxRow, want []store.OutboxItem) {
	t.Helper()
	seen := map[int64]bool{}
	for i, r := range got {
		if seen[r.ID] {
			t.Errorf("%s got row %d twice", who, r.ID)
		}
		seen[r.ID] = true
		if i > 0 && r.ID <= got[i-1].ID {
			t.Errorf("%s got row %d after row %d", who, r.ID, got[i-1].ID)
		}
	}
	for _, w := range want {
		if !seen[w.ID] {
			t.Errorf("%s never got row %d (%s to %s: %q)", who, w.ID, w.Kind, w.Target, w.Content)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%s got %d rows, want %d", who, len(seen), len(want))
	}
}

// TestDelivery runs the example agent through a real daemon on Podman 4: messages routed
// in through POST /v1/messages, answered with send_reply and with the turn's result,
// reach one consumer of GET /v1/outbox once each and in order across two folders; a
// consumer that leases without acking gets its row again after the visibility timeout;
// a row that keeps failing is parked with the reason and retried; a webhook receiver on a
// unix socket that is not there at first gets the webhook's rows, signed, once each; and a
// parked folder and a budget refusal leave a notice for the chat.
func TestDelivery(t *testing.T) {
	ctx := context.Background()
	d, hookSock, secret := deliveryDaemon(t, 5)
	st := d.OpenStore(t)
	for _, f := range []string{"main", "side", "hooked"} {
		d.AddGroup(t, f)
	}
	for i, r := range []struct{ match, target string }{
		{"chat_jid=tg:1", "main"}, {"chat_jid=tg:2", "main"}, {"chat_jid=tg:3", "side"}, {"chat_jid=wh:*", "hooked"},
	} {
		if _, err := st.AddRoute(ctx, store.Route{Seq: int64(i + 1), Match: r.match, Target: r.target}); err != nil {
			t.Fatal(err)
		}
	}

	// (1) One consumer of the whole stream (the chats tg:*), started before anything is
	// there: it gets every row once, in id order, across the folders.
	cctx, stop := context.WithCancel(ctx)
	c := &consumer{at: map[int64]time.Time{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.run(cctx, d.Client, apiwire.OutboxQuery{Platform: "tg", Wait: 5 * time.Second})
	}()
	route(t, d, "tg:1", `mcp send_reply {"text":"hello from the tool"}`)
	route(t, d, "tg:3", "reply the side folder answers")
	settle(t, st, "main", "side")
	route(t, d, "tg:2", "reply the result answers")
	settle(t, st, "main")
	want, err := st.ListOutboxState(ctx, "", store.OutboxFilter{Platform: "tg"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, w := range want {
		kinds = append(kinds, fmt.Sprintf("%s %s %s %q", w.Folder, w.Kind, w.Target, w.Content))
	}
	joined := strings.Join(kinds, "\n")
	for _, sub := range []string{`main reply tg:1 "hello from the tool"`, `main result tg:1`, `side result tg:3 "the side folder answers"`, `main result tg:2 "the result answers"`} {
		if !strings.Contains(joined, sub) {
			t.Errorf("outbox lacks %s:\n%s", sub, joined)
		}
	}
	waitFor(t, time.Minute, "the consumer did not get every row", func() bool { return c.count() >= len(want) })
	stop()
	wg.Wait()
	checkOnceInOrder(t, "the consumer", c.rows, want)
	if len(c.errs) > 0 {
		t.Errorf("consumer errors: %q", c.errs)
	}
	for _, w := range want {
		if r, err := d.Client.GetOutbox(ctx, w.ID); err != nil || r.State != "delivered" || r.Attempts != 1 || r.DeliveredAt == 0 {
			t.Errorf("row %d after its ack: %+v %v", w.ID, r, err)
		}
	}

	// (2) A consumer killed before acking: its row comes again once the visibility
	// timeout (2 s) passes, to the next long poll, with a second attempt.
	route(t, d, "tg:1", "reply once more")
	settle(t, st, "main")
	firstLease, err := d.Client.LeaseOutbox(ctx, apiwire.OutboxQuery{Chat: "tg:1", Wait: 30 * time.Second})
	first := firstLease.Items
	if err != nil || len(first) != 1 || first[0].Content != "once more" || first[0].Attempts != 1 {
		t.Fatalf("lease: %+v %v", first, err)
	}
	againLease, err := d.Client.LeaseOutbox(ctx, apiwire.OutboxQuery{Chat: "tg:1", Wait: 30 * time.Second})
	again := againLease.Items
	if err != nil || len(again) != 1 || again[0].ID != first[0].ID || again[0].Attempts != 2 {
		t.Fatalf("after the visibility timeout: %+v %v, want row %d again", again, err, first[0].ID)
	}
	// The killed consumer's lease is over: only the new one acks the row.
	if _, err := d.Client.AckOutbox(ctx, firstLease.Lease, again[0].ID); err == nil {
		t.Errorf("the first lease acked the row handed out again")
	}
	if n, err := d.Client.AckOutbox(ctx, againLease.Lease, again[0].ID); err != nil || n != 1 {
		t.Fatalf("ack: %d %v", n, err)
	}

	// (3) A row the gateway cannot deliver: failed max_attempts (5) times, it is parked
	// with the reason, and retry makes it pending again.
	route(t, d, "tg:2", "reply to a chat that is gone")
	settle(t, st, "main")
	var parked apiwire.OutboxRow
	for attempt := 1; parked.State != "parked"; attempt++ {
		lease, err := d.Client.LeaseOutbox(ctx, apiwire.OutboxQuery{Chat: "tg:2", Wait: 30 * time.Second})
		rows := lease.Items
		if err != nil || len(rows) != 1 || rows[0].Attempts != attempt {
			t.Fatalf("lease %d: %+v %v", attempt, rows, err)
		}
		if parked, err = d.Client.FailOutbox(ctx, lease.Lease, rows[0].ID, "telegram: chat not found"); err != nil {
			t.Fatal(err)
		}
		if attempt > 5 {
			t.Fatalf("still %s after %d failures", parked.State, attempt)
		}
	}
	list, err := d.Client.LeaseOutbox(ctx, apiwire.OutboxQuery{State: "parked"})
	if err != nil || len(list.Items) != 1 || list.Items[0].ID != parked.ID || list.Items[0].LastError != "failed 5 times: telegram: chat not found" || list.Lease != "" {
		t.Errorf("GET /v1/outbox?state=parked: %+v %v", list, err)
	}
	if r, err := d.Client.RetryOutbox(ctx, parked.ID); err != nil || r.State != "pending" || r.Attempts != 0 {
		t.Errorf("retry: %+v %v", r, err)
	}
	if lease, err := d.Client.LeaseOutbox(ctx, apiwire.OutboxQuery{Chat: "tg:2"}); err != nil || len(lease.Items) != 1 || lease.Items[0].ID != parked.ID {
		t.Errorf("lease after retry: %+v %v", lease, err)
	} else {
		d.Client.AckOutbox(ctx, lease.Lease, parked.ID)
	}

	// (4) The webhook: its receiver is not there at first; once a row failed twice the
	// receiver starts, and gets the rows, signed, once each and in order.
	route(t, d, "wh:1", `mcp send_reply {"text":"pushed by the tool"}`)
	settle(t, st, "hooked")
	hookRows, err := st.ListOutboxState(ctx, "", store.OutboxFilter{Platform: "wh"})
	if err != nil || len(hookRows) != 2 {
		t.Fatalf("webhook rows: %+v %v, want a reply and a result", hookRows, err)
	}
	waitFor(t, time.Minute, "the webhook never failed twice", func() bool {
		r, err := d.Client.GetOutbox(ctx, hookRows[0].ID)
		return err == nil && r.Attempts >= 2 && r.LastError != ""
	})
	rc := &hookReceiver{secret: secret}
	l, err := net.Listen("unix", hookSock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rc}
	go srv.Serve(l)
	defer srv.Close()
	delivered := func(rows []store.OutboxItem) func() bool {
		return func() bool {
			for _, w := range rows {
				if r, err := d.Client.GetOutbox(ctx, w.ID); err != nil || r.State != "delivered" {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, time.Minute, "the webhook rows were not delivered", delivered(hookRows))
	// One more row after the others were acked: the worker pushes in order, so any
	// duplicate of the earlier rows would reach the receiver before it.
	route(t, d, "wh:1", "reply the last push")
	settle(t, st, "hooked")
	hookRows, _ = st.ListOutboxState(ctx, "", store.OutboxFilter{Platform: "wh"})
	waitFor(t, time.Minute, "the last webhook row was not delivered", delivered(hookRows))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	checkOnceInOrder(t, "the webhook receiver", rc.rows, hookRows)
	if len(rc.bad) > 0 {
		t.Errorf("webhook receiver saw %q", rc.bad)
	}
	t.Logf("stream: %d rows to one consumer; webhook: %d rows after %d failed pushes", len(want), len(hookRows), hookRows[0].Attempts-1)

	// (5) Notices: a folder parked after its turns failed (retry_max 2), and a turn the
	// model gateway refused for the group's budget, each tell the chat in a short row.
	route(t, d, "tg:3", "fatal the agent crashed")
	d.PutGroup(t, "main", `{"model": {"tokens_per_day": 20}}`)
	route(t, d, "tg:1", "model first")
	settle(t, st, "main")
	route(t, d, "tg:1", "model second")
	settle(t, st, "main")
	notices := map[string]string{}
	waitFor(t, 2*time.Minute, "no notice for the parked folder", func() bool {
		lease, err := d.Client.LeaseOutbox(ctx, apiwire.OutboxQuery{Platform: "tg"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range lease.Items {
			if r.Kind == "notice" {
				notices[r.Target] = r.Content
			}
			d.Client.AckOutbox(ctx, lease.Lease, r.ID)
		}
		return notices["tg:3"] != ""
	})
	if n := notices["tg:3"]; !strings.Contains(n, "paused") || !strings.Contains(n, "the agent crashed") {
		t.Errorf("parked notice %q", n)
	}
	if n := notices["tg:1"]; !strings.Contains(n, "budget reached") || !strings.Contains(n, "tokens_per_day") {
		t.Errorf("budget notice %q", n)
	}
}

// hookReceiver is a gateway's webhook endpoint: it checks the signature and records rows.
type hookReceiver struct {
	secret []byte
	mu     sync.Mutex
	rows   []apiwire.OutboxRow
	bad    []string
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	var row apiwire.OutboxRow
	switch {
	case r.Header.Get(delivery.HeaderSignature) != delivery.Sign(h.secret, body):
		h.bad = append(h.bad, "bad signature on "+string(body))
	case json.Unmarshal(body, &row) != nil:
		h.bad = append(h.bad, "bad body "+string(body))
	default:
		h.rows = append(h.rows, row)
	}
}

// TestDeliveryLoad routes 500 messages over 20 chats (one folder each) through a real
// daemon on Podman 4 while one consumer reads the stream: every message is answered (the
// turn that covers it delivers its result to its chat), no row is lost and none is handed
// out twice.
func TestDeliveryLoad(t *testing.T) {
	enginetest.Long(t, "the 500-message delivery test")
	const messages, chats = 500, 20
	ctx := context.Background()
	d, _, _ := deliveryDaemon(t, 5)
	st := d.OpenStore(t)
	folders := make([]string, chats)
	for i := range folders {
		folders[i] = fmt.Sprintf("load%02d", i+1)
		d.AddGroup(t, folders[i])
		if _, err := st.AddRoute(ctx, store.Route{Seq: int64(i + 1), Match: fmt.Sprintf("chat_jid=tg:%d", i+1), Target: folders[i]}); err != nil {
			t.Fatal(err)
		}
	}
	cctx, stop := context.WithCancel(ctx)
	c := &consumer{at: map[int64]time.Time{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.run(cctx, d.Client, apiwire.OutboxQuery{Wait: 5 * time.Second, Limit: 500}) }()
	type post struct {
		at     time.Time
		folder string
	}
	posted := map[int64]post{} // inbox id -> when and to which folder it was posted
	t0 := time.Now()
	for i := 0; i < messages; i++ {
		chat := i%chats + 1
		body, _ := json.Marshal(apiwire.InboundMessage{Platform: "test", ChatJID: fmt.Sprintf("tg:%d", chat), Content: fmt.Sprintf("reply m%d", i)})
		var out struct{ IDs []int64 }
		if err := d.Client.Do(ctx, http.MethodPost, "/v1/messages", json.RawMessage(body), &out); err != nil || len(out.IDs) != 1 {
			t.Fatalf("message %d: %v %v", i, out, err)
		}
		posted[out.IDs[0]] = post{time.Now(), folders[chat-1]}
	}
	settle(t, st, folders...)
	want, err := st.ListOutboxState(ctx, "", store.OutboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the consumer did not get every row", func() bool { return c.count() >= len(want) })
	took := time.Since(t0)
	stop()
	wg.Wait()
	checkOnceInOrder(t, "the consumer", c.rows, want)

	// Every message is covered by one run, whose result went to the message's chat.
	byRun := map[string]store.OutboxItem{}
	for _, w := range want {
		if _, dup := byRun[w.RunID]; dup || w.Kind != store.OutboxResult {
			t.Errorf("row %+v: want one result per run", w)
		}
		byRun[w.RunID] = w
	}
	answered, turns := 0, 0
	var lat []time.Duration
	for _, f := range folders {
		runs, err := st.ListRuns(ctx, store.RunFilter{Folder: f})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			turns++
			res, ok := byRun[r.ID]
			if !ok || r.Status != store.StatusOK {
				t.Errorf("run %s (%s, messages %d..%d) delivered no result", r.ID, r.Status, r.InboxFirst, r.InboxLast)
				continue
			}
			for id := r.InboxFirst; id <= r.InboxLast; id++ {
				if p, ok := posted[id]; ok && p.folder == f {
					answered++
					lat = append(lat, c.at[res.ID].Sub(p.at))
				}
			}
		}
	}
	if answered != messages {
		t.Errorf("%d of %d messages answered", answered, messages)
	}
	if len(c.errs) > 0 {
		t.Errorf("consumer errors: %q", c.errs[:min(len(c.errs), 5)])
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		t.Logf("%d messages over %d chats: %d turns, %d rows delivered once each in %s (%.1f rows/s, %.1f messages/s); message to delivered p50 %s p90 %s max %s",
			messages, chats, turns, len(want), took.Round(time.Millisecond), float64(len(want))/took.Seconds(), float64(messages)/took.Seconds(),
			lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*9/10].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	}
}

// TestReloadDelivery: [[webhook]] and [delivery] apply at a reload (SIGHUP), and the
// journal names them: a webhook added to a running daemon gets the rows of its chats,
// also one written before the reload, signed and in order; the new visibility timeout
// hands a row leased and not acknowledged out again after it.
func TestReloadDelivery(t *testing.T) {
	daemontest.JournalOn(t)
	ctx := context.Background()
	dir := t.TempDir()
	hookSock, secretFile := filepath.Join(dir, "hook.sock"), filepath.Join(dir, "secret")
	secret := []byte("shared-" + daemontest.RandHex(8))
	if err := os.WriteFile(secretFile, append(secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	rc := &hookReceiver{secret: secret}
	l, err := net.Listen("unix", hookSock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rc}
	go srv.Serve(l)
	defer srv.Close()

	d := daemontest.New(t, daemontest.Config{Engine: daemontest.Podman4(t)})
	d.Start(t)
	d.AddGroup(t, "main")
	st := d.OpenStore(t)
	send := func(chat, content string) {
		t.Helper()
		req := apiwire.InboxRequest{Messages: []contract.Message{{Content: content}}, ChatJID: chat}
		if err := d.Client.Do(ctx, http.MethodPost, "/v1/groups/main/messages", req, nil); err != nil {
			t.Fatal(err)
		}
		settle(t, st, "main")
	}
	send("wh:1", "reply written before the reload")

	good, err := os.ReadFile(d.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	added := fmt.Sprintf("[delivery]\nvisibility_timeout = \"2s\"\n\n[[webhook]]\nurl = \"unix:%s\"\nsecret_file = %q\nplatform = \"wh\"\n", hookSock, secretFile)
	if err := os.WriteFile(d.ConfigPath, append(good, added...), 0o644); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(d.Pid(), syscall.SIGHUP)
	es := daemontest.WaitJournal(t, 30*time.Second, daemontest.HasMessage("configuration reloaded"), "_PID="+strconv.Itoa(d.Pid()))
	if c := daemontest.Find(es, "configuration reloaded")["CHANGED"]; !strings.Contains(c, "webhook") || !strings.Contains(c, "delivery") {
		t.Errorf("reloaded: changed %q, want webhook and delivery", c)
	}

	send("wh:1", "reply written after the reload")
	rows, err := st.ListOutboxState(ctx, "", store.OutboxFilter{Platform: "wh"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("webhook rows %+v %v", rows, err)
	}
	waitFor(t, time.Minute, "the new webhook got no rows", func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return len(rc.rows) >= len(rows)
	})
	rc.mu.Lock()
	checkOnceInOrder(t, "the webhook added by the reload", rc.rows, rows)
	if len(rc.bad) > 0 {
		t.Errorf("webhook receiver saw %q", rc.bad)
	}
	rc.mu.Unlock()

	send("tg:1", "reply leased and dropped")
	first, err := d.Client.LeaseOutbox(ctx, apiwire.OutboxQuery{Chat: "tg:1", Wait: 30 * time.Second})
	if err != nil || len(first.Items) != 1 {
		t.Fatalf("lease: %+v %v", first, err)
	}
	t0 := time.Now()
	again, err := d.Client.LeaseOutbox(ctx, apiwire.OutboxQuery{Chat: "tg:1", Wait: 30 * time.Second})
	if err != nil || len(again.Items) != 1 || again.Items[0].ID != first.Items[0].ID {
		t.Fatalf("lease again: %+v %v", again, err)
	}
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("the row came again after %s: the reloaded visibility_timeout (2s) does not apply", took)
	}
	d.Client.AckOutbox(ctx, again.Lease, again.Items[0].ID)
}
