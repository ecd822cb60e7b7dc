package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestSubtreeTokens: a folder's daily budget counts the tokens of its own runs and of every
// folder below it since the day began, and nothing of a folder whose name only starts
// like it.
func TestSubtreeTokens(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	use := func(folder string, in, out, cacheRead, cacheWrite int64) {
		t.Helper()
		r := mustCreateRun(t, s, Run{Folder: folder})
		if err := s.AddUsage(ctx, r.ID, Usage{Requests: 1, InputTokens: in, OutputTokens: out, CacheReadTokens: cacheRead, CacheWriteTokens: cacheWrite}); err != nil {
			t.Fatal(err)
		}
	}
	use("main", 1000, 1000, 0, 0) // yesterday
	c.Advance(time.Hour)
	since := c.MS()
	use("main", 10, 1, 500, 2)
	use("main/research", 20, 2, 0, 0)
	use("main/research/deep", 40, 4, 0, 0)
	use("mainx", 80, 8, 0, 0)
	use("main_x", 160, 16, 0, 0)
	use("other", 320, 32, 0, 0)
	for _, tc := range []struct {
		folder string
		want   int64
	}{
		{"main", 13 + 22 + 44},
		{"main/research", 22 + 44},
		{"main/research/deep", 44},
		{"mainx", 88},
		{"main_x", 176},
		{"other", 352},
		{"none", 0},
	} {
		got, err := s.SubtreeTokens(ctx, tc.folder, since)
		if err != nil || got != tc.want {
			t.Errorf("SubtreeTokens(%s) = %d, %v; want %d", tc.folder, got, err, tc.want)
		}
	}
}

// TestModelUsage: a run's tokens are kept per folder, model and quarter hour, apart from
// the run (pruning it keeps them); a range of quarter hours sums them for a subtree or
// for every folder, and a usage without tokens (a request counted, a refusal) adds no row.
func TestModelUsage(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	use := func(folder, model string, in, out, cacheRead, cacheWrite int64) string {
		t.Helper()
		r := mustCreateRun(t, s, Run{Folder: folder})
		if err := s.AddUsage(ctx, r.ID, Usage{Requests: 1, Model: model, InputTokens: in, OutputTokens: out, CacheReadTokens: cacheRead, CacheWriteTokens: cacheWrite}); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	use("main", "m1", 1000, 1000, 0, 0) // an hour before from
	c.Advance(time.Hour)
	from := c.MS()
	use("main", "m1", 10, 1, 500, 2)
	use("main", "m1", 10, 1, 0, 0)
	use("main", "m2", 5, 5, 5, 5)
	r1h := mustCreateRun(t, s, Run{Folder: "main"})
	if err := s.AddUsage(ctx, r1h.ID, Usage{Model: "m2", CacheWriteTokens: 4, CacheWrite1hTokens: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddUsage(ctx, r1h.ID, Usage{Model: "m2", CacheWriteTokens: 1, CacheWrite1hTokens: 2}); !errors.Is(err, ErrInvalid) {
		t.Errorf("more 1-hour cache writes than cache writes: %v", err)
	}
	use("main/kid", "m1", 20, 2, 0, 0)
	use("mainx", "m1", 80, 8, 0, 0)
	use("other", "", 0, 0, 0, 0)
	r := mustCreateRun(t, s, Run{Folder: "other"})
	if err := s.AddUsage(ctx, r.ID, Usage{Refused: "budget reached"}); err != nil {
		t.Fatal(err)
	}
	c.Advance(UsageBucket * time.Millisecond)
	to := c.MS()
	use("main", "m1", 7, 7, 7, 7) // after to
	got, err := s.ModelUsage(ctx, "main", from, to)
	want := []ModelUsage{
		{Folder: "main", Model: "m1", InputTokens: 20, OutputTokens: 2, CacheReadTokens: 500, CacheWriteTokens: 2},
		{Folder: "main", Model: "m2", InputTokens: 5, OutputTokens: 5, CacheReadTokens: 5, CacheWriteTokens: 9, CacheWrite1hTokens: 3},
		{Folder: "main/kid", Model: "m1", InputTokens: 20, OutputTokens: 2},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ModelUsage(main) = %+v, %v\nwant %+v", got, err, want)
	}
	all, err := s.ModelUsage(ctx, "", 0, to+UsageBucket)
	if err != nil || len(all) != 4 || all[0].InputTokens != 1027 || all[3].Folder != "mainx" {
		t.Errorf("ModelUsage of every folder = %+v, %v", all, err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM runs`); err != nil {
		t.Fatal(err)
	}
	if again, err := s.ModelUsage(ctx, "main", from, to); err != nil || !slices.Equal(again, want) {
		t.Errorf("after the runs went: %+v, %v", again, err)
	}
}

// TestNoteBudget: each notice of a budget is noted once per period and threshold.
func TestNoteBudget(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	for i, tc := range []struct {
		folder, period string
		start          int64
		percent        int
		first          bool
	}{
		{"main", "day", 100, 80, true},
		{"main", "day", 100, 80, false},
		{"main", "day", 100, 100, true},
		{"main", "month", 100, 80, true},
		{"main", "day", 200, 80, true},
		{"main/kid", "day", 100, 80, true},
	} {
		first, err := s.NoteBudget(ctx, tc.folder, tc.period, tc.start, tc.percent)
		if err != nil || first != tc.first {
			t.Errorf("%d: NoteBudget(%+v) = %v, %v", i, tc, first, err)
		}
	}
}
