package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/fakeengine"
)

// TestProtectMountpoints: whatever the agent left where the operator's copy is bound (a
// link out of its trees, a directory for a file, a file for a directory, a .git naming
// another repository, content under a mountpoint) is removed, never followed, and every
// mountpoint is a plain empty file or directory of the right type, with the operator's
// copy bound read-only over it.
func TestProtectMountpoints(t *testing.T) {
	r, layout := fakeRunner(t, fakeengine.New(fakeengine.Script{}), time.Second)
	dirs, err := layout.Paths("main")
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	must(t, os.WriteFile(secret, []byte("keep"), 0o600))
	must(t, os.Symlink(outside, filepath.Join(dirs.Group, ".claude")))
	must(t, os.MkdirAll(filepath.Join(dirs.Group, ".mcp.json", "x"), 0o755))
	must(t, os.WriteFile(filepath.Join(dirs.Group, ".git"), []byte("gitdir: /workspace/evil\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(dirs.Session, ".claude", "skills", "planted"), 0o755))
	must(t, os.WriteFile(filepath.Join(dirs.Session, ".claude", "skills", "planted", "SKILL.md"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(dirs.Session, ".claude", "settings.json"), []byte(`{"hooks":{}}`), 0o644))
	must(t, os.WriteFile(filepath.Join(dirs.Session, ".claude", "agents"), []byte("a file"), 0o644))

	mounts, err := r.Mounts("main", dirs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "keep" {
		t.Errorf("the link's target was touched: %q %v", b, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("the link's target holds %v", entries)
	}
	if _, err := os.Lstat(filepath.Join(dirs.Group, ".git")); !os.IsNotExist(err) {
		t.Errorf("a .git file naming another repository is still there: %v", err)
	}
	for _, c := range []struct {
		path string
		dir  bool
	}{
		{filepath.Join(dirs.Group, ".claude", "settings.json"), false},
		{filepath.Join(dirs.Group, ".claude", "skills"), true},
		{filepath.Join(dirs.Group, ".mcp.json"), false},
		{filepath.Join(dirs.Session, ".claude", "settings.json"), false},
		{filepath.Join(dirs.Session, ".claude", "skills"), true},
		{filepath.Join(dirs.Session, ".claude", "agents"), true},
	} {
		st, err := os.Lstat(c.path)
		switch {
		case err != nil:
			t.Errorf("%s: %v", c.path, err)
		case c.dir && (!st.IsDir() || len(readDir(c.path)) != 0):
			t.Errorf("%s: %v with %v, want an empty directory", c.path, st.Mode(), readDir(c.path))
		case !c.dir && (!st.Mode().IsRegular() || st.Size() != 0):
			t.Errorf("%s: %v of %d bytes, want an empty file", c.path, st.Mode(), st.Size())
		}
	}
	ro := map[string]string{}
	for _, m := range mounts {
		if m.Origin == "operator" {
			if !m.ReadOnly || !strings.HasPrefix(m.Source, dirs.Claude+"/") {
				t.Errorf("mount %+v", m)
			}
			ro[m.Target] = m.Source
		}
	}
	for _, target := range []string{"/root/.claude/settings.json", "/root/.claude/skills", "/workspace/.claude/settings.local.json", "/workspace/.mcp.json"} {
		if _, err := os.Stat(ro[target]); err != nil {
			t.Errorf("%s: no read-only bind of the operator's copy (%q): %v", target, ro[target], err)
		}
	}
	if _, ok := ro["/workspace/.git/hooks"]; ok {
		t.Errorf("git hooks bound for a folder that is no repository")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readDir(dir string) []os.DirEntry {
	entries, _ := os.ReadDir(dir)
	return entries
}
