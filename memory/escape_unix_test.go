//go:build unix

package memory

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNoEscape: a symlink out of the group directory, a FIFO and a directory
// where files are expected are skipped; nothing blocks.
func TestNoEscape(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, outside, "secret.md", "---\nsummary: SECRET\n---\nSECRET\n")
	dir := t.TempDir()
	writeFile(t, dir, "facts/ok.md", "ok\n")
	for _, l := range []string{"facts/leak.md", "diary/2025-01-01.md", "users/telegram%3A1.md", "episodes/2025-01-01-x.md"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(l)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dir, "facts", "dir.md")); err != nil {
		t.Fatal(err)
	}
	mkfifo(t, filepath.Join(dir, "facts", "fifo.md"))
	mkfifo(t, filepath.Join(dir, "diary", "2025-01-02.md"))
	done := make(chan struct{})
	var got string
	var err error
	go func() {
		defer close(done)
		got, err = Assemble(context.Background(), dir, Options{Now: time.Date(2025, 1, 2, 12, 0, 0, 0, time.UTC), Sender: "telegram:1"})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Assemble blocked")
	}
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "SECRET") {
		t.Fatalf("read through a symlink out of the group directory:\n%s", got)
	}
	want := "<knowledge layer=\"facts\" file=\"ok.md\">\nok\n</knowledge>\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
