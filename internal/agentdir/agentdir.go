// Package agentdir is the one way the daemon touches a directory an agent can write: a
// group folder, a session home, an IPC directory and everything in them. An agent owns
// that ground while its container runs and may plant a symlink or swap a directory for
// one at any moment, so nothing here takes a path string to the kernel: a Dir is an open
// directory descriptor, every path below it is resolved by openat2 with RESOLVE_BENEATH
// and RESOLVE_NO_SYMLINKS (no component, the last included, is ever a followed link; where
// openat2 is missing or filtered, the same walk is done with openat and O_NOFOLLOW),
// files are created O_CREAT|O_EXCL, replaced by a rename inside the same descriptor, and
// removed, chmod-ed and stat-ed through the descriptor of their parent without following
// the last component.
//
// It owns nothing but that mechanism: which directories are agent ground, and what goes
// in them, is its callers' business.
package agentdir

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrLink is wrapped when a path below a Dir is, or passes through, a symlink.
var ErrLink = errors.New("symlink refused")

// ErrNotRegular is wrapped when a file to read is a directory, FIFO, device or socket.
var ErrNotRegular = errors.New("not a regular file")

// resolve is how every path below a Dir is resolved.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Dir is an open directory an agent can write. Its methods take paths relative to it
// ("input/_close"), never absolute, never with "..". A Dir is safe for concurrent use.
type Dir struct {
	f *os.File
}

// Open opens the directory at path. Its last component must not be a symlink; the
// directories above it must be the daemon's (an agent cannot write them), which the caller
// vouches for: everything below it is then reached only through its descriptor.
func Open(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathError("open", path, err)
	}
	return &Dir{f: os.NewFile(uintptr(fd), path)}, nil
}

// Name is the path the directory had when it was opened, for messages.
func (d *Dir) Name() string { return d.f.Name() }

// Close closes the descriptor.
func (d *Dir) Close() error { return d.f.Close() }

func (d *Dir) fd() int { return int(d.f.Fd()) }

func (d *Dir) join(rel string) string { return filepath.Join(d.f.Name(), rel) }

// clean checks that rel is a relative path below d.
func clean(rel string) (string, error) {
	c := path.Clean(rel)
	if rel == "" || path.IsAbs(rel) || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%q: %w", rel, fs.ErrInvalid)
	}
	return c, nil
}

func (d *Dir) openat2(rel string, flags uint64, mode uint64) (int, error) {
	c, err := clean(rel)
	if err != nil {
		return -1, err
	}
	fd, err := resolveBeneath(d.fd(), c, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW, mode)
	if err != nil {
		// A link where a directory is wanted is ENOTDIR; say what it is.
		if errors.Is(err, unix.ENOTDIR) && isLink(d.fd(), c) {
			err = unix.ELOOP
		}
		return -1, pathError("open", d.join(c), err)
	}
	return fd, nil
}

// resolveBeneath opens rel below dirfd with openat2, or with walk where openat2 is missing.
func resolveBeneath(dirfd int, rel string, flags, mode uint64) (int, error) {
	for !noOpenat2.Load() {
		fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{Flags: flags, Mode: mode, Resolve: resolve})
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue // a rename elsewhere on the file system raced the lookup
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
			// A kernel before 5.6, or a seccomp filter that does not know openat2
			// (systemd-nspawn's, some service managers'): walk instead, from now on,
			// unless the walk gets EPERM too (then it was the file's).
			fd, werr := walk(dirfd, rel, flags, uint32(mode))
			if werr == nil || !errors.Is(werr, unix.EPERM) {
				noOpenat2.Store(true)
			}
			return fd, werr
		}
		return fd, err
	}
	return walk(dirfd, rel, flags, uint32(mode))
}

// noOpenat2 is set once openat2 turned out to be unavailable.
var noOpenat2 atomic.Bool

// walk is what openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS does, one component at a
// time with openat and O_NOFOLLOW: every directory on the way is opened without following
// a link (ELOOP or ENOTDIR for one), and the last component with flags (which hold
// O_NOFOLLOW). rel is clean: relative, without "..".
func walk(dirfd int, rel string, flags uint64, mode uint32) (int, error) {
	comps := strings.Split(rel, "/")
	fd := dirfd
	for i, name := range comps[:len(comps)-1] {
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if fd != dirfd {
			unix.Close(fd)
		}
		if err != nil {
			if errors.Is(err, unix.ENOTDIR) && isLink(dirfd, strings.Join(comps[:i+1], "/")) {
				err = unix.ELOOP
			}
			return -1, err
		}
		fd = next
	}
	last, err := unix.Openat(fd, comps[len(comps)-1], int(flags), mode)
	if fd != dirfd {
		unix.Close(fd)
	}
	return last, err
}

// isLink says whether rel below dirfd is a symlink, looked at without following one.
func isLink(dirfd int, rel string) bool {
	dir, base := path.Split(rel)
	fd := dirfd
	if dir != "" {
		var err error
		if fd, err = resolveBeneath(dirfd, path.Clean(dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
			return false
		}
		defer unix.Close(fd)
	}
	var st unix.Stat_t
	return unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// pathError names path and turns ELOOP (a symlink met under RESOLVE_NO_SYMLINKS or
// O_NOFOLLOW) into ErrLink.
func pathError(op, path string, err error) error {
	if errors.Is(err, unix.ELOOP) {
		err = ErrLink
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

// Dir opens the directory rel below d.
func (d *Dir) Dir(rel string) (*Dir, error) {
	fd, err := d.openat2(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	return &Dir{f: os.NewFile(uintptr(fd), d.join(rel))}, nil
}

// parent opens the directory that holds rel's last component and returns it with that
// component. The caller closes the Dir when it is not d.
func (d *Dir) parent(rel string) (*Dir, string, error) {
	c, err := clean(rel)
	if err != nil {
		return nil, "", err
	}
	if c == "." {
		return nil, "", fmt.Errorf("%q names the directory itself: %w", rel, fs.ErrInvalid)
	}
	dir, base := path.Split(c)
	if dir == "" {
		return d, base, nil
	}
	p, err := d.Dir(dir)
	if err != nil {
		return nil, "", err
	}
	return p, base, nil
}

func (d *Dir) release(p *Dir) {
	if p != d {
		p.Close()
	}
}

// Mkdir creates the directory rel (its parent must exist) with mode perm exactly.
// A directory already there is fs.ErrExist, whatever it is.
func (d *Dir) Mkdir(rel string, perm os.FileMode) error {
	p, base, err := d.parent(rel)
	if err != nil {
		return err
	}
	defer d.release(p)
	if err := unix.Mkdirat(p.fd(), base, uint32(perm.Perm())); err != nil {
		return pathError("mkdir", d.join(rel), err)
	}
	sub, err := p.Dir(base)
	if err != nil {
		return err
	}
	defer sub.Close()
	return sub.f.Chmod(perm.Perm())
}

// OpenFile opens the file rel with flags (os.O_*): never through a symlink, and with
// os.O_CREATE only together with os.O_EXCL, so the file is always one the call created.
func (d *Dir) OpenFile(rel string, flags int, perm os.FileMode) (*os.File, error) {
	if flags&os.O_CREATE != 0 && flags&os.O_EXCL == 0 {
		return nil, fmt.Errorf("open %s: O_CREATE without O_EXCL: %w", d.join(rel), fs.ErrInvalid)
	}
	fd, err := d.openat2(rel, uint64(flags), uint64(perm.Perm()))
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), d.join(rel))
	if flags&os.O_CREATE != 0 {
		// The umask took bits off: give the file the mode asked for, through its descriptor.
		if err := f.Chmod(perm.Perm()); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// Create creates the file rel, which must not exist (a symlink there is fs.ErrExist too),
// for writing, with mode perm.
func (d *Dir) Create(rel string, perm os.FileMode) (*os.File, error) {
	return d.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
}

// ReadFile reads the regular file rel, at most max bytes (more is an error). It opens the
// file non-blocking, so a FIFO in its place cannot stall the daemon.
func (d *Dir) ReadFile(rel string, max int64) ([]byte, error) {
	f, err := d.OpenFile(rel, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: f.Name(), Err: fmt.Errorf("%w (%s)", ErrNotRegular, st.Mode().Type())}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("read %s: larger than %d bytes", f.Name(), max)
	}
	return data, nil
}

// Owner is who a file is given after it is written; nil leaves it the daemon's.
type Owner struct{ UID, GID int }

// WriteFile replaces rel with data, mode perm, owned by owner (nil: the daemon): a new
// temporary file next to it, synced, renamed over rel inside the same parent descriptor (a
// symlink at rel is replaced, never followed), and the directory synced. Readers see the
// old content or the new.
func (d *Dir) WriteFile(rel string, data []byte, perm os.FileMode, owner *Owner) error {
	p, base, err := d.parent(rel)
	if err != nil {
		return err
	}
	defer d.release(p)
	tmp, err := p.temp(base, data, perm, owner)
	if err != nil {
		return fmt.Errorf("write %s: %w", d.join(rel), err)
	}
	if err := unix.Renameat(p.fd(), tmp, p.fd(), base); err != nil {
		unix.Unlinkat(p.fd(), tmp, 0)
		return pathError("write", d.join(rel), err)
	}
	if err := p.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", p.Name(), err)
	}
	return nil
}

// CreateFile creates rel with data, mode perm, owned by owner (nil: the daemon), unless
// something (a file, a directory, a symlink) already has that name: then it is false and
// nothing changed. The file appears complete or not at all: it is written under a
// temporary name and hard-linked into place, which fails rather than replaces.
func (d *Dir) CreateFile(rel string, data []byte, perm os.FileMode, owner *Owner) (bool, error) {
	p, base, err := d.parent(rel)
	if err != nil {
		return false, err
	}
	defer d.release(p)
	// A name already taken is the common case (the daemon makes sure of its files before
	// every turn): answered without writing, syncing and unlinking a temporary file.
	var st unix.Stat_t
	if unix.Fstatat(p.fd(), base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		return false, nil
	}
	tmp, err := p.temp(base, data, perm, owner)
	if err != nil {
		return false, fmt.Errorf("create %s: %w", d.join(rel), err)
	}
	defer unix.Unlinkat(p.fd(), tmp, 0)
	switch err := unix.Linkat(p.fd(), tmp, p.fd(), base, 0); {
	case errors.Is(err, unix.EEXIST):
		return false, nil
	case err != nil:
		return false, pathError("create", d.join(rel), err)
	}
	if err := p.f.Sync(); err != nil {
		return false, fmt.Errorf("sync %s: %w", p.Name(), err)
	}
	return true, nil
}

// tempMarker is in the name of every file WriteFile and CreateFile write before it takes
// its place: such a file is gone (renamed, linked and unlinked) a moment later.
const tempMarker = ".tmp-"

// IsTemp says whether name (a base name) is one of those files, which a reader walking a
// directory skips: they are not part of its content.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker)
}

// temp writes data into a new file of d named after base, and returns its name.
func (d *Dir) temp(base string, data []byte, perm os.FileMode, owner *Owner) (string, error) {
	name := "." + base + tempMarker + rand.Text()
	f, err := d.Create(name, perm)
	if err != nil {
		return "", err
	}
	if owner != nil {
		err = f.Chown(owner.UID, owner.GID)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(d.fd(), name, 0)
		return "", err
	}
	return name, nil
}

// Remove removes rel: a file, a symlink (never what it points to) or an empty directory.
// Nothing there is fs.ErrNotExist.
func (d *Dir) Remove(rel string) error {
	p, base, err := d.parent(rel)
	if err != nil {
		return err
	}
	defer d.release(p)
	err = unix.Unlinkat(p.fd(), base, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(p.fd(), base, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return pathError("remove", d.join(rel), err)
	}
	return nil
}

// Clear removes everything in the directory rel ("." for d itself) and keeps the
// directory: files, symlinks (not followed) and directories with all they hold.
func (d *Dir) Clear(rel string) error {
	sub, err := d.Dir(rel)
	if err != nil {
		return err
	}
	defer sub.Close()
	names, err := sub.names()
	if err != nil {
		return err
	}
	for _, name := range names {
		err := unix.Unlinkat(sub.fd(), name, 0)
		if errors.Is(err, unix.EISDIR) {
			if err = sub.Clear(name); err == nil {
				err = unix.Unlinkat(sub.fd(), name, unix.AT_REMOVEDIR)
			}
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return pathError("remove", sub.join(name), err)
		}
	}
	return nil
}

// names lists the entries of d, a directory just opened.
func (d *Dir) names() ([]string, error) {
	names, err := d.f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.Name(), err)
	}
	return names, nil
}

// ReadDir lists the directory rel ("." for d itself), each entry with what lstat says of
// it, sorted by name.
func (d *Dir) ReadDir(rel string) ([]fs.DirEntry, error) {
	sub, err := d.Dir(rel)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	entries, err := sub.f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", sub.Name(), err)
	}
	sortEntries(entries)
	return entries, nil
}

// Lstat describes rel itself: a symlink there is described, not followed.
func (d *Dir) Lstat(rel string) (fs.FileInfo, error) {
	c, err := clean(rel)
	if err != nil {
		return nil, err
	}
	if c == "." {
		return d.f.Stat()
	}
	p, base, err := d.parent(c)
	if err != nil {
		return nil, err
	}
	defer d.release(p)
	return lstatAt(p, base)
}

// Chown gives rel (not what a symlink there points to) to uid:gid.
func (d *Dir) Chown(rel string, uid, gid int) error {
	p, base, err := d.parent(rel)
	if err != nil {
		return err
	}
	defer d.release(p)
	if err := unix.Fchownat(p.fd(), base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return pathError("chown", d.join(rel), err)
	}
	return nil
}

// Sync flushes the directory rel ("." for d itself) to disk.
func (d *Dir) Sync(rel string) error {
	sub, err := d.Dir(rel)
	if err != nil {
		return err
	}
	defer sub.Close()
	return sub.f.Sync()
}
