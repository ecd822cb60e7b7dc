package groupfolder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arizuko/arizukod/contract"
	"golang.org/x/sys/unix"
)

// ErrUnsafeDir is wrapped when a directory below the data directory cannot be
// used safely: it is a symlink, not a directory, has the wrong owner, is
// world-writable, or cannot be created.
var ErrUnsafeDir = errors.New("unsafe or unusable directory")

// DirMode is the mode of every directory Ensure creates.
const DirMode = 0o700

const openDirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// policy says who must own a directory and whether Ensure may create it.
type policy struct {
	create bool
	chown  bool // chown created directories to uid:gid; existing ones must be owned by uid
	// replace lets a symlink or a non-directory in the directory's place be removed
	// (never followed) and the directory made anew: for the IPC directory's input/ and
	// sidecars/, which hold nothing that lasts beyond a turn, so an agent that left a link
	// there does not lock its folder out of its next turn.
	replace bool
	uid     int
	gid     int
}

// daemonPolicy is for the data directory's top-level directories (groups,
// sessions, ipc, env): never mounted, owned by the daemon (or root).
func daemonPolicy() policy { return policy{create: true, uid: os.Geteuid(), gid: os.Getegid()} }

func (p policy) ownerOK(uid uint32) bool {
	if p.chown {
		return int(uid) == p.uid
	}
	return int(uid) == p.uid || uid == 0
}

// Ensure creates f's directories (see Dirs) and returns them. Directories it
// creates get mode DirMode; those below groups/, sessions/ and ipc/ are chowned
// to uid:gid (the container user), the top-level ones and claude/<slug> (never mounted
// writable) stay the daemon's.
//
// Every component below DataDir is opened with O_NOFOLLOW relative to its
// parent's descriptor, so a symlink anywhere below DataDir (for example a
// container replacing /workspace/media with a link to /etc) makes Ensure fail
// instead of being followed. Existing directories must be directories, not
// world-writable, and owned by uid (the top-level ones by the daemon or root).
//
// The returned paths held no symlink when Ensure returned. A process that can
// write into a parent directory (the container of an ancestor folder, which has
// the ancestor's group directory mounted read-write) can still swap a directory
// for a symlink between Ensure and the engine's mount; run ancestor and
// descendant turns one at a time (the queue does: queue/fence.go), and call
// Ensure again right before creating the container.
func (l Layout) Ensure(f Folder, uid, gid int) (Dirs, error) {
	d, err := l.Paths(f)
	if err != nil {
		return Dirs{}, err
	}
	if uid < 0 || gid < 0 {
		return Dirs{}, fmt.Errorf("%w: owner %d:%d for %s: uid and gid must be >= 0", ErrUnsafeDir, uid, gid, f)
	}
	root, err := l.openRoot()
	if err != nil {
		return Dirs{}, err
	}
	defer unix.Close(root)
	owned := policy{create: true, chown: true, uid: uid, gid: gid}
	segs := f.Segments()
	scratch := owned
	scratch.replace = true
	for _, w := range []struct {
		top  string
		rel  []string
		last policy
	}{
		{"groups", append(f.Segments(), "media"), owned},
		{"groups", append(f.Segments(), "logs"), owned},
		{"groups", []string{segs[0], "share"}, owned},
		{"groups", []string{"global"}, owned},
		{"sessions", []string{f.ContainerSlug()}, owned},
		{"ipc", []string{f.ContainerSlug(), contract.InputDir}, scratch},
		{"ipc", []string{f.ContainerSlug(), contract.SidecarDir}, scratch},
	} {
		fd, err := l.walkLast(root, append([]string{w.top}, w.rel...), daemonPolicy(), owned, w.last)
		if err != nil {
			return Dirs{}, err
		}
		unix.Close(fd)
	}
	fd, err := l.walk(root, []string{"claude", f.ContainerSlug()}, daemonPolicy(), daemonPolicy())
	if err != nil {
		return Dirs{}, err
	}
	unix.Close(fd)
	return d, nil
}

// EnsureEnvDir creates DataDir/env (mode DirMode, owned by the daemon, never a
// symlink) and returns the env file's path DataDir/env/env.
func (l Layout) EnsureEnvDir() (string, error) {
	file, err := l.EnvFile()
	if err != nil {
		return "", err
	}
	root, err := l.openRoot()
	if err != nil {
		return "", err
	}
	defer unix.Close(root)
	fd, err := l.walk(root, []string{"env"}, daemonPolicy(), daemonPolicy())
	if err != nil {
		return "", err
	}
	unix.Close(fd)
	return file, nil
}

// CreateLog creates a new file named name (a single component: letters,
// digits, '.', '_', '-', not starting with '.') in f's logs directory, mode
// 0600, refusing to follow a symlink in any component below DataDir and
// refusing to open a file that already exists (a container could plant a link
// at a predictable log name). Run Ensure first.
func (l Layout) CreateLog(f Folder, name string) (*os.File, error) {
	dir, err := l.LogsDir(f)
	if err != nil {
		return nil, err
	}
	if err := checkFileName(name); err != nil {
		return nil, err
	}
	root, err := l.openRoot()
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	open := policy{}
	comps := append(append([]string{"groups"}, f.Segments()...), "logs")
	fd, err := l.walk(root, comps, open, open)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	path := filepath.Join(dir, name)
	nfd, err := unix.Openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: create %s: %w", ErrUnsafeDir, path, err)
	}
	return os.NewFile(uintptr(nfd), path), nil
}

func checkFileName(name string) error {
	if name == "" || len(name) > 255 || name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("%w: log file name %q: must be 1-255 bytes, not starting with '.' or '-'", ErrUnsafeDir, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: log file name %q: character %q not allowed", ErrUnsafeDir, name, c)
		}
	}
	return nil
}

func (l Layout) openRoot() (int, error) {
	if err := l.check(); err != nil {
		return -1, err
	}
	fd, err := unix.Open(l.DataDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%w: data directory %s: %v", ErrUnsafeDir, l.DataDir, err)
	}
	return fd, nil
}

// walk opens comps one by one below root, never following a symlink. The
// first component is judged by top, the rest by rest. It returns the last
// directory's descriptor.
func (l Layout) walk(root int, comps []string, top, rest policy) (int, error) {
	return l.walkLast(root, comps, top, rest, rest)
}

// walkLast is walk with the last component judged by last.
func (l Layout) walkLast(root int, comps []string, top, rest, last policy) (int, error) {
	fd := root
	path := l.DataDir
	for i, name := range comps {
		path = filepath.Join(path, name)
		if err := l.Within(path); err != nil {
			return -1, err
		}
		p := rest
		switch i {
		case 0:
			p = top
		case len(comps) - 1:
			p = last
		}
		next, err := stepDir(fd, path, name, p)
		if fd != root {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	if fd == root {
		return -1, fmt.Errorf("%w: nothing to open below %s", ErrUnsafeDir, l.DataDir)
	}
	return fd, nil
}

func stepDir(parent int, path, name string, p policy) (int, error) {
	fd, err := unix.Openat(parent, name, openDirFlags, 0)
	if err != nil && p.replace && !errors.Is(err, unix.ENOENT) {
		// A link, a file or a FIFO in the directory's place: unlinkat removes the entry
		// itself (a directory is refused with EISDIR and judged below as it is).
		if uerr := unix.Unlinkat(parent, name, 0); uerr == nil {
			err = unix.ENOENT
		}
	}
	created := false
	if errors.Is(err, unix.ENOENT) && p.create {
		switch merr := unix.Mkdirat(parent, name, DirMode); {
		case merr == nil:
			created = true
		case errors.Is(merr, unix.EEXIST):
		default:
			return -1, fmt.Errorf("%w: create %s: %v", ErrUnsafeDir, path, merr)
		}
		fd, err = unix.Openat(parent, name, openDirFlags, 0)
	}
	if err != nil {
		return -1, describeOpenError(parent, path, name, err)
	}
	if created {
		if err := finishCreated(fd, path, p); err != nil {
			unix.Close(fd)
			return -1, err
		}
		return fd, nil
	}
	if p.create || p.chown {
		if err := checkExisting(fd, path, p); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

func finishCreated(fd int, path string, p policy) error {
	if p.chown {
		if err := unix.Fchown(fd, p.uid, p.gid); err != nil {
			return fmt.Errorf("%w: chown %s to %d:%d: %v", ErrUnsafeDir, path, p.uid, p.gid, err)
		}
	}
	if err := unix.Fchmod(fd, DirMode); err != nil {
		return fmt.Errorf("%w: chmod %s: %v", ErrUnsafeDir, path, err)
	}
	return nil
}

func checkExisting(fd int, path string, p policy) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%w: stat %s: %v", ErrUnsafeDir, path, err)
	}
	if !p.ownerOK(st.Uid) {
		return fmt.Errorf("%w: %s is owned by uid %d, want uid %d", ErrUnsafeDir, path, st.Uid, p.uid)
	}
	if st.Mode&0o002 != 0 {
		return fmt.Errorf("%w: %s is world-writable (mode %#o)", ErrUnsafeDir, path, st.Mode&0o7777)
	}
	return nil
}

func describeOpenError(parent int, path, name string, err error) error {
	var st unix.Stat_t
	if serr := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return fmt.Errorf("%w: %s is a symlink; refusing to follow it", ErrUnsafeDir, path)
		case unix.S_IFDIR:
		default:
			return fmt.Errorf("%w: %s is not a directory", ErrUnsafeDir, path)
		}
	}
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%w: %s does not exist", ErrUnsafeDir, path)
	}
	return fmt.Errorf("%w: open %s: %v", ErrUnsafeDir, path, err)
}
