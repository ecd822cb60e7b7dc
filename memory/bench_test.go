package memory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkAssemble assembles the prompt of a group with 10,000 diary files,
// 2,000 episodes and 50 facts, generated once at setup. "dated-names" is the
// normal layout; "undated-episodes" then renames every episode so its date
// must come from its frontmatter, the documented slow path. The setup also
// proves, at full scale, that only injected files are opened.
func BenchmarkAssemble(b *testing.B) {
	dir := b.TempDir()
	now := generateGroup(b, dir, 10000, 2000, 50)
	opt := Options{Now: now, Location: time.UTC, Sender: benchSender}
	checkOpensOnlyInjected(b, dir, opt, DefaultDiaryMax+DefaultEpisodesMax+50+1)
	run := func(b *testing.B) {
		p, err := Assemble(context.Background(), dir, opt)
		if err != nil {
			b.Fatal(err)
		}
		if n := strings.Count(p, "<entry"); n != DefaultDiaryMax+DefaultEpisodesMax {
			b.Fatalf("%d entries", n)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Assemble(context.Background(), dir, opt); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(p)), "prompt-bytes")
	}
	b.Run("dated-names", run)
	ents, err := os.ReadDir(filepath.Join(dir, "episodes"))
	if err != nil {
		b.Fatal(err)
	}
	for i, e := range ents {
		if err := os.Rename(filepath.Join(dir, "episodes", e.Name()), filepath.Join(dir, "episodes", fmt.Sprintf("session-%04d.md", i))); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("undated-episodes", run)
}
