package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func runIDs(t *testing.T, s *Store, folder string) []string {
	t.Helper()
	runs, err := s.ListRuns(context.Background(), RunFilter{Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}

func inboxIDs(t *testing.T, s *Store, folder string) []int64 {
	t.Helper()
	var ids []int64
	rows, err := s.db.Query(`SELECT id FROM inbox WHERE folder = ? ORDER BY id`, folder)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		ids = append(ids, id)
	}
	return ids
}

// TestPruneRuns: finished runs go by age and beyond the newest N of their folder; queued
// and running runs stay whatever the rules say, and a pruned run's log goes with it.
func TestPruneRuns(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	mk := func(id, folder string) {
		mustCreateRun(t, s, Run{ID: id, Folder: folder})
		c.Advance(time.Hour)
	}
	// main: old1 old2 (finished 10 h ago and more), new1 new2 new3 finished, q1 queued.
	// other: run1 running since long ago.
	mk("old1", "main")
	mk("old2", "main")
	mk("run1", "other")
	for _, id := range []string{"old1", "old2", "run1"} {
		if _, err := s.StartNext(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if id != "run1" {
			finish(t, s, id)
		}
	}
	c.Advance(10 * time.Hour)
	cutoff := c.MS()
	for _, id := range []string{"new1", "new2", "new3"} {
		mk(id, "main")
		if _, err := s.StartNext(ctx, 10); err != nil {
			t.Fatal(err)
		}
		finish(t, s, id)
	}
	mk("q1", "main")

	for _, tc := range []struct {
		name       string
		keep       Keep
		main, othr []string
	}{
		{"nothing", Keep{}, []string{"new1", "new2", "new3", "old1", "old2", "q1"}, []string{"run1"}},
		{"by age", Keep{Before: cutoff}, []string{"new1", "new2", "new3", "q1"}, []string{"run1"}},
		// The newest 2 of main are q1 and new3: q1 counts, but never goes.
		{"by count", Keep{Count: 2}, []string{"new3", "q1"}, []string{"run1"}},
		{"everything", Keep{Before: c.MS() + 1, Count: 1}, []string{"q1"}, []string{"run1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runIDs(t, s, "main")
			dry, err := s.Prune(ctx, PruneRules{Runs: tc.keep, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := runIDs(t, s, "main"); !slices.Equal(got, before) {
				t.Fatalf("a dry run removed runs: %v, was %v", got, before)
			}
			p, err := s.Prune(ctx, PruneRules{Runs: tc.keep})
			if err != nil {
				t.Fatal(err)
			}
			if p != dry {
				t.Errorf("pruned %+v, the dry run said %+v", p, dry)
			}
			if got := runIDs(t, s, "main"); !slices.Equal(got, tc.main) {
				t.Errorf("main keeps %v, want %v", got, tc.main)
			}
			if got := runIDs(t, s, "other"); !slices.Equal(got, tc.othr) {
				t.Errorf("other keeps %v, want %v", got, tc.othr)
			}
			if p.Runs != int64(len(before)-len(tc.main)) {
				t.Errorf("pruned %d runs, want %d", p.Runs, len(before)-len(tc.main))
			}
		})
	}
}

// TestPruneInboxKeepsWhatATurnNeeds: consumed messages go by the rules; pending messages
// and those of a queued or running inbox run stay, and ids are not reused.
func TestPruneInboxKeepsWhatATurnNeeds(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	done := appendMsgs(t, s, "main", "a", "b", "c")
	r, err := s.CreateInboxRun(ctx, "main", 10, buildTurn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartNext(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishRun(ctx, r.ID, Outcome{State: RunExited, Status: StatusOK, Cursor: CursorUpdate{Op: CursorAdvance}}); err != nil {
		t.Fatal(err)
	}
	running := appendMsgs(t, s, "main", "d", "e")
	r2, err := s.CreateInboxRun(ctx, "main", 10, buildTurn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartNext(ctx, 10); err != nil {
		t.Fatal(err)
	}
	pending := appendMsgs(t, s, "main", "f")
	never := appendMsgs(t, s, "side", "g") // no cursor at all: nothing consumed
	c.Advance(48 * time.Hour)

	p, err := s.Prune(ctx, PruneRules{Inbox: Keep{Before: c.MS(), Count: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Inbox != int64(len(done)) {
		t.Errorf("pruned %d messages, want the %d consumed ones", p.Inbox, len(done))
	}
	if got, want := inboxIDs(t, s, "main"), append(running, pending...); !slices.Equal(got, want) {
		t.Errorf("main keeps %v, want %v (running run %s covers %v)", got, want, r2.ID, running)
	}
	if got := inboxIDs(t, s, "side"); !slices.Equal(got, never) {
		t.Errorf("side keeps %v, want %v", got, never)
	}
	// The running turn ends, its messages are consumed; the pending one stays.
	if _, err := s.FinishRun(ctx, r2.ID, Outcome{State: RunExited, Status: StatusOK, Cursor: CursorUpdate{Op: CursorAdvance}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(ctx, PruneRules{Inbox: Keep{Before: c.MS()}}); err != nil {
		t.Fatal(err)
	}
	if got := inboxIDs(t, s, "main"); !slices.Equal(got, pending) {
		t.Errorf("main keeps %v, want the pending %v", got, pending)
	}
	next := appendMsgs(t, s, "main", "h")
	if next[0] <= pending[0] {
		t.Errorf("an inbox id was reused: %d after %d", next[0], pending[0])
	}
	msgs, err := s.PendingInbox(ctx, "main", 0)
	if err != nil || contents(msgs) != "f,h" {
		t.Errorf("pending after pruning: %q, %v", contents(msgs), err)
	}
}

func TestPruneOutbox(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	for i := range 5 {
		it, err := s.AppendOutbox(ctx, OutboxItem{Folder: "main", Kind: OutboxMessage, Content: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		// Row "1" was never delivered: no rule may drop what a gateway has not sent yet.
		if i != 1 {
			deliver(t, s, it.ID)
		}
		c.Advance(time.Hour)
	}
	if _, err := s.AppendOutbox(ctx, OutboxItem{Folder: "other", Kind: OutboxMessage, Content: "x"}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Prune(ctx, PruneRules{Outbox: Keep{Before: c.MS() - int64(3*time.Hour/time.Millisecond), Count: 3}})
	if err != nil {
		t.Fatal(err)
	}
	items, _ := s.ListOutbox(ctx, "main", 0, 0)
	var got []string
	for _, it := range items {
		got = append(got, it.Content)
	}
	if p.Outbox != 1 || strings.Join(got, " ") != "1 2 3 4" {
		t.Errorf("pruned %d, main keeps %q", p.Outbox, got)
	}
	if other, _ := s.ListOutbox(ctx, "other", 0, 0); len(other) != 1 {
		t.Errorf("other keeps %d items", len(other))
	}
}

func TestPruneInvalid(t *testing.T) {
	s := openTest(t)
	if _, err := s.Prune(context.Background(), PruneRules{Outbox: Keep{Count: -1}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "outbox") {
		t.Errorf("a negative count: %v", err)
	}
}

// TestCompactAndBackup: after pruning most rows, Compact gives the space back; a backup
// opens as a valid database with the same rows, and never overwrites a file.
func TestCompactAndBackup(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	big := strings.Repeat("x", 4000)
	for range 300 {
		it, err := s.AppendOutbox(ctx, OutboxItem{Folder: "main", Kind: OutboxMessage, Content: big})
		if err != nil {
			t.Fatal(err)
		}
		deliver(t, s, it.ID)
	}
	mustCreateRun(t, s, Run{ID: "kept", Folder: "main"})
	if _, err := s.Prune(ctx, PruneRules{Outbox: Keep{Count: 10}}); err != nil {
		t.Fatal(err)
	}
	cp, err := s.Compact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !cp.Vacuumed || cp.BytesAfter*2 > cp.BytesBefore {
		t.Errorf("compact: %+v", cp)
	}
	if again, err := s.Compact(ctx); err != nil || again.Vacuumed {
		t.Errorf("compacting a compact database: %+v, %v", again, err)
	}

	path := filepath.Join(t.TempDir(), "backup.db")
	if err := s.Backup(ctx, path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, %v", fi, err)
	}
	if err := s.Backup(ctx, path); !errors.Is(err, ErrConflict) {
		t.Errorf("a backup over an existing file: %v", err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	var outbox, runs int
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q, %v", check, err)
	}
	db.QueryRow(`SELECT COUNT(*) FROM outbox`).Scan(&outbox)
	db.QueryRow(`SELECT COUNT(*) FROM runs WHERE id = 'kept'`).Scan(&runs)
	if outbox != 10 || runs != 1 {
		t.Errorf("backup has %d outbox rows and %d runs, want 10 and 1", outbox, runs)
	}
	b, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("the backup does not open as a store: %v", err)
	}
	b.Close()
}
