package agentdir_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/arizuko/arizukod/internal/agentdir"
	"golang.org/x/sys/unix"
)

// hostile is an agent's directory with links planted towards outside, a directory
// holding a file the daemon must never change.
type hostile struct {
	dir     *agentdir.Dir
	root    string // the agent's directory
	outside string // a directory of the host
	secret  string // a file in outside
}

func plant(t *testing.T) hostile {
	t.Helper()
	base := t.TempDir()
	h := hostile{root: filepath.Join(base, "agent"), outside: filepath.Join(base, "host")}
	h.secret = filepath.Join(h.outside, "secret")
	for _, d := range []string{h.root, h.outside, filepath.Join(h.root, "real")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(h.secret, []byte("host data"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"file":        h.secret,        // a link to a host file
		"dir":         h.outside,       // a directory swapped for a link to a host directory
		"real/inner":  "../dir/secret", // a link inside the tree that leads out through another
		"real/relsec": "../../host/secret",
	} {
		if err := os.Symlink(target, filepath.Join(h.root, link)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := agentdir.Open(h.root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	h.dir = d
	return h
}

// untouched fails unless the host directory holds exactly the secret, as it was.
func (h hostile) untouched(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(h.outside)
	if err != nil || len(entries) != 1 || entries[0].Name() != "secret" {
		t.Fatalf("host directory changed: %v %v", entries, err)
	}
	fi, err := os.Stat(h.secret)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("host file's mode changed: %v %v", fi, err)
	}
	if b, err := os.ReadFile(h.secret); err != nil || string(b) != "host data" {
		t.Fatalf("host file changed: %q %v", b, err)
	}
}

func TestLinksAreNeverFollowed(t *testing.T) {
	tests := []struct {
		name string
		op   func(d *agentdir.Dir) error
		// wantErr: the operation must fail (it could only succeed through a link);
		// otherwise it must succeed on the link itself.
		wantErr bool
	}{
		{"create over a file link", func(d *agentdir.Dir) error {
			f, err := d.Create("file", 0o644)
			if err == nil {
				f.Close()
			}
			return err
		}, true},
		{"create through a directory link", func(d *agentdir.Dir) error {
			f, err := d.Create("dir/new", 0o644)
			if err == nil {
				f.Close()
			}
			return err
		}, true},
		{"read a file link", func(d *agentdir.Dir) error { _, err := d.ReadFile("file", 1<<20); return err }, true},
		{"read through an inner link", func(d *agentdir.Dir) error { _, err := d.ReadFile("real/inner", 1<<20); return err }, true},
		{"read through a relative link", func(d *agentdir.Dir) error { _, err := d.ReadFile("real/relsec", 1<<20); return err }, true},
		{"open for writing", func(d *agentdir.Dir) error {
			f, err := d.OpenFile("file", os.O_WRONLY|os.O_TRUNC, 0)
			if err == nil {
				f.Close()
			}
			return err
		}, true},
		{"write through a directory link", func(d *agentdir.Dir) error { return d.WriteFile("dir/secret", []byte("x"), 0o644, nil) }, true},
		{"write over a file link replaces the link", func(d *agentdir.Dir) error { return d.WriteFile("file", []byte("x"), 0o644, nil) }, false},
		{"create-if-missing over a link", func(d *agentdir.Dir) error {
			created, err := d.CreateFile("file", []byte("x"), 0o644, nil)
			if err == nil && created {
				return errors.New("created over a link")
			}
			return err
		}, false},
		{"remove through a directory link", func(d *agentdir.Dir) error { return d.Remove("dir/secret") }, true},
		{"remove a link removes the link", func(d *agentdir.Dir) error { return d.Remove("file") }, false},
		{"clear a directory link", func(d *agentdir.Dir) error { return d.Clear("dir") }, true},
		{"clear a tree with links", func(d *agentdir.Dir) error { return d.Clear(".") }, false},
		{"mkdir through a directory link", func(d *agentdir.Dir) error { return d.Mkdir("dir/new", 0o700) }, true},
		{"chown a link", func(d *agentdir.Dir) error { return d.Chown("file", os.Getuid(), os.Getgid()) }, false},
		{"chown through a directory link", func(d *agentdir.Dir) error { return d.Chown("dir/secret", os.Getuid(), os.Getgid()) }, true},
		{"open a directory link", func(d *agentdir.Dir) error { _, err := d.Dir("dir"); return err }, true},
		{"list a directory link", func(d *agentdir.Dir) error { _, err := d.ReadDir("dir"); return err }, true},
		{"dial a link", func(d *agentdir.Dir) error {
			c, err := d.Dial(context.Background(), "file")
			if err == nil {
				c.Close()
			}
			return err
		}, true},
		{"escape with dot-dot", func(d *agentdir.Dir) error { _, err := d.ReadFile("../host/secret", 1<<20); return err }, true},
		{"an absolute path", func(d *agentdir.Dir) error {
			_, err := d.ReadFile(filepath.Join("/", "etc", "hostname"), 1<<20)
			return err
		}, true},
	}
	// openat2, and the openat walk used where a kernel or a seccomp filter lacks it (as
	// systemd-nspawn's did for the packaged service in the booted-system test).
	for _, mode := range []string{"openat2", "walk"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "walk" {
				agentdir.WithoutOpenat2(t)
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					h := plant(t)
					err := tt.op(h.dir)
					if tt.wantErr && err == nil {
						t.Fatal("succeeded; want an error")
					}
					if !tt.wantErr && err != nil {
						t.Fatalf("failed: %v", err)
					}
					h.untouched(t)
				})
			}
		})
	}
}

func TestLinkErrorsSayWhy(t *testing.T) {
	for _, mode := range []string{"openat2", "walk"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "walk" {
				agentdir.WithoutOpenat2(t)
			}
			h := plant(t)
			for _, rel := range []string{"dir/secret", "file", "dir"} {
				_, err := h.dir.ReadFile(rel, 1<<20)
				if !errors.Is(err, agentdir.ErrLink) {
					t.Fatalf("%s: err = %v, want ErrLink", rel, err)
				}
				var pe *fs.PathError
				if !errors.As(err, &pe) || pe.Path != filepath.Join(h.root, rel) {
					t.Fatalf("%s: err = %v, want the path named", rel, err)
				}
			}
			if _, err := h.dir.Dir("dir"); !errors.Is(err, agentdir.ErrLink) {
				t.Fatalf("Dir(dir): err = %v, want ErrLink", err)
			}
		})
	}
}

func TestSocket(t *testing.T) {
	h := plant(t)
	// A link planted where the socket goes is replaced, not followed.
	if err := os.Symlink(h.secret, filepath.Join(h.root, "s.sock")); err != nil {
		t.Fatal(err)
	}
	s, err := h.dir.Listen("s.sock", 0o666)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(h.root, "s.sock"))
	if err != nil || fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o666 {
		t.Fatalf("socket: %v %v", fi, err)
	}
	go func() {
		if c, err := s.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := h.dir.Dial(context.Background(), "s.sock")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	// Closed, the socket it bound is removed.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(h.root, "s.sock")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket left after Close: %v", err)
	}
	if s, err = h.dir.Listen("s.sock", 0o666); err != nil {
		t.Fatal(err)
	}
	// The agent swaps a link in: Close leaves it (and its target) alone.
	os.Remove(filepath.Join(h.root, "s.sock"))
	if err := os.Symlink(h.secret, filepath.Join(h.root, "s.sock")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(h.root, "s.sock")); err != nil || fi.Mode().Type() != fs.ModeSymlink {
		t.Fatalf("the agent's link: %v %v", fi, err)
	}
	h.untouched(t)
	// A directory in its place is refused.
	if err := os.Mkdir(filepath.Join(h.root, "d.sock"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dir.Listen("d.sock", 0o666); err == nil {
		t.Fatal("listened over a directory")
	}
}

func TestWriteAndCreate(t *testing.T) {
	h := plant(t)
	if err := h.dir.WriteFile("real/a", []byte("one"), 0o640, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.dir.WriteFile("real/a", []byte("two"), 0o640, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := h.dir.ReadFile("real/a", 10); err != nil || string(b) != "two" {
		t.Fatalf("read %q %v", b, err)
	}
	if fi, err := h.dir.Lstat("real/a"); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("lstat %v %v", fi, err)
	}
	if _, err := h.dir.ReadFile("real/a", 2); err == nil {
		t.Fatal("read past max")
	}
	// Over an existing name, nothing is written in the directory, not even a temporary
	// file (the daemon makes sure of its files before every turn: a synced temporary
	// file each time was a cost on the turn's path).
	watch := watchCreates(t, filepath.Join(h.root, "real"))
	created, err := h.dir.CreateFile("real/a", []byte("three"), 0o600, nil)
	if err != nil || created {
		t.Fatalf("CreateFile over an existing file: %v %v", created, err)
	}
	if names := watch(); len(names) > 0 {
		t.Fatalf("CreateFile over an existing file created %q", names)
	}
	entries, err := h.dir.ReadDir("real")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got, want := strings.Join(names, " "), "a inner relsec"; got != want {
		t.Fatalf("entries %q, want %q (no temporary file left)", got, want)
	}
}

// watchCreates watches dir for entries created in it; the function it returns stops
// watching and names them.
func watchCreates(t *testing.T, dir string) func() []string {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	return func() []string {
		defer unix.Close(fd)
		var names []string
		buf := make([]byte, 64<<10)
		n, err := unix.Read(fd, buf)
		if err != nil && !errors.Is(err, unix.EAGAIN) {
			t.Fatal(err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			names = append(names, strings.TrimRight(string(name), "\x00"))
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		return names
	}
}
