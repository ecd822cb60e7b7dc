package agentdir

import (
	"io/fs"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// lstatAt describes the entry base of p without following it: an O_PATH descriptor of the
// entry itself (of a symlink, the link) is stat-ed.
func lstatAt(p *Dir, base string) (fs.FileInfo, error) {
	fd, err := unix.Openat(p.fd(), base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathError("lstat", p.join(base), err)
	}
	f := os.NewFile(uintptr(fd), p.join(base))
	defer f.Close()
	return f.Stat()
}

func sortEntries(entries []fs.DirEntry) {
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
}
