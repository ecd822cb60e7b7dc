package store

import (
	"context"
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
