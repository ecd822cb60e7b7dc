package groupfolder

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// RunLog is one run log of a group: logs/container-<unix_ms>.log.
type RunLog struct {
	Name      string
	StartedMS int64 // the run's start, from the name
	Size      int64
}

// Logs is a group's logs directory, opened without following a symlink below DataDir;
// List and Remove act on that directory whatever is swapped into its path meanwhile.
type Logs struct {
	dir  *os.File
	path string
}

// OpenLogs opens f's logs directory, refusing a symlink in any component below DataDir.
// A group without one has no logs: (nil, nil).
func (l Layout) OpenLogs(f Folder) (*Logs, error) {
	path, err := l.LogsDir(f)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	root, err := l.openRoot()
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	comps := append(append([]string{"groups"}, f.Segments()...), "logs")
	fd, err := l.walk(root, comps, policy{}, policy{})
	if err != nil {
		return nil, err
	}
	return &Logs{dir: os.NewFile(uintptr(fd), path), path: path}, nil
}

// Close closes the directory.
func (g *Logs) Close() error { return g.dir.Close() }

// List returns the run logs: regular files named container-<unix_ms>.log. Anything else
// (a symlink an agent planted, its own files) is not a run log and is left alone. It reads
// the directory once: call it once per OpenLogs.
func (g *Logs) List() ([]RunLog, error) {
	names, err := g.dir.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", g.path, err)
	}
	var out []RunLog
	for _, name := range names {
		ms, ok := runLogTime(name)
		if !ok {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(int(g.dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		out = append(out, RunLog{Name: name, StartedMS: ms, Size: st.Size})
	}
	return out, nil
}

// Remove removes the run log name (as List returned it) from the directory.
func (g *Logs) Remove(name string) error {
	if _, ok := runLogTime(name); !ok {
		return fmt.Errorf("%w: %q is not a run log", ErrUnsafeDir, name)
	}
	if err := unix.Unlinkat(int(g.dir.Fd()), name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", filepath.Join(g.path, name), err)
	}
	return nil
}

// runLogTime is the unix ms of a run log's name, container-<unix_ms>.log.
func runLogTime(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, "container-")
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, ".log"); !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	ms, err := strconv.ParseInt(digits, 10, 64)
	return ms, err == nil
}
