package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/store"
)

// TestOutboxStream: GET /v1/outbox leases, ack marks delivered, fail parks after the
// attempts, retry resumes, and a long poll is woken by an append.
func TestOutboxStream(t *testing.T) {
	srv, st := messagesServer(t)
	srv.SetDelivery(store.LeasePolicy{Visibility: time.Hour, MaxAttempts: 1})
	ctx := context.Background()
	for _, c := range []string{"tg:1", "dc:2"} {
		if _, err := st.AppendOutbox(ctx, store.OutboxItem{Folder: "main", Kind: store.OutboxMessage, Target: c, Content: "to " + c}); err != nil {
			t.Fatal(err)
		}
	}
	var list apiwire.OutboxList
	code, body := serve(t, srv, http.MethodGet, "/v1/outbox?platform=tg", "")
	if json.Unmarshal([]byte(body), &list); code != http.StatusOK || len(list.Items) != 1 {
		t.Fatalf("GET /v1/outbox?platform=tg: %d %s", code, body)
	}
	row := list.Items[0]
	if row.Target != "tg:1" || row.Platform != "tg" || row.Folder != "main" || row.State != "pending" || row.Attempts != 1 || row.CreatedAt == 0 {
		t.Errorf("row %+v", row)
	}
	if code, body := serve(t, srv, http.MethodPost, "/v1/outbox/ack", fmt.Sprintf(`{"lease":%q,"ids":[1]}`, list.Lease)); code != http.StatusOK || !strings.Contains(body, `"acked": 1`) {
		t.Errorf("ack: %d %s", code, body)
	}
	if code, body := serve(t, srv, http.MethodGet, "/v1/outbox/1", ""); code != http.StatusOK || !strings.Contains(body, `"state": "delivered"`) {
		t.Errorf("get after ack: %d %s", code, body)
	}
	_, body = serve(t, srv, http.MethodGet, "/v1/outbox", "")
	json.Unmarshal([]byte(body), &list)
	if code, body := serve(t, srv, http.MethodPost, "/v1/outbox/fail", fmt.Sprintf(`{"lease":%q,"id":2,"error":"discord: unknown channel"}`, list.Lease)); code != http.StatusOK ||
		!strings.Contains(body, `"state": "parked"`) || !strings.Contains(body, "unknown channel") {
		t.Errorf("fail at max attempts: %d %s", code, body)
	}
	if code, body := serve(t, srv, http.MethodGet, "/v1/outbox?state=parked", ""); code != http.StatusOK || !strings.Contains(body, "failed 1 times: discord: unknown channel") ||
		strings.Contains(body, `"lease"`) {
		t.Errorf("parked list (no lease): %d %s", code, body)
	}
	if code, body := serve(t, srv, http.MethodPost, "/v1/outbox/2/retry", ""); code != http.StatusOK || !strings.Contains(body, `"state": "pending"`) {
		t.Errorf("retry: %d %s", code, body)
	}

	// A long poll returns when a row it matches is appended.
	done := make(chan string, 1)
	go func() {
		_, body := serve(t, srv, http.MethodGet, "/v1/outbox?chat=tg:9&wait=60s", "")
		done <- body
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := st.AppendOutbox(ctx, store.OutboxItem{Folder: "main", Kind: store.OutboxReply, Target: "tg:9", Content: "late"}); err != nil {
		t.Fatal(err)
	}
	if body := <-done; !strings.Contains(body, `"content": "late"`) {
		t.Errorf("long poll got %s", body)
	}
}

// TestOutboxLeaseOwner: a lease's answer carries its token, and only that token acks or
// fails its rows. Consumer B, with its own lease's token or with none, is refused A's rows
// (409 naming the lease, or 400) and nothing changes; A's ack then succeeds.
func TestOutboxLeaseOwner(t *testing.T) {
	srv, st := messagesServer(t)
	ctx := context.Background()
	for _, c := range []string{"tg:1", "tg:2"} {
		if _, err := st.AppendOutbox(ctx, store.OutboxItem{Folder: "main", Kind: store.OutboxMessage, Target: c, Content: "to " + c}); err != nil {
			t.Fatal(err)
		}
	}
	type leased struct {
		Lease string
		Items []apiwire.OutboxRow
	}
	leaseOf := func(query string) leased {
		t.Helper()
		var l leased
		code, body := serve(t, srv, http.MethodGet, "/v1/outbox?"+query, "")
		if err := json.Unmarshal([]byte(body), &l); err != nil || code != http.StatusOK || len(l.Items) != 1 || l.Lease == "" {
			t.Fatalf("GET /v1/outbox?%s: %d %s, want one row and its lease", query, code, body)
		}
		return l
	}
	a, b := leaseOf("chat=tg:1"), leaseOf("chat=tg:2")
	if a.Lease == b.Lease {
		t.Fatalf("A and B got the same lease %q", a.Lease)
	}
	rowA := a.Items[0].ID
	for _, c := range []struct {
		name, path, body string
		code             int
	}{
		{"B acks with its token", "/v1/outbox/ack", fmt.Sprintf(`{"lease":%q,"ids":[%d]}`, b.Lease, rowA), http.StatusConflict},
		{"B acks without a token", "/v1/outbox/ack", fmt.Sprintf(`{"ids":[%d]}`, rowA), http.StatusBadRequest},
		{"B fails with its token", "/v1/outbox/fail", fmt.Sprintf(`{"lease":%q,"id":%d,"error":"x"}`, b.Lease, rowA), http.StatusConflict},
		{"B fails without a token", "/v1/outbox/fail", fmt.Sprintf(`{"id":%d,"error":"x"}`, rowA), http.StatusBadRequest},
	} {
		code, body := serve(t, srv, http.MethodPost, c.path, c.body)
		var e struct{ Error, Field string }
		json.Unmarshal([]byte(body), &e)
		if code != c.code || e.Field != "lease" {
			t.Errorf("%s: %d %s, want %d naming the lease", c.name, code, body, c.code)
		}
		if c.code == http.StatusConflict && !strings.Contains(e.Error, b.Lease) {
			t.Errorf("%s: the 409 %q does not name the lease presented", c.name, e.Error)
		}
	}
	if it, err := st.GetOutbox(ctx, rowA); err != nil || it.State != store.OutboxPending || it.LastError != "" {
		t.Errorf("A's row after B's tries: %+v %v, want it pending and untouched", it, err)
	}
	if code, body := serve(t, srv, http.MethodPost, "/v1/outbox/ack", fmt.Sprintf(`{"lease":%q,"ids":[%d]}`, a.Lease, rowA)); code != http.StatusOK {
		t.Errorf("A acks its row: %d %s", code, body)
	}
	if it, err := st.GetOutbox(ctx, rowA); err != nil || it.State != store.OutboxDelivered {
		t.Errorf("A's row after A's ack: %+v %v", it, err)
	}
}

// TestOutboxBadInput: every mistake is a 4xx naming the field.
func TestOutboxBadInput(t *testing.T) {
	srv, _ := messagesServer(t)
	tests := []struct {
		method, path, body string
		code               int
		field              string
	}{
		{http.MethodGet, "/v1/outbox?wait=forever", "", 400, "wait"},
		{http.MethodGet, "/v1/outbox?wait=61s", "", 400, "wait"},
		{http.MethodGet, "/v1/outbox?after=-1", "", 400, "after"},
		{http.MethodGet, "/v1/outbox?limit=0", "", 400, "limit"},
		{http.MethodGet, "/v1/outbox?folder=../x", "", 400, "folder"},
		{http.MethodGet, "/v1/outbox?platform=tg:1", "", 400, "platform"},
		{http.MethodGet, "/v1/outbox?chat=%01", "", 400, "chat"},
		{http.MethodGet, "/v1/outbox?state=lost", "", 400, "state"},
		{http.MethodPost, "/v1/outbox/ack", `{"lease":"L"}`, 400, "ids"},
		{http.MethodPost, "/v1/outbox/ack", `{"lease":"L","ids":[0]}`, 400, "ids[0]"},
		{http.MethodPost, "/v1/outbox/ack", `{"lease":"L","ids":["x"]}`, 400, "ids"},
		{http.MethodPost, "/v1/outbox/ack", `{"lease":"L","ids":[77]}`, 404, "ids"},
		{http.MethodPost, "/v1/outbox/ack", `{"id":[1]}`, 400, "id"},
		{http.MethodPost, "/v1/outbox/ack", `{"ids":[1]}`, 400, "lease"},
		{http.MethodPost, "/v1/outbox/ack", `{"lease":"a b","ids":[1]}`, 400, "lease"},
		{http.MethodPost, "/v1/outbox/ack", `{"lease":7,"ids":[1]}`, 400, "lease"},
		{http.MethodPost, "/v1/outbox/fail", `{"lease":"L","error":"x"}`, 400, "id"},
		{http.MethodPost, "/v1/outbox/fail", `{"lease":"L","id":1}`, 400, "error"},
		{http.MethodPost, "/v1/outbox/fail", `{"lease":"L","id":1,"error":"x","retryAfter":"-1s"}`, 400, "retryAfter"},
		{http.MethodPost, "/v1/outbox/fail", `{"lease":"L","id":77,"error":"x"}`, 404, "id"},
		{http.MethodPost, "/v1/outbox/fail", `{"id":1,"error":"x"}`, 400, "lease"},
		{http.MethodGet, "/v1/outbox/x", "", 400, "id"},
		{http.MethodGet, "/v1/outbox/77", "", 404, "id"},
		{http.MethodPost, "/v1/outbox/77/retry", "", 404, "id"},
	}
	for _, tt := range tests {
		code, body := serve(t, srv, tt.method, tt.path, tt.body)
		var e struct{ Field string }
		json.Unmarshal([]byte(body), &e)
		if code != tt.code || e.Field != tt.field {
			t.Errorf("%s %s %s: %d %s, want %d naming %s", tt.method, tt.path, tt.body, code, body, tt.code, tt.field)
		}
	}
}

// TestOutboxCloseEndsLongPolls: a daemon that stops answers its waiting gateways at once,
// with nothing, instead of holding its shutdown for their wait.
func TestOutboxCloseEndsLongPolls(t *testing.T) {
	srv, _ := messagesServer(t)
	done := make(chan string, 1)
	go func() {
		code, body := serve(t, srv, http.MethodGet, "/v1/outbox?wait=60s", "")
		done <- fmt.Sprint(code, " ", body)
	}()
	srv.Close()
	srv.Close()
	if got := <-done; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"items": []`) {
		t.Errorf("long poll at Close: %s", got)
	}
}
