package memory

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/agentdir"
)

// TestDiaryProbeMatchesListing: the diary window found by looking names up day by day is
// the one the directory's listing gives, whatever else the directory holds; a window that
// does not fill within maxDiaryProbe days is left to the listing.
func TestDiaryProbeMatchesListing(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	day := func(back int) string { return now.AddDate(0, 0, -back).Format(time.DateOnly) + ".md" }
	for _, tc := range []struct {
		name  string
		files []string // relative to diary/; a trailing / makes a directory, "@" a broken symlink
		full  bool     // the probe fills the window
	}{
		{"daily", daysBack(day, 0, 30), true},
		{"gaps and noise", append(everyOther(daysBack(day, 2, 40)), "notes.md", "2025-02-30.md", "2025-13-01.md", ".hidden.md", day(-3), "2025-02-28.txt"), true},
		{"a directory and a broken symlink count as found", append(daysBack(day, 0, 14), day(3)+"/", "@"+day(4)), true},
		{"sparse", []string{day(0), day(100), day(400)}, false},
		{"empty", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			diary := filepath.Join(dir, "diary")
			if err := os.MkdirAll(diary, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.files {
				var err error
				switch {
				case f[len(f)-1] == '/':
					err = os.Mkdir(filepath.Join(diary, f), 0o755)
				case f[0] == '@':
					err = os.Symlink("missing", filepath.Join(diary, f[1:]))
				default:
					err = os.WriteFile(filepath.Join(diary, f), []byte("---\nsummary: s\n---\n"), 0o644)
				}
				if err != nil && !os.IsExist(err) {
					t.Fatal(err)
				}
			}
			root, err := agentdir.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			opt, err := Options{Now: now, Location: time.UTC, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.normalize()
			if err != nil {
				t.Fatal(err)
			}
			a := &assembler{ctx: context.Background(), fsys: rootFS{root}, opt: opt, log: opt.Logger, today: now.Unix() / secondsPerDay}
			probed, full := a.recentDiary()
			names, _ := a.unsorted("diary")
			listed := a.diaryWindow(names)
			if full != tc.full {
				t.Fatalf("probe full = %v, want %v (found %v)", full, tc.full, probed)
			}
			if full && !slices.Equal(probed, listed) {
				t.Fatalf("probed %v, listed %v", probed, listed)
			}
		})
	}
}

// daysBack is the diary names from `from` to `to` days before now.
func daysBack(day func(int) string, from, to int) []string {
	var out []string
	for b := from; b <= to; b++ {
		out = append(out, day(b))
	}
	return out
}

func everyOther(s []string) []string {
	var out []string
	for i := 0; i < len(s); i += 2 {
		out = append(out, s[i])
	}
	return out
}

// TestUndatedEpisodeChangeSeen: an episode whose date comes from its frontmatter is read
// again once it changes, even to the same size, though unchanged ones are remembered.
func TestUndatedEpisodeChangeSeen(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "episodes"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "episodes", "session.md")
	opt := Options{Now: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), Location: time.UTC}
	for _, summary := range []string{"first-summary", "other-summary", "third-summary"} {
		if err := os.WriteFile(p, []byte("---\ndate: 2025-02-27\nsummary: "+summary+"\n---\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			out, err := Assemble(context.Background(), dir, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, ">"+summary+"</entry>") {
				t.Fatalf("after writing %q the prompt says:\n%s", summary, out)
			}
		}
	}
}
