package groupfolder

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestNewLayout(t *testing.T) {
	for _, tc := range []struct {
		dir string
		ok  bool
	}{
		{"/srv/arizuko", true},
		{"/var/lib/arizuko", true},
		{"", false},
		{"relative/dir", false},
		{"/srv/arizuko/", false},
		{"/srv//arizuko", false},
		{"/srv/../etc", false},
		{"/", false},
		{"/srv/a\x00b", false},
	} {
		_, err := NewLayout(tc.dir)
		if (err == nil) != tc.ok {
			t.Errorf("NewLayout(%q) error = %v, want ok=%v", tc.dir, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadDataDir) {
			t.Errorf("NewLayout(%q) error %v does not wrap ErrBadDataDir", tc.dir, err)
		}
	}
}

func TestLayoutPaths(t *testing.T) {
	l := Layout{DataDir: "/srv/arizuko"}
	d, err := l.Paths("main/research")
	if err != nil {
		t.Fatal(err)
	}
	want := Dirs{
		Group:          "/srv/arizuko/groups/main/research",
		Share:          "/srv/arizuko/groups/main/share",
		Global:         "/srv/arizuko/groups/global",
		Session:        "/srv/arizuko/sessions/main-research",
		Claude:         "/srv/arizuko/claude/main-research",
		IPC:            "/srv/arizuko/ipc/main-research",
		IPCInput:       "/srv/arizuko/ipc/main-research/input",
		SidecarSockets: "/srv/arizuko/ipc/main-research/sidecars",
		Media:          "/srv/arizuko/groups/main/research/media",
		Logs:           "/srv/arizuko/groups/main/research/logs",
	}
	if d != want {
		t.Errorf("Paths = %+v\nwant %+v", d, want)
	}
	for _, tc := range []struct {
		fn   func() (string, error)
		want string
	}{
		{l.EnvFile, "/srv/arizuko/env/env"},
		{l.EnvDir, "/srv/arizuko/env"},
		{l.StorePath, "/srv/arizuko/arizukod.db"},
	} {
		got, err := tc.fn()
		if err != nil || got != tc.want {
			t.Errorf("got %q, %v; want %q", got, err, tc.want)
		}
	}
}

func TestLayoutRejectsForgedFolders(t *testing.T) {
	l := Layout{DataDir: "/srv/arizuko"}
	for _, f := range []Folder{"../../etc", "/etc", "main/../../x", "", "main/", "Main"} {
		for name, fn := range map[string]func(Folder) (string, error){
			"GroupDir": l.GroupDir, "ShareDir": l.ShareDir, "SessionDir": l.SessionDir,
			"IPCDir": l.IPCDir, "IPCInputDir": l.IPCInputDir, "SidecarSocketDir": l.SidecarSocketDir,
			"MediaDir": l.MediaDir, "LogsDir": l.LogsDir,
		} {
			if p, err := fn(f); err == nil || !errors.Is(err, ErrInvalidFolder) {
				t.Errorf("%s(%q) = %q, %v; want ErrInvalidFolder", name, f, p, err)
			}
		}
		if _, err := l.Ensure(f, os.Getuid(), os.Getgid()); !errors.Is(err, ErrInvalidFolder) {
			t.Errorf("Ensure(%q) error = %v", f, err)
		}
	}
	bad := Layout{DataDir: "rel"}
	if _, err := bad.GroupDir("main"); !errors.Is(err, ErrBadDataDir) {
		t.Errorf("relative DataDir accepted: %v", err)
	}
	if _, err := bad.StorePath(); !errors.Is(err, ErrBadDataDir) {
		t.Errorf("relative DataDir accepted: %v", err)
	}
}

func TestWithin(t *testing.T) {
	l := Layout{DataDir: "/data"}
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/data", true},
		{"/data/groups/main", true},
		{"/data2", false},
		{"/data2/groups", false},
		{"/dat", false},
		{"/", false},
		{"/data/../etc", false},
		{"/data/groups/../../etc", false},
		{"/data/", false},
		{"/data//x", false},
		{"data/x", false},
		{"", false},
		{"/data/x\x00", false},
	} {
		err := l.Within(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("Within(%q) = %v, want ok=%v", tc.path, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrOutsideDataDir) {
			t.Errorf("Within(%q) error %v does not wrap ErrOutsideDataDir", tc.path, err)
		}
	}
}

func newDataDir(t *testing.T) Layout {
	t.Helper()
	l, err := NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestEnsureCreates(t *testing.T) {
	l := newDataDir(t)
	uid, gid := os.Getuid(), os.Getgid()
	if os.Geteuid() == 0 {
		uid, gid = 4242, 4343
	}
	d, err := l.Ensure("main/research", uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := l.Paths("main/research")
	if d != want {
		t.Fatalf("Ensure returned %+v, want %+v", d, want)
	}
	for _, p := range []string{d.Group, d.Share, d.Global, d.Session, d.IPC, d.IPCInput, d.SidecarSockets, d.Media, d.Logs,
		filepath.Join(l.DataDir, "groups/main")} {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if !st.IsDir() || st.Mode().Perm() != DirMode {
			t.Errorf("%s: mode %v", p, st.Mode())
		}
		if o := ownerOf(t, p); o != uid {
			t.Errorf("%s: owner %d, want %d", p, o, uid)
		}
	}
	for _, top := range []string{"groups", "sessions", "ipc"} {
		if o := ownerOf(t, filepath.Join(l.DataDir, top)); o != os.Geteuid() {
			t.Errorf("%s: owner %d, want the daemon", top, o)
		}
	}
	if _, err := l.Ensure("main/research", uid, gid); err != nil {
		t.Errorf("second Ensure: %v", err)
	}
	env, err := l.EnsureEnvDir()
	if err != nil || env != filepath.Join(l.DataDir, "env", "env") {
		t.Errorf("EnsureEnvDir = %q, %v", env, err)
	}
}

func TestEnsureRefuses(t *testing.T) {
	outside := t.TempDir()
	uid, gid := os.Getuid(), os.Getgid()
	for _, tc := range []struct {
		name   string
		folder Folder
		plant  func(t *testing.T, data string)
		want   string
		root   bool
	}{
		{"world dir is a symlink", "main", func(t *testing.T, data string) {
			mkdir(t, data, "groups")
			symlink(t, outside, data, "groups/main")
		}, "is a symlink", false},
		{"media is a symlink", "main", func(t *testing.T, data string) {
			mkdir(t, data, "groups/main")
			symlink(t, "/etc", data, "groups/main/media")
		}, "groups/main/media is a symlink", false},
		{"logs is a dangling symlink", "main", func(t *testing.T, data string) {
			mkdir(t, data, "groups/main")
			symlink(t, filepath.Join(outside, "nothing"), data, "groups/main/logs")
		}, "groups/main/logs is a symlink", false},
		{"share is a symlink", "main/research", func(t *testing.T, data string) {
			mkdir(t, data, "groups/main")
			symlink(t, outside, data, "groups/main/share")
		}, "groups/main/share is a symlink", false},
		{"global is a symlink", "main/research", func(t *testing.T, data string) {
			mkdir(t, data, "groups")
			symlink(t, outside, data, "groups/global")
		}, "groups/global is a symlink", false},
		{"global is a file", "main", func(t *testing.T, data string) {
			mkdir(t, data, "groups")
			if err := os.WriteFile(filepath.Join(data, "groups/global"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "groups/global is not a directory", false},
		{"child group dir planted by parent as symlink", "main/research", func(t *testing.T, data string) {
			mkdir(t, data, "groups/main")
			symlink(t, "/", data, "groups/main/research")
		}, "groups/main/research is a symlink", false},
		{"top-level groups is a symlink", "main", func(t *testing.T, data string) {
			symlink(t, outside, data, "groups")
		}, "groups is a symlink", false},
		{"sessions is a symlink", "main", func(t *testing.T, data string) {
			symlink(t, outside, data, "sessions")
		}, "sessions is a symlink", false},
		{"ipc dir is a symlink", "main", func(t *testing.T, data string) {
			mkdir(t, data, "ipc")
			symlink(t, outside, data, "ipc/main")
		}, "ipc/main is a symlink", false},
		{"file where a dir should be", "main", func(t *testing.T, data string) {
			mkdir(t, data, "groups/main")
			if err := os.WriteFile(filepath.Join(data, "groups/main/media"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "groups/main/media is not a directory", false},
		{"world-writable group dir", "main", func(t *testing.T, data string) {
			mkdir(t, data, "groups/main")
			if err := os.Chmod(filepath.Join(data, "groups/main"), 0o777); err != nil {
				t.Fatal(err)
			}
		}, "world-writable", false},
		{"wrong owner", "main", func(t *testing.T, data string) {
			mkdir(t, data, "groups/main")
			if err := os.Chown(filepath.Join(data, "groups/main"), 31337, 31337); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 31337", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				if os.Getenv("ARIZUKO_REQUIRE_ENGINES") == "1" {
					t.Fatal("needs root to chown, and the suite runs as root")
				}
				t.Skip("needs root to chown")
			}
			l := newDataDir(t)
			tc.plant(t, l.DataDir)
			_, err := l.Ensure(tc.folder, uid, gid)
			if err == nil {
				t.Fatal("Ensure succeeded")
			}
			if !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want ErrUnsafeDir containing %q", err, tc.want)
			}
			entries, _ := os.ReadDir(outside)
			if len(entries) != 0 {
				t.Errorf("Ensure wrote through the link: %v", entries)
			}
		})
	}
}

// TestEnsureReplacesScratch: a link or a file an agent left in place of its IPC directory's
// input/ or sidecars/ is removed (not followed) and the directory made anew, so the agent
// cannot lock its folder out of the next turn; what the link pointed to is untouched.
func TestEnsureReplacesScratch(t *testing.T) {
	uid, gid := os.Getuid(), os.Getgid()
	for _, name := range []string{"input", "sidecars"} {
		t.Run(name, func(t *testing.T) {
			outside := t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("keep"), 0o600); err != nil {
				t.Fatal(err)
			}
			l := newDataDir(t)
			mkdir(t, l.DataDir, "ipc/main")
			symlink(t, outside, l.DataDir, "ipc/main/"+name)
			if _, err := l.Ensure("main", uid, gid); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(filepath.Join(l.DataDir, "ipc/main", name))
			if err != nil || !fi.IsDir() || fi.Mode().Perm() != DirMode {
				t.Fatalf("%s after Ensure: %v %v", name, fi, err)
			}
			entries, _ := os.ReadDir(outside)
			if b, _ := os.ReadFile(filepath.Join(outside, "keep")); len(entries) != 1 || string(b) != "keep" {
				t.Fatalf("the link's target changed: %v %q", entries, b)
			}
		})
	}
}

func TestEnsureMissingDataDir(t *testing.T) {
	l := Layout{DataDir: filepath.Join(t.TempDir(), "missing")}
	if _, err := l.Ensure("main", os.Getuid(), os.Getgid()); !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "data directory") {
		t.Errorf("error = %v", err)
	}
}

func TestCreateLog(t *testing.T) {
	l := newDataDir(t)
	if _, err := l.Ensure("main", os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	f, err := l.CreateLog("main", "container-1700000000000.log")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, err := os.Stat(f.Name())
	if err != nil || st.Mode().Perm() != 0o600 || f.Name() != filepath.Join(l.DataDir, "groups/main/logs/container-1700000000000.log") {
		t.Errorf("log %s: %v %v", f.Name(), st, err)
	}
	if _, err := l.CreateLog("main", "container-1700000000000.log"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("existing log reopened: %v", err)
	}
	target := filepath.Join(t.TempDir(), "victim")
	symlink(t, target, l.DataDir, "groups/main/logs/container-2.log")
	if _, err := l.CreateLog("main", "container-2.log"); err == nil {
		t.Error("CreateLog followed a planted symlink")
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("victim created: %v", err)
	}
	for _, name := range []string{"", ".hidden", "../x", "a/b", "-x", "a\x00"} {
		if _, err := l.CreateLog("main", name); !errors.Is(err, ErrUnsafeDir) {
			t.Errorf("CreateLog(%q) = %v", name, err)
		}
	}
	if err := os.RemoveAll(filepath.Join(l.DataDir, "groups/main/logs")); err != nil {
		t.Fatal(err)
	}
	symlink(t, t.TempDir(), l.DataDir, "groups/main/logs")
	if _, err := l.CreateLog("main", "x.log"); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("CreateLog through a symlinked logs dir: %v", err)
	}
}

func mkdir(t *testing.T, base, rel string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(base, rel), 0o700); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, base, rel string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(base, rel)); err != nil {
		t.Fatal(err)
	}
}

func ownerOf(t *testing.T, path string) int {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(st.Sys().(*syscall.Stat_t).Uid)
}
