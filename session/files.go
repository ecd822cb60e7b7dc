package session

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// Modes of what Seed creates.
const (
	dirMode     = 0o755
	secretMode  = 0o600 // settings.json, .claude.json
	skillMode   = 0o644 // skill files and the version file
	maxReadSize = 4 << 20
)

// errNotRegular is wrapped when a path that should hold a file holds a
// directory, FIFO, device or socket.
var errNotRegular = errors.New("not a regular file")

// Owner is the user and group that files and directories Seed creates are
// given: the container's user, so that the agent can read and rewrite its own
// session.
type Owner struct {
	UID, GID int
}

// tree writes below a session directory.
type tree struct {
	root  *os.Root
	owner *Owner // nil: leave the daemon's ownership
}

// mkdirAll creates the missing directories of name, chowning the ones it
// creates. An existing non-directory along the way is an error.
func (t tree) mkdirAll(name string) error {
	parts := strings.Split(name, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		err := t.root.Mkdir(p, dirMode)
		switch {
		case err == nil:
			if t.owner != nil {
				if err := t.root.Lchown(p, t.owner.UID, t.owner.GID); err != nil {
					return err
				}
			}
		case errors.Is(err, fs.ErrExist):
			st, serr := t.root.Stat(p)
			if serr != nil {
				return serr
			}
			if !st.IsDir() {
				return fmt.Errorf("%s: exists and is not a directory", p)
			}
		default:
			return err
		}
	}
	return nil
}

// temp writes data to a new temporary file next to name (same directory, so
// a rename is atomic), with mode perm and the tree's owner, synced to disk.
func (t tree) temp(name string, data []byte, perm os.FileMode) (string, error) {
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".tmp-"+rand.Text())
	f, err := t.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", err
	}
	err = f.Chmod(perm)
	if err == nil && t.owner != nil {
		err = f.Chown(t.owner.UID, t.owner.GID)
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
		t.root.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// writeAtomic replaces name with data: temporary file, fsync, rename, fsync
// of the directory. Readers see the old or the new content, never a mix.
func (t tree) writeAtomic(name string, data []byte, perm os.FileMode) error {
	tmp, err := t.temp(name, data, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := t.root.Rename(tmp, name); err != nil {
		t.root.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return t.syncDir(path.Dir(name))
}

// createIfMissing creates name with data unless something (a file, a
// directory, a symlink) already has that name. The file appears complete or
// not at all: it is written under a temporary name and hard-linked into place,
// which fails rather than replaces.
func (t tree) createIfMissing(name string, data []byte, perm os.FileMode) (bool, error) {
	if _, err := t.root.Lstat(name); err == nil {
		return false, nil
	}
	tmp, err := t.temp(name, data, perm)
	if err != nil {
		return false, fmt.Errorf("create %s: %w", name, err)
	}
	defer t.root.Remove(tmp)
	if err := t.root.Link(tmp, name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, fmt.Errorf("create %s: %w", name, err)
	}
	return true, t.syncDir(path.Dir(name))
}

func (t tree) syncDir(dir string) error {
	d, err := t.root.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// readRegular reads a regular file of at most maxReadSize bytes, opening it
// non-blocking so that a FIFO in its place cannot stall the daemon.
func (t tree) readRegular(name string) ([]byte, os.FileInfo, error) {
	f, err := t.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: %w (%s)", name, errNotRegular, st.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReadSize+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxReadSize {
		return nil, nil, fmt.Errorf("%s: larger than %d bytes", name, maxReadSize)
	}
	return data, st, nil
}
