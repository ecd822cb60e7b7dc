package turn

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/arizuko/arizukod/groupfolder"
)

// TestHomeKeyIgnoresFilesInFlight: another turn completing the operator's copy while the
// key is taken (a temporary file that is there, or gone before it is read) changes nothing;
// a real change of its content does.
func TestHomeKeyIgnoresFilesInFlight(t *testing.T) {
	layout, err := groupfolder.NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := groupfolder.Folder("main")
	dirs, err := layout.Ensure(f, os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dirs.Claude, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(home, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".bash_profile", "")
	base, err := homeKey(layout, f, dirs)
	if err != nil {
		t.Fatal(err)
	}
	write("..bashrc.tmp-SUKS3TWBNG3XNFJSBZD3V73VGF", "half")
	if got, err := homeKey(layout, f, dirs); err != nil || got != base {
		t.Errorf("with a file in flight: homeKey = %q, %v; want %q", got, err, base)
	}
	write(".bash_profile", "export X=1\n")
	if got, err := homeKey(layout, f, dirs); err != nil || got == base {
		t.Errorf("after a change: homeKey = %q, %v; want a key other than %q", got, err, base)
	}
}
