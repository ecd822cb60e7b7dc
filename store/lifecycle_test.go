package store

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClearSessionWinsOverTheRunningTurn: clear_session during a turn leaves the folder
// without a session even though the same turn ends with a new session id; the run still
// records the id it answered. The next turn saves its session as usual.
func TestClearSessionWinsOverTheRunningTurn(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if err := s.SetSession(ctx, "main", "s-1"); err != nil {
		t.Fatal(err)
	}
	mustCreateRun(t, s, Run{Folder: "main"})
	mustCreateRun(t, s, Run{Folder: "other"})
	r, _ := s.StartNext(ctx, 5)
	other, _ := s.StartNext(ctx, 5)
	if err := s.ClearSession(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	done, err := s.FinishRun(ctx, r.ID, Outcome{State: RunExited, Status: StatusOK, NewSessionID: "s-2", SaveSession: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSession(ctx, "main"); got != "" {
		t.Errorf("session after clear_session and the turn's end: %q, want none", got)
	}
	if done.NewSessionID != "s-2" || !done.SessionCleared {
		t.Errorf("finished run: new session %q, cleared %v", done.NewSessionID, done.SessionCleared)
	}
	// Another folder's turn is not affected.
	if _, err := s.FinishRun(ctx, other.ID, Outcome{State: RunExited, Status: StatusOK, NewSessionID: "o-2", SaveSession: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSession(ctx, "other"); got != "o-2" {
		t.Errorf("other folder's session: %q, want o-2", got)
	}
	// Nor is the next turn of the same folder.
	mustCreateRun(t, s, Run{Folder: "main"})
	next, _ := s.StartNext(ctx, 5)
	if _, err := s.FinishRun(ctx, next.ID, Outcome{State: RunExited, Status: StatusOK, NewSessionID: "s-3", SaveSession: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSession(ctx, "main"); got != "s-3" {
		t.Errorf("next turn's session: %q, want s-3", got)
	}
}

// TestInputSent: MarkInputSent records the time on a running run only, and RequeueRun
// forgets it with the container, for the next attempt.
func TestInputSent(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	q := mustCreateRun(t, s, Run{Folder: "main"})
	if err := s.MarkInputSent(ctx, q.ID); !errors.Is(err, ErrConflict) {
		t.Errorf("MarkInputSent on a queued run: %v, want ErrConflict", err)
	}
	r, _ := s.StartNext(ctx, 1)
	if err := s.SetContainer(ctx, r.ID, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkInputSent(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetRun(ctx, r.ID)
	if got.InputSentAt != c.MS() {
		t.Errorf("InputSentAt %d, want %d", got.InputSentAt, c.MS())
	}
	if err := s.RequeueRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetRun(ctx, r.ID)
	if got.InputSentAt != 0 || got.Container != "" || got.Attempt != 2 || got.State != RunQueued {
		t.Errorf("after requeue: %+v", got)
	}
	if err := s.MarkInputSent(ctx, "r_nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("MarkInputSent on an unknown run: %v, want ErrNotFound", err)
	}
}

// TestRedact: with WithRedact, no text the store keeps holds a secret value: run input
// (escaped in JSON too), result, error, session ids, outbox, inbox,
// tasks, usage and egress. The database file is checked byte for byte.
func TestRedact(t *testing.T) {
	const key = `gh-"tok\en-0123456789`
	redact := strings.NewReplacer(key, "[REDACTED:GH_TOKEN]").Replace
	path := filepath.Join(t.TempDir(), "arizukod.db")
	s := openAt(t, path, WithRedact(redact))
	ctx := context.Background()
	quoted, _ := json.Marshal("say " + key)
	r := mustCreateRun(t, s, Run{Folder: "main", Input: json.RawMessage(`{"messages":[{"role":"user","content":` + string(quoted) + `}],"n":12345678901234567890}`)})
	if strings.Contains(string(r.Input), `tok\\en`) || !strings.Contains(string(r.Input), "[REDACTED:GH_TOKEN]") || !strings.Contains(string(r.Input), "12345678901234567890") {
		t.Errorf("stored input %s", r.Input)
	}
	run, _ := s.StartNext(ctx, 1)
	if _, err := s.AppendOutbox(ctx, OutboxItem{Folder: "main", RunID: run.ID, Kind: OutboxMessage, Target: "x@y", Content: "out " + key}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendInbox(ctx, "other", InboxMessage{Role: "user", Content: "in " + key, Source: SourceInject}); err != nil {
		t.Fatal(err)
	}
	task, err := s.CreateTask(ctx, Task{Folder: "main", Prompt: "task " + key, ScheduleKind: ScheduleOnce, ScheduleExpr: "2030-01-01T00:00:00Z", NextRunAt: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := "patched " + key
	if _, err := s.UpdateTask(ctx, task.ID, TaskPatch{Prompt: &p}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddUsage(ctx, run.ID, Usage{Requests: 1, Model: "m-" + key, Refused: "no " + key}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEgress(ctx, run.ID, Egress{Host: key + ":443", Requests: 1}); err != nil {
		t.Fatal(err)
	}
	done, err := s.FinishRun(ctx, run.ID, Outcome{State: RunExited, Status: StatusOK, Result: "res " + key, Error: "err " + key, NewSessionID: "s-" + key, SaveSession: true})
	if err != nil {
		t.Fatal(err)
	}
	if done.Result != "res [REDACTED:GH_TOKEN]" || done.Error != "err [REDACTED:GH_TOKEN]" || done.NewSessionID != "s-[REDACTED:GH_TOKEN]" {
		t.Errorf("finished run: %q %q %q", done.Result, done.Error, done.NewSessionID)
	}
	if err := s.SetSession(ctx, "other", key); err != nil {
		t.Fatal(err)
	}
	// An inbox turn's failure is the cursor's last error and parked reason too.
	in, err := s.CreateInboxRun(ctx, "other", 0, func([]InboxMessage) (Run, error) { return Run{Folder: "other"}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartNext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishRun(ctx, in.ID, Outcome{State: RunExited, Status: StatusFatal, Error: "fatal " + key,
		Cursor: CursorUpdate{Op: CursorRetry, Reason: "fatal " + key, Backoff: time.Second, MaxRetries: 0}}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.GetCursor(ctx, "other"); err != nil || c.LastError != "fatal [REDACTED:GH_TOKEN]" || !strings.HasSuffix(c.ParkedReason, "fatal [REDACTED:GH_TOKEN]") {
		t.Errorf("cursor %+v %v", c, err)
	}
	if _, err := s.Park(ctx, "main", "parked "+key); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(path + "*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), key) || strings.Contains(string(b), string(quoted[1:len(quoted)-1])) {
			t.Errorf("%s holds the secret", filepath.Base(f))
		}
	}
}
