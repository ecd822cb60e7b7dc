package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	for _, c := range []struct {
		data string
		mode os.FileMode
	}{{"one", 0o600}, {"two, longer", 0o644}} {
		if err := Write(p, []byte(c.data), c.mode); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		fi, _ := os.Stat(p)
		if err != nil || string(b) != c.data || fi.Mode().Perm() != c.mode {
			t.Fatalf("after Write(%q, %v): %q %v %v", c.data, c.mode, b, fi.Mode(), err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	if err := Write(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}
