package memory

import (
	"io/fs"
	"os"
	"syscall"
)

// rootFS is the fs.FS Assemble reads through. Every path is resolved inside an
// os.Root, so neither ".." nor a symlink can leave the group directory, and files
// are opened with O_NONBLOCK, so opening a FIFO an agent left in place of a
// memory file returns at once (readFile then refuses it as not regular).
type rootFS struct {
	root *os.Root
}

func (r rootFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := r.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (r rootFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return r.root.Stat(name)
}
