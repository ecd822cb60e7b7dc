package memory

import (
	"io/fs"
	"os"
	"syscall"

	"github.com/arizuko/arizukod/internal/agentdir"
)

// rootFS is the fs.FS Assemble reads through: the group directory is the agent's
// ground, so every path is resolved through its descriptor (agentdir) and neither ".."
// nor a symlink (to outside or inside the group) is followed; files are opened with
// O_NONBLOCK, so opening a FIFO an agent left in place of a memory file returns at once
// (readFile then refuses it as not regular).
type rootFS struct {
	dir *agentdir.Dir
}

func (r rootFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := r.dir.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Stat is Lstat but for a symlink, which is refused as it would be opened.
func (r rootFS) Stat(name string) (fs.FileInfo, error) {
	fi, err := r.Lstat(name)
	if err == nil && fi.Mode().Type() == fs.ModeSymlink {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: agentdir.ErrLink}
	}
	return fi, err
}

func (r rootFS) Lstat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrInvalid}
	}
	return r.dir.Lstat(name)
}
