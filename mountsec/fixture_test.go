package mountsec

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fixture is a real directory tree with real symlinks:
//
//	$B/home/                     the service user's home (root "~", read-only)
//	$B/home/projects/            root "~/projects", read-write
//	$B/home/docs-link -> $B/realdocs   root "~/docs-link", read-write (a symlinked root)
//	$B/home/arizuko-data/        protected (the data directory)
//	$B/data/                     root "$B/data", read-only
//	$B/data2/, $B/outside/       not roots
type fixture struct {
	base string
	home string
	a    *Allowlist
}

func (fx *fixture) path(p string) string {
	return strings.ReplaceAll(p, "$B", fx.base)
}

func newFixture(t testing.TB, nonMainReadOnly bool) *fixture {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{base: base, home: filepath.Join(base, "home")}
	for _, d := range []string{
		"home/.ssh", "home/.aws", "home/.config/gh", "home/arizuko-data/groups",
		"home/projects/webapp/src", "home/projects/webapp/.SSH", "home/projects/My Dir",
		"home/projects/secrets", "home/projects/café", "home/projects/sub", "home/projects/swap/real",
		"home/projects/swap/elsewhere", "home/other", "home/arizuko-data2", "home/work/vendor",
		"realdocs/a", "outside/x", "data/d", "data2/x",
	} {
		mustMkdir(t, filepath.Join(base, d))
	}
	for _, f := range []string{
		"home/.ssh/id_rsa", "home/.aws/credentials", "home/.config/gh/hosts.yml",
		"home/projects/webapp/.env", "home/projects/notes.txt", "home/projects/key.pem",
		"home/projects/plain.txt",
	} {
		if err := os.WriteFile(filepath.Join(base, f), []byte("not a real secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"home/projects/ssh-link":     "../.ssh",
		"home/projects/cafe":         "café",
		"home/projects/chain1":       "chain2",
		"home/projects/chain2":       "sub/chain3",
		"home/projects/sub/chain3":   "../../.aws/credentials",
		"home/projects/escape":       filepath.Join(base, "outside"),
		"home/projects/inner-link":   "webapp/src",
		"home/projects/data-link":    "../arizuko-data",
		"home/projects/loop1":        "loop2",
		"home/projects/loop2":        "loop1",
		"home/projects/dangling":     "nowhere",
		"home/projects/data2-link":   filepath.Join(base, "data2/x"),
		"home/projects/etc-link":     "/etc",
		"home/projects/proc-link":    "/proc/self",
		"home/docs-link":             filepath.Join(base, "realdocs"),
		"realdocs/out":               filepath.Join(base, "outside"),
		"home/projects/ssh-key-link": "../.ssh/id_rsa",
	} {
		if err := os.Symlink(target, filepath.Join(base, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(base, "home/projects/plain.txt"), filepath.Join(base, "home/projects/hardlink.txt")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(base, "home/projects/fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(base, "home/projects/sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	js := fmt.Sprintf(`{
  "allowedRoots": [
    {"path": "~/projects", "allowReadWrite": true, "description": "code"},
    {"path": %q, "allowReadWrite": false, "description": "datasets"},
    {"path": "~/docs-link", "allowReadWrite": true},
    {"path": "~", "allowReadWrite": false}
  ],
  "blockedPatterns": ["secret*", "~/work/vendor", "build/cache"],
  "nonMainReadOnly": %v
}`, filepath.Join(base, "data"), nonMainReadOnly)
	fx.a, err = ParseAllowlist([]byte(js), "test-allowlist.json", Options{
		Home:      fx.home,
		Protected: []string{filepath.Join(fx.home, "arizuko-data")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

func mustMkdir(t testing.TB, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func boolp(b bool) *bool { return &b }
