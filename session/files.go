package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/arizuko/arizukod/internal/agentdir"
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
type Owner = agentdir.Owner

// tree writes below a session directory, the agent's home: through agentdir, so no link
// the agent left there is followed.
type tree struct {
	root  *agentdir.Dir
	owner *agentdir.Owner // nil: leave the daemon's ownership
}

// mkdirAll creates the missing directories of name, chowning the ones it
// creates. An existing non-directory (a symlink included) along the way is an error.
func (t tree) mkdirAll(name string) error {
	parts := strings.Split(name, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		err := t.root.Mkdir(p, dirMode)
		switch {
		case err == nil:
			if t.owner != nil {
				if err := t.root.Chown(p, t.owner.UID, t.owner.GID); err != nil {
					return err
				}
			}
		case errors.Is(err, fs.ErrExist):
			st, serr := t.root.Lstat(p)
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

// writeAtomic replaces name with data: temporary file, fsync, rename, fsync
// of the directory. Readers see the old or the new content, never a mix.
func (t tree) writeAtomic(name string, data []byte, perm os.FileMode) error {
	return t.root.WriteFile(name, data, perm, t.owner)
}

// createIfMissing creates name with data unless something (a file, a
// directory, a symlink) already has that name. The file appears complete or
// not at all.
func (t tree) createIfMissing(name string, data []byte, perm os.FileMode) (bool, error) {
	return t.root.CreateFile(name, data, perm, t.owner)
}

// readRegular reads a regular file of at most maxReadSize bytes, opening it
// non-blocking so that a FIFO in its place cannot stall the daemon.
func (t tree) readRegular(name string) ([]byte, os.FileInfo, error) {
	data, err := t.root.ReadFile(name, maxReadSize)
	if err != nil {
		if errors.Is(err, agentdir.ErrNotRegular) {
			err = fmt.Errorf("%s: %w: %w", name, errNotRegular, err)
		}
		return nil, nil, err
	}
	st, err := t.root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	return data, st, nil
}
