package store

import (
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

func appendMsgs(t *testing.T, s *Store, folder string, contents ...string) []int64 {
	t.Helper()
	var msgs []InboxMessage
	for _, c := range contents {
		msgs = append(msgs, InboxMessage{SenderJID: "u@x", Role: "user", Content: c, Source: SourceAPI})
	}
	ids, err := s.AppendInbox(context.Background(), folder, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// buildTurn is a CreateInboxRun builder that puts the messages in the input.
func buildTurn(pending []InboxMessage) (Run, error) {
	var in struct {
		Messages []map[string]string `json:"messages"`
	}
	for _, m := range pending {
		in.Messages = append(in.Messages, map[string]string{"role": m.Role, "content": m.Content})
	}
	b, err := json.Marshal(in)
	return Run{Input: b}, err
}

func contents(msgs []InboxMessage) string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Content)
	}
	return strings.Join(out, ",")
}

func TestAppendInbox(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	ids, err := s.AppendInbox(ctx, "main",
		InboxMessage{SenderJID: "a@x", ChatJID: "tg:-100", Role: "user", Content: "one", Source: SourceRoute},
		InboxMessage{Folder: "main", Role: "user", Content: "two", Source: SourceInject})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[1] <= ids[0] {
		t.Fatalf("ids %v, want two increasing", ids)
	}
	pending, err := s.PendingInbox(ctx, "main", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []InboxMessage{
		{ID: ids[0], Folder: "main", SenderJID: "a@x", ChatJID: "tg:-100", Role: "user", Content: "one", Source: SourceRoute, CreatedAt: c.MS()},
		{ID: ids[1], Folder: "main", Role: "user", Content: "two", Source: SourceInject, CreatedAt: c.MS()},
	}
	if fmt.Sprint(pending) != fmt.Sprint(want) {
		t.Errorf("pending\n%+v\nwant\n%+v", pending, want)
	}
	if one, _ := s.PendingInbox(ctx, "main", 1); len(one) != 1 {
		t.Errorf("limit 1 gave %d messages", len(one))
	}
	if other, _ := s.PendingInbox(ctx, "other", 0); len(other) != 0 {
		t.Errorf("other folder sees %d messages", len(other))
	}

	bad := []struct {
		name   string
		folder string
		msg    InboxMessage
		field  string
	}{
		{"no folder", "", InboxMessage{Role: "user", Source: SourceAPI}, "folder"},
		{"other folder", "main", InboxMessage{Folder: "x", Role: "user", Source: SourceAPI}, "messages[1].folder"},
		{"no role", "main", InboxMessage{Source: SourceAPI}, "messages[1].role"},
		{"bad source", "main", InboxMessage{Role: "user", Source: "mail"}, "messages[1].source"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			okMsg := InboxMessage{Role: "user", Source: SourceAPI, Content: "fine"}
			_, err := s.AppendInbox(ctx, tt.folder, okMsg, tt.msg)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("err = %v, want ErrInvalid naming %s", err, tt.field)
			}
		})
	}
	if all, _ := s.PendingInbox(ctx, "main", 0); len(all) != 2 {
		t.Errorf("a rejected append stored messages: %d pending", len(all))
	}
}

// TestInboxRunSeesEachMessage: the messages an inbox run is built from keep each one's
// sender, chat and time, in a batch of several senders and chats.
func TestInboxRunSeesEachMessage(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	first := c.MS()
	if _, err := s.AppendInbox(ctx, "main", InboxMessage{SenderJID: "tg:1", ChatJID: "tg:-100", Role: "user", Content: "from alice", Source: SourceRoute}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	if _, err := s.AppendInbox(ctx, "main",
		InboxMessage{SenderJID: "tg:2", ChatJID: "tg:-200", Role: "user", Content: "from bob", Source: SourceRoute},
		InboxMessage{Role: "user", Content: "injected", Source: SourceInject}); err != nil {
		t.Fatal(err)
	}
	var seen []InboxMessage
	r, err := s.CreateInboxRun(ctx, "main", 0, func(pending []InboxMessage) (Run, error) {
		seen = pending
		return buildTurn(pending)
	})
	if err != nil || r == nil {
		t.Fatalf("CreateInboxRun = %v, %v", r, err)
	}
	want := []struct {
		sender, chat string
		at           int64
	}{{"tg:1", "tg:-100", first}, {"tg:2", "tg:-200", first + 1000}, {"", "", first + 1000}}
	if len(seen) != len(want) {
		t.Fatalf("the run was built from %d messages, want %d", len(seen), len(want))
	}
	for i, w := range want {
		if m := seen[i]; m.SenderJID != w.sender || m.ChatJID != w.chat || m.CreatedAt != w.at {
			t.Errorf("message %d: sender %q chat %q at %d, want %q %q %d", i, m.SenderJID, m.ChatJID, m.CreatedAt, w.sender, w.chat, w.at)
		}
	}
}

// TestInboxCursorSemantics walks a folder's inbox through seed 000's
// statuses: ok and error advance the cursor; fatal rolls back for a bounded
// number of retries with backoff, then parks.
func TestInboxCursorSemantics(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	next := func() *Run {
		t.Helper()
		r, err := s.CreateInboxRun(ctx, "main", 0, buildTurn)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	run := func(first, last int64, attempt int) *Run {
		t.Helper()
		r := next()
		if r == nil {
			t.Fatalf("no inbox run, want one over %d..%d", first, last)
		}
		if r.InboxFirst != first || r.InboxLast != last || r.Attempt != attempt || r.Kind != KindTurn || r.Folder != "main" {
			t.Fatalf("inbox run %d..%d attempt %d, want %d..%d attempt %d", r.InboxFirst, r.InboxLast, r.Attempt, first, last, attempt)
		}
		if got, _ := s.StartNext(ctx, 5); got == nil || got.ID != r.ID {
			t.Fatalf("StartNext did not start the inbox run")
		}
		return r
	}
	end := func(r *Run, status Status, u CursorUpdate) Cursor {
		t.Helper()
		if _, err := s.FinishRun(ctx, r.ID, Outcome{State: RunExited, Status: status, Cursor: u}); err != nil {
			t.Fatal(err)
		}
		cur, err := s.GetCursor(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		return cur
	}
	none := func(why string) {
		t.Helper()
		if r := next(); r != nil {
			t.Fatalf("%s: made run %+v, want none", why, r)
		}
	}

	none("empty inbox")
	ids := appendMsgs(t, s, "main", "m1", "m2", "m3")
	r := run(ids[0], ids[2], 1)
	if !strings.Contains(string(r.Input), `"m1"`) || !strings.Contains(string(r.Input), `"m3"`) {
		t.Errorf("input %s lacks the messages", r.Input)
	}
	late := appendMsgs(t, s, "main", "m4")
	none("inbox run still running")
	if cur := end(r, StatusOK, CursorUpdate{Op: CursorAdvance}); cur.LastDoneID != ids[2] {
		t.Fatalf("ok: cursor at %d, want %d", cur.LastDoneID, ids[2])
	}
	if p, _ := s.PendingInbox(ctx, "main", 0); contents(p) != "m4" {
		t.Errorf("pending after ok: %q, want m4", contents(p))
	}

	r = run(late[0], late[0], 1)
	if cur := end(r, StatusError, CursorUpdate{Op: CursorAdvance}); cur.LastDoneID != late[0] {
		t.Fatalf("error: cursor at %d, want %d", cur.LastDoneID, late[0])
	}

	// fatal: the messages stay pending, retried after the backoff, then parked.
	m5 := appendMsgs(t, s, "main", "m5")
	retry := CursorUpdate{Op: CursorRetry, Reason: "no output", Backoff: 10 * time.Second, MaxRetries: 2}
	r = run(m5[0], m5[0], 1)
	cur := end(r, StatusFatal, retry)
	if cur.LastDoneID != late[0] || cur.Retries != 1 || cur.LastError != "no output" || cur.NextAttemptAt != c.MS()+10_000 {
		t.Fatalf("after fatal: %+v", cur)
	}
	none("backoff not elapsed")
	c.Advance(9 * time.Second)
	none("backoff not elapsed")
	m6 := appendMsgs(t, s, "main", "m6")
	c.Advance(time.Second)
	r = run(m5[0], m6[0], 2) // the same messages again, plus the newer one
	cur = end(r, StatusFatal, retry)
	if cur.Retries != 2 || cur.Parked() {
		t.Fatalf("after second fatal: %+v", cur)
	}
	c.Advance(10 * time.Second)
	r = run(m5[0], m6[0], 3)
	cur = end(r, StatusFatal, retry)
	if !cur.Parked() || cur.Retries != 3 || cur.ParkedAt != c.MS() || cur.ParkedReason != "gave up after 2 retries: no output" {
		t.Fatalf("after third fatal: %+v, want parked", cur)
	}
	c.Advance(time.Hour)
	none("parked")
	if cs, _ := s.ListCursors(ctx); len(cs) != 1 || !cs[0].Parked() {
		t.Errorf("ListCursors does not show the parked folder: %+v", cs)
	}

	cur, err := s.Unpark(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if cur.Parked() || cur.Retries != 0 || cur.NextAttemptAt != 0 || cur.LastDoneID != late[0] {
		t.Fatalf("after unpark: %+v", cur)
	}
	r = run(m5[0], m6[0], 1)
	if cur := end(r, StatusOK, CursorUpdate{Op: CursorAdvance}); cur.LastDoneID != m6[0] || cur.Retries != 0 || cur.LastError != "" {
		t.Fatalf("ok after unpark: %+v", cur)
	}

	// A misconfiguration is not retried: the folder parks at once.
	m7 := appendMsgs(t, s, "main", "m7")
	r = run(m7[0], m7[0], 1)
	cur = end(r, StatusFatal, CursorUpdate{Op: CursorPark, Reason: "misconfig: bad mount"})
	if !cur.Parked() || cur.ParkedReason != "misconfig: bad mount" || cur.LastDoneID != m6[0] {
		t.Fatalf("after park: %+v", cur)
	}
	none("parked for misconfig")
}

func TestCreateInboxRunRules(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	ids := appendMsgs(t, s, "main", "a", "b", "c")

	boom := errors.New("boom")
	if _, err := s.CreateInboxRun(ctx, "main", 0, func([]InboxMessage) (Run, error) { return Run{}, boom }); !errors.Is(err, boom) {
		t.Errorf("build error: %v, want boom", err)
	}
	badBuilds := map[string]func([]InboxMessage) (Run, error){
		"folder": func([]InboxMessage) (Run, error) { return Run{Folder: "other"}, nil },
		"kind":   func([]InboxMessage) (Run, error) { return Run{Kind: KindTask, TaskID: "t"}, nil },
		"input":  func([]InboxMessage) (Run, error) { return Run{Input: json.RawMessage("{")}, nil },
	}
	for field, b := range badBuilds {
		if _, err := s.CreateInboxRun(ctx, "main", 0, b); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("bad %s: %v, want ErrInvalid naming it", field, err)
		}
	}
	if _, err := s.CreateInboxRun(ctx, "", 0, buildTurn); !errors.Is(err, ErrInvalid) {
		t.Errorf("no folder: %v, want ErrInvalid", err)
	}
	if runs, _ := s.ListRuns(ctx, RunFilter{}); len(runs) != 0 {
		t.Fatalf("failed creations left %d runs", len(runs))
	}

	r, err := s.CreateInboxRun(ctx, "main", 2, buildTurn)
	if err != nil || r == nil {
		t.Fatalf("CreateInboxRun: %v, %v", r, err)
	}
	if r.InboxFirst != ids[0] || r.InboxLast != ids[1] {
		t.Errorf("limit 2: range %d..%d, want %d..%d", r.InboxFirst, r.InboxLast, ids[0], ids[1])
	}
	if _, err := s.FinishRun(ctx, r.ID, Outcome{State: RunExited, Status: StatusOK}); !errors.Is(err, ErrInvalid) {
		t.Errorf("finishing an inbox run without a cursor update: %v, want ErrInvalid", err)
	}
	if _, err := s.AdvanceCursor(ctx, "main", ids[0]); !errors.Is(err, ErrConflict) {
		t.Errorf("AdvanceCursor with an open inbox run: %v, want ErrConflict", err)
	}

	// Killing a queued inbox run consumes its messages.
	if _, err := s.RequestKill(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if cur, _ := s.GetCursor(ctx, "main"); cur.LastDoneID != ids[1] {
		t.Errorf("after kill: cursor at %d, want %d", cur.LastDoneID, ids[1])
	}
	if p, _ := s.PendingInbox(ctx, "main", 0); contents(p) != "c" {
		t.Errorf("after kill: pending %q, want c", contents(p))
	}
}

// TestCreateInboxRunConcurrent: many goroutines racing to run one folder's
// inbox make exactly one run.
func TestCreateInboxRunConcurrent(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	appendMsgs(t, s, "main", "a", "b")
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		made []string
	)
	for range 16 {
		wg.Go(func() {
			r, err := s.CreateInboxRun(ctx, "main", 0, buildTurn)
			if err != nil {
				t.Error(err)
				return
			}
			if r != nil {
				mu.Lock()
				made = append(made, r.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(made) != 1 {
		t.Errorf("made %d inbox runs, want 1", len(made))
	}
}

func TestCursorMethods(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	cur, err := s.GetCursor(ctx, "fresh")
	if err != nil || cur != (Cursor{Folder: "fresh"}) {
		t.Errorf("fresh cursor = %+v, %v", cur, err)
	}
	if cur, err := s.Unpark(ctx, "fresh"); err != nil || cur != (Cursor{Folder: "fresh"}) {
		t.Errorf("Unpark of a fresh folder = %+v, %v", cur, err)
	}
	ids := appendMsgs(t, s, "main", "a", "b", "c")
	other := appendMsgs(t, s, "other", "x")

	if _, err := s.AdvanceCursor(ctx, "main", other[0]); !errors.Is(err, ErrInvalid) {
		t.Errorf("advance to another folder's message: %v, want ErrInvalid", err)
	}
	if _, err := s.AdvanceCursor(ctx, "main", ids[2]+100); !errors.Is(err, ErrInvalid) {
		t.Errorf("advance past the inbox: %v, want ErrInvalid", err)
	}
	if cur, err := s.AdvanceCursor(ctx, "main", ids[1]); err != nil || cur.LastDoneID != ids[1] {
		t.Errorf("advance = %+v, %v", cur, err)
	}
	if cur, err := s.AdvanceCursor(ctx, "main", ids[0]); err != nil || cur.LastDoneID != ids[1] {
		t.Errorf("advance backwards moved the cursor: %+v, %v", cur, err)
	}

	cur, err = s.RecordFailure(ctx, "main", "engine down", 5*time.Second, 1)
	if err != nil || cur.Retries != 1 || cur.NextAttemptAt != c.MS()+5000 || cur.LastError != "engine down" {
		t.Errorf("RecordFailure = %+v, %v", cur, err)
	}
	cur, _ = s.RecordFailure(ctx, "main", "engine down", 5*time.Second, 1)
	if !cur.Parked() {
		t.Errorf("second failure with max 1 retry did not park: %+v", cur)
	}
	if cur, _ := s.Unpark(ctx, "main"); cur.Parked() || cur.Retries != 0 {
		t.Errorf("Unpark = %+v", cur)
	}
	if cur, err := s.Park(ctx, "main", "operator"); err != nil || cur.ParkedReason != "operator" || cur.ParkedAt != c.MS() {
		t.Errorf("Park = %+v, %v", cur, err)
	}
	if cur, _ := s.GetCursor(ctx, "main"); cur.LastDoneID != ids[1] {
		t.Errorf("park/unpark moved the cursor: %+v", cur)
	}

	for name, err := range map[string]error{
		"park without reason":    second(s.Park(ctx, "main", "")),
		"failure without reason": second(s.RecordFailure(ctx, "main", "", time.Second, 1)),
		"negative backoff":       second(s.RecordFailure(ctx, "main", "x", -time.Second, 1)),
		"negative max retries":   second(s.RecordFailure(ctx, "main", "x", time.Second, -1)),
		"no folder":              second(s.Park(ctx, "", "x")),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestPendingFolders(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if got, err := s.PendingFolders(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	for _, f := range []string{"main/b", "main", "main/a"} {
		if _, err := s.AppendInbox(ctx, f, InboxMessage{Role: "user", Content: "hi", Source: SourceAPI}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Park(ctx, "main/a", "broken"); err != nil {
		t.Fatal(err)
	}
	run, err := s.CreateInboxRun(ctx, "main/b", 0, func(p []InboxMessage) (Run, error) { return Run{Folder: "main/b"}, nil })
	if err != nil || run == nil {
		t.Fatalf("CreateInboxRun: %v %v", run, err)
	}
	got, err := s.PendingFolders(ctx)
	if err != nil || len(got) != 1 || got[0] != "main" {
		t.Fatalf("PendingFolders = %v, %v; want [main] (main/a parked, main/b has an open run)", got, err)
	}
}

// TestInboxChatMigration: messages stored before inbox_chat_jid keep everything and read
// as having no chat.
func TestInboxChatMigration(t *testing.T) {
	ctx := context.Background()
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	before := fstest.MapFS{}
	for _, m := range ms {
		if m.name == "inbox_chat_jid" {
			break
		}
		before[fmt.Sprintf("migrations/%04d_%s.sql", m.version, m.name)] = &fstest.MapFile{Data: []byte(m.sql)}
	}
	if len(before) == 0 || len(before) == len(ms) {
		t.Fatalf("%d of %d migrations come before inbox_chat_jid", len(before), len(ms))
	}
	path := filepath.Join(t.TempDir(), "arizuko.db")
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, db, before, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO inbox (folder, sender_jid, role, content, source, created_at)
		VALUES ('main', 'tg:1', 'user', 'old message', 'route', 5)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := openAt(t, path)
	pending, err := s.PendingInbox(ctx, "main", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].Content != "old message" || pending[0].SenderJID != "tg:1" || pending[0].ChatJID != "" || pending[0].CreatedAt != 5 {
		t.Errorf("after the migration: %+v", pending)
	}
}
