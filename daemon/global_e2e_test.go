package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
)

// TestGlobalFolder: groups/global is every group's /workspace/global (seed 003), made on
// first use: a root group writes it, a group below a root and another root's group read
// what it wrote and cannot write it, and each one's prompt says so.
func TestGlobalFolder(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			d := daemontest.New(t, daemontest.Config{Engine: e, RunTimeout: "1m"})
			d.Start(t)
			for _, f := range []string{"main", "main/research", "other", "other/deep"} {
				d.AddGroup(t, f)
			}
			if r := d.Turn(t, "main", "write global/note.md shared knowledge"); r.Status != "ok" {
				t.Fatalf("the root group writing global/: %s %q", r.Status, r.Error)
			}
			if b, err := os.ReadFile(filepath.Join(d.DataDir, "groups", "global", "note.md")); err != nil || string(b) != "shared knowledge" {
				t.Errorf("groups/global/note.md on the host: %q %v", b, err)
			}
			for _, f := range []string{"main/research", "other", "other/deep"} {
				if r := d.Turn(t, f, "read global/note.md"); r.Status != "ok" || r.Result != "shared knowledge" {
					t.Errorf("%s reading global/: %s %q %q", f, r.Status, r.Result, r.Error)
				}
			}
			for _, f := range []string{"main/research", "other/deep"} {
				if r := d.Turn(t, f, "write global/note.md overwritten"); r.Status != "error" || !strings.Contains(r.Error, "read-only file system") {
					t.Errorf("%s writing global/: %s %q %q, want a read-only file system", f, r.Status, r.Result, r.Error)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(d.DataDir, "groups", "global", "note.md")); string(b) != "shared knowledge" {
				t.Errorf("groups/global/note.md after the others tried: %q", b)
			}
			for f, want := range map[string]string{
				"main":          `<global path="/workspace/global" access="read-write">`,
				"main/research": `<global path="/workspace/global" access="read-only">`,
			} {
				if r := d.Turn(t, f, "prompt"); !strings.Contains(r.Result, want) || !strings.Contains(r.Result, `<grants folder="`+f+`">`) {
					t.Errorf("%s's prompt lacks %s and its grants:\n%s", f, want, r.Result)
				}
			}
		})
	}
}
