package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

var testPolicy = LeasePolicy{Visibility: time.Minute, MaxAttempts: 3}

func appendRows(t *testing.T, s *Store, rows ...OutboxItem) []int64 {
	t.Helper()
	var ids []int64
	for _, it := range rows {
		if it.Kind == "" {
			it.Kind = OutboxMessage
		}
		got, err := s.AppendOutbox(context.Background(), it)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got.ID)
	}
	return ids
}

// lease leases the rows f matches and returns the lease's token and the rows' ids.
func lease(t *testing.T, s *Store, f OutboxFilter) (token string, ids []int64) {
	t.Helper()
	l, err := s.LeaseOutbox(context.Background(), f, testPolicy)
	if err != nil {
		t.Fatal(err)
	}
	ids = []int64{}
	for _, it := range l.Items {
		ids = append(ids, it.ID)
	}
	if (l.Token == "") != (len(ids) == 0) {
		t.Fatalf("lease of %v came with token %q", ids, l.Token)
	}
	return l.Token, ids
}

// deliver leases row id alone and acks it, as a consumer would.
func deliver(t *testing.T, s *Store, id int64) {
	t.Helper()
	token, ids := lease(t, s, OutboxFilter{After: id - 1, Limit: 1})
	if len(ids) != 1 || ids[0] != id {
		t.Fatalf("lease for row %d got %v", id, ids)
	}
	if _, err := s.AckOutbox(context.Background(), token, ids); err != nil {
		t.Fatal(err)
	}
}

func leaseIDs(t *testing.T, s *Store, f OutboxFilter) []int64 {
	t.Helper()
	_, ids := lease(t, s, f)
	return ids
}

func TestLeaseOutbox(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	ids := appendRows(t, s,
		OutboxItem{Folder: "main", Target: "tg:1", Content: "a"},
		OutboxItem{Folder: "other", Target: "dc:2", Content: "b"},
		OutboxItem{Folder: "main", Target: "tg:1", Content: "c"},
		OutboxItem{Folder: "main", Target: "tg:3", Content: "d"},
	)
	it, err := s.GetOutbox(ctx, ids[1])
	if err != nil || it.Platform != "dc" || it.State != OutboxPending || it.Attempts != 0 {
		t.Fatalf("GetOutbox = %+v, %v", it, err)
	}

	tests := []struct {
		name string
		f    OutboxFilter
		want []int64
	}{
		{"folder", OutboxFilter{Folder: "other"}, []int64{ids[1]}},
		{"platform and limit", OutboxFilter{Platform: "tg", Limit: 1}, []int64{ids[0]}},
		// ids[2] waits behind ids[0], leased, of the same chat.
		{"a chat's rows in order", OutboxFilter{}, []int64{ids[3]}},
		{"nothing free", OutboxFilter{}, []int64{}},
	}
	tokens := map[int64]string{}
	for _, tt := range tests {
		token, got := lease(t, s, tt.f)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: leased %v, want %v", tt.name, got, tt.want)
		}
		for _, id := range got {
			tokens[id] = token
		}
	}
	if tokens[ids[0]] == tokens[ids[1]] {
		t.Errorf("two leases share the token %q", tokens[ids[0]])
	}
	if n, err := s.OutboxBacklog(ctx); err != nil || n != 4 {
		t.Errorf("backlog = %d, %v; want 4", n, err)
	}
	if n, err := s.AckOutbox(ctx, tokens[ids[0]], []int64{ids[0], ids[0]}); err != nil || n != 2 {
		t.Fatalf("ack = %d, %v", n, err)
	}
	if got := leaseIDs(t, s, OutboxFilter{}); fmt.Sprint(got) != fmt.Sprint([]int64{ids[2]}) {
		t.Errorf("after acking the chat's first row: leased %v, want [%d]", got, ids[2])
	}
	// Visibility: unacked rows come again once their lease passes, with one more attempt.
	c.Advance(time.Minute)
	l, err := s.LeaseOutbox(ctx, OutboxFilter{}, testPolicy)
	if err != nil || len(l.Items) != 3 || l.Items[0].ID != ids[1] || l.Items[0].Attempts != 2 {
		t.Fatalf("after the visibility timeout: %+v, %v", l, err)
	}
	if _, err := s.AckOutbox(ctx, l.Token, []int64{ids[1], 9999}); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "9999") {
		t.Errorf("ack of a missing id: %v", err)
	}
	if it, _ := s.GetOutbox(ctx, ids[1]); it.State != OutboxPending {
		t.Errorf("a failed ack acked %+v", it)
	}
	acked, _ := s.GetOutbox(ctx, ids[0])
	if acked.State != OutboxDelivered || acked.DeliveredAt != newClock().MS() {
		t.Errorf("acked row: %+v", acked)
	}
}

func TestFailAndParkOutbox(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	ids := appendRows(t, s, OutboxItem{Folder: "main", Target: "tg:1", Content: "a"}, OutboxItem{Folder: "main", Target: "tg:1", Content: "b"})
	var token string
	for attempt := 1; attempt <= 3; attempt++ {
		var got []int64
		if token, got = lease(t, s, OutboxFilter{Limit: 1}); fmt.Sprint(got) != fmt.Sprint([]int64{ids[0]}) {
			t.Fatalf("attempt %d: leased %v", attempt, got)
		}
		it, err := s.FailOutbox(ctx, token, ids[0], "chat not found", 0, testPolicy)
		if err != nil {
			t.Fatal(err)
		}
		if attempt < 3 && (it.State != OutboxPending || it.LeaseUntil != 0 || it.LastError != "chat not found") {
			t.Errorf("attempt %d: %+v", attempt, it)
		}
		if attempt == 3 && (it.State != OutboxParked || it.LastError != "failed 3 times: chat not found") {
			t.Errorf("after max attempts: %+v, want parked with the reason", it)
		}
	}
	// The parked row no longer holds its chat back.
	second, got := lease(t, s, OutboxFilter{})
	if fmt.Sprint(got) != fmt.Sprint([]int64{ids[1]}) {
		t.Errorf("after parking: leased %v", got)
	}
	parked, err := s.ListOutboxState(ctx, OutboxParked, OutboxFilter{})
	if err != nil || len(parked) != 1 || parked[0].ID != ids[0] {
		t.Errorf("parked = %+v, %v", parked, err)
	}
	if _, err := s.FailOutbox(ctx, token, ids[0], "x", 0, testPolicy); !errors.Is(err, ErrConflict) {
		t.Errorf("fail of a parked row: %v", err)
	}
	it, err := s.RetryOutbox(ctx, ids[0])
	if err != nil || it.State != OutboxPending || it.Attempts != 0 {
		t.Fatalf("retry: %+v, %v", it, err)
	}
	if _, err := s.RetryOutbox(ctx, ids[0]); !errors.Is(err, ErrConflict) {
		t.Errorf("retry of a pending row: %v", err)
	}
	if _, err := s.GetOutbox(ctx, 9999); !errors.Is(err, ErrNotFound) {
		t.Errorf("get of a missing row: %v", err)
	}
	// retryAfter keeps a failed row back; ReleaseOutbox hands back without an attempt.
	if _, err := s.AckOutbox(ctx, second, []int64{ids[1]}); err != nil {
		t.Fatal(err)
	}
	token, _ = lease(t, s, OutboxFilter{})
	if _, err := s.FailOutbox(ctx, token, ids[0], "down", 10*time.Second, testPolicy); err != nil {
		t.Fatal(err)
	}
	if got := leaseIDs(t, s, OutboxFilter{}); len(got) != 0 {
		t.Errorf("within retryAfter: leased %v", got)
	}
	c.Advance(10 * time.Second)
	token, _ = lease(t, s, OutboxFilter{})
	if err := s.ReleaseOutbox(ctx, token, []int64{ids[0]}); err != nil {
		t.Fatal(err)
	}
	if it, _ := s.GetOutbox(ctx, ids[0]); it.Attempts != 1 || it.LeaseUntil != 0 {
		t.Errorf("released: %+v, want attempts 1 and no lease", it)
	}
}

// TestOutboxLeaseOwner: only the token a lease handed rows out with acknowledges, fails or
// hands them back. Another consumer's token, or none, is refused and changes nothing; the
// holder's late ack counts until another lease takes the row, and then only the new
// holder's does.
func TestOutboxLeaseOwner(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	ids := appendRows(t, s, OutboxItem{Folder: "main", Target: "tg:1", Content: "a"}, OutboxItem{Folder: "main", Target: "tg:2", Content: "b"},
		OutboxItem{Folder: "main", Target: "tg:3", Content: "c"})
	a, aIDs := lease(t, s, OutboxFilter{Platform: "tg", Limit: 2})
	b, bIDs := lease(t, s, OutboxFilter{Platform: "tg"})
	if fmt.Sprint(aIDs) != fmt.Sprint(ids[:2]) || fmt.Sprint(bIDs) != fmt.Sprint(ids[2:]) {
		t.Fatalf("A leased %v, B %v", aIDs, bIDs)
	}
	for _, tt := range []struct {
		name  string
		token string
		want  error
	}{
		{"B's token", b, ErrNotLeaseHolder},
		{"no token", "", ErrInvalid},
		{"a made-up token", "not-a-lease", ErrNotLeaseHolder},
	} {
		if _, err := s.AckOutbox(ctx, tt.token, aIDs); !errors.Is(err, tt.want) || tt.want == ErrNotLeaseHolder && !errors.Is(err, ErrConflict) {
			t.Errorf("ack of A's rows with %s: %v, want %v", tt.name, err, tt.want)
		}
		if _, err := s.FailOutbox(ctx, tt.token, aIDs[0], "x", 0, testPolicy); !errors.Is(err, tt.want) {
			t.Errorf("fail of A's row with %s: %v, want %v", tt.name, err, tt.want)
		}
		if err := s.ReleaseOutbox(ctx, cmp.Or(tt.token, "x"), aIDs); err != nil {
			t.Errorf("release of A's rows with %s: %v", tt.name, err)
		}
	}
	// B's mixed ack (its row and one of A's) acks nothing.
	if _, err := s.AckOutbox(ctx, b, []int64{bIDs[0], aIDs[0]}); !errors.Is(err, ErrNotLeaseHolder) {
		t.Errorf("B acking its row and A's: %v", err)
	}
	for _, id := range ids {
		if it, _ := s.GetOutbox(ctx, id); it.State != OutboxPending || it.LeaseUntil == 0 || it.Attempts != 1 || it.LastError != "" {
			t.Errorf("row %d after the refused calls: %+v, want it leased as before", id, it)
		}
	}
	if n, err := s.AckOutbox(ctx, a, aIDs); err != nil || n != 2 {
		t.Fatalf("A's ack: %d %v", n, err)
	}
	if n, err := s.AckOutbox(ctx, a, aIDs); err != nil || n != 2 {
		t.Errorf("A's ack again: %d %v", n, err)
	}

	// B's lease passes; its late ack still counts while no one else took the row.
	c.Advance(time.Minute)
	if _, err := s.AckOutbox(ctx, b, bIDs); err != nil {
		t.Errorf("B's late ack: %v", err)
	}
	// A row whose lease passed and that another lease took belongs to that lease alone.
	late := appendRows(t, s, OutboxItem{Folder: "main", Target: "tg:4", Content: "d"})
	first, _ := lease(t, s, OutboxFilter{})
	c.Advance(time.Minute)
	second, got := lease(t, s, OutboxFilter{})
	if fmt.Sprint(got) != fmt.Sprint(late) {
		t.Fatalf("the second lease got %v, want %v", got, late)
	}
	if _, err := s.AckOutbox(ctx, first, late); !errors.Is(err, ErrNotLeaseHolder) {
		t.Errorf("the first holder's ack after the row was leased again: %v", err)
	}
	if _, err := s.FailOutbox(ctx, second, late[0], "down", 0, testPolicy); err != nil {
		t.Fatal(err)
	}
	// Failing ends the lease: the token acks the row no more.
	if _, err := s.AckOutbox(ctx, second, late); !errors.Is(err, ErrNotLeaseHolder) {
		t.Errorf("ack after the holder failed the row: %v", err)
	}
}

// TestLeaseParksUnacked: a row whose lease passes unacknowledged max attempts times (a
// consumer that crashes on it) is parked with the reason.
func TestLeaseParksUnacked(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ids := appendRows(t, s, OutboxItem{Folder: "main", Target: "tg:1", Content: "poison"})
	for i := 0; i < 3; i++ {
		if got := leaseIDs(t, s, OutboxFilter{}); len(got) != 1 {
			t.Fatalf("lease %d: %v", i, got)
		}
		c.Advance(time.Minute)
	}
	if got := leaseIDs(t, s, OutboxFilter{}); len(got) != 0 {
		t.Fatalf("after 3 unacked leases: %v", got)
	}
	it, _ := s.GetOutbox(context.Background(), ids[0])
	if it.State != OutboxParked || !strings.Contains(it.LastError, "not acknowledged after 3 deliveries") {
		t.Errorf("row: %+v, want parked saying why", it)
	}
}

// TestWaitOutbox: a waiter is woken by an append it matches, and gets the row once.
func TestWaitOutbox(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	got := make(chan []OutboxItem, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l, err := s.WaitOutbox(ctx, OutboxFilter{Folder: "main"}, testPolicy, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- l.Items
	}()
	// A row for another folder does not satisfy the waiter; the second does.
	appendRows(t, s, OutboxItem{Folder: "other", Target: "tg:1", Content: "not yours"})
	ids := appendRows(t, s, OutboxItem{Folder: "main", Target: "tg:2", Content: "yours"})
	wg.Wait()
	items := <-got
	if len(items) != 1 || items[0].ID != ids[0] {
		t.Errorf("waiter got %+v, want row %d", items, ids[0])
	}
	l, err := s.WaitOutbox(ctx, OutboxFilter{Folder: "main"}, testPolicy, 0)
	if err != nil || len(l.Items) != 0 || l.Token != "" {
		t.Errorf("again without wait: %+v, %v", l, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.WaitOutbox(cctx, OutboxFilter{Folder: "none"}, testPolicy, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled wait: %v", err)
	}
}

// TestFinishRunOutbox: an inbox run's result goes to its chat in FinishRun's transaction,
// unless the group turns it off; a parked folder and a budget refusal leave notices.
func TestFinishRunOutbox(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		config  string
		chat    string
		refused string
		o       Outcome
		want    []string // kind: content
	}{
		{"result", `{}`, "tg:1", "", Outcome{State: RunExited, Status: StatusOK, Result: "hi there", Cursor: CursorUpdate{Op: CursorAdvance}},
			[]string{"result: hi there"}},
		{"deliver_result false", `{"deliver_result": false}`, "tg:1", "", Outcome{State: RunExited, Status: StatusOK, Result: "hi", Cursor: CursorUpdate{Op: CursorAdvance}},
			nil},
		{"no chat", `{}`, "", "", Outcome{State: RunExited, Status: StatusOK, Result: "hi", Cursor: CursorUpdate{Op: CursorAdvance}},
			nil},
		{"error status", `{}`, "tg:1", "", Outcome{State: RunExited, Status: StatusError, Result: "partial", Cursor: CursorUpdate{Op: CursorAdvance}},
			nil},
		{"parked", `{}`, "tg:1", "", Outcome{State: RunError, Failure: FailureMisconfig, Error: "no image", Cursor: CursorUpdate{Op: CursorPark, Reason: "image missing"}},
			[]string{"notice: The agent is paused after a failure and will not answer until an operator resumes it: image missing"}},
		{"budget", `{}`, "tg:1", "budget reached: 10 requests", Outcome{State: RunExited, Status: StatusOK, Result: "half", Cursor: CursorUpdate{Op: CursorAdvance}},
			[]string{"result: half", "notice: The agent stopped early: budget reached: 10 requests"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTest(t)
			if _, err := s.UpsertGroup(ctx, Group{Folder: "main", ContainerConfig: json.RawMessage(tt.config)}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AppendInbox(ctx, "main", InboxMessage{Role: "user", Content: "q", ChatJID: tt.chat, Source: SourceAPI}); err != nil {
				t.Fatal(err)
			}
			r, err := s.CreateInboxRun(ctx, "main", 0, func([]InboxMessage) (Run, error) { return Run{Folder: "main"}, nil })
			if err != nil {
				t.Fatal(err)
			}
			if tt.refused != "" {
				if err := s.AddUsage(ctx, r.ID, Usage{Refused: tt.refused}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.FinishRun(ctx, r.ID, tt.o); err != nil {
				t.Fatal(err)
			}
			items, err := s.ListOutbox(ctx, "main", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range items {
				if it.Target != tt.chat || it.RunID != r.ID || it.State != OutboxPending {
					t.Errorf("row %+v", it)
				}
				got = append(got, string(it.Kind)+": "+it.Content)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("outbox = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestOutboxDeliveryMigration: rows written before outbox_delivery keep their content and
// ids, count as delivered (no backlog sent again), and new ids continue above them.
func TestOutboxDeliveryMigration(t *testing.T) {
	ctx := context.Background()
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	before := fstest.MapFS{}
	for _, m := range ms {
		if m.name == "outbox_delivery" {
			break
		}
		before[fmt.Sprintf("migrations/%04d_%s.sql", m.version, m.name)] = &fstest.MapFile{Data: []byte(m.sql)}
	}
	path := filepath.Join(t.TempDir(), "arizuko.db")
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, db, before, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO outbox (id, folder, kind, target, content, created_at)
		VALUES (41, 'main', 'reply', 'tg:-100', 'old reply', 5)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := openAt(t, path)
	old, err := s.GetOutbox(ctx, 41)
	if err != nil || old.State != OutboxDelivered || old.Platform != "tg" || old.Content != "old reply" || old.DeliveredAt != 5 {
		t.Errorf("old row after the migration: %+v, %v", old, err)
	}
	ids := appendRows(t, s, OutboxItem{Folder: "main", Kind: OutboxNotice, Target: "tg:-100", Content: "new"})
	if ids[0] <= 41 {
		t.Errorf("new id %d, want above the old rows'", ids[0])
	}
	if n, _ := s.OutboxBacklog(ctx); n != 1 {
		t.Errorf("backlog %d, want only the new row", n)
	}
}
