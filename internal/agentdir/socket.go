package agentdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Socket is a unix socket the daemon listens on in a Dir.
type Socket struct {
	*net.UnixListener
	dir  *Dir // a descriptor of its own, open as long as the socket
	name string
	id   [2]uint64 // device and inode of the file bound
}

// Listen binds the unix socket name (one component) in d and gives it mode. What was at
// name (a stale socket, a file, a symlink: never followed) is removed first; a directory
// there is an error. The socket is bound through d's descriptor, so a directory swapped
// into d's path meanwhile is not where it lands, and its mode is set through an O_PATH
// descriptor of the file bound, so a symlink renamed over it is refused, not followed.
func (d *Dir) Listen(name string, mode os.FileMode) (*Socket, error) {
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return nil, fmt.Errorf("socket name %q: %w", name, fs.ErrInvalid)
	}
	own, err := d.Dir(".")
	if err != nil {
		return nil, err
	}
	if fi, err := own.Lstat(name); err == nil && fi.IsDir() {
		own.Close()
		return nil, fmt.Errorf("socket path %s is a directory", d.join(name))
	}
	if err := unix.Unlinkat(own.fd(), name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		own.Close()
		return nil, pathError("remove stale socket", d.join(name), err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: own.procPath(name), Net: "unix"})
	if err != nil {
		own.Close()
		return nil, fmt.Errorf("listen on %s: %w", d.join(name), err)
	}
	ln.SetUnlinkOnClose(false)
	s := &Socket{UnixListener: ln, dir: own, name: name}
	if s.id, err = own.chmodSocket(name, mode); err != nil {
		ln.Close()
		own.Close()
		return nil, err
	}
	return s, nil
}

// procPath reaches name in d through d's descriptor.
func (d *Dir) procPath(name string) string {
	return "/proc/self/fd/" + strconv.Itoa(d.fd()) + "/" + name
}

// chmodSocket sets mode on the socket name of d, which must be a socket and not a
// symlink, and returns its device and inode.
func (d *Dir) chmodSocket(name string, mode os.FileMode) ([2]uint64, error) {
	fd, err := unix.Openat(d.fd(), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return [2]uint64{}, pathError("open socket", d.join(name), err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return [2]uint64{}, pathError("stat socket", d.join(name), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return [2]uint64{}, fmt.Errorf("socket %s was replaced before its mode was set", d.join(name))
	}
	// An O_PATH descriptor cannot be fchmod-ed; its /proc link reaches the very inode it
	// holds.
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), uint32(mode.Perm())); err != nil {
		return [2]uint64{}, pathError("chmod socket", d.join(name), err)
	}
	return [2]uint64{uint64(st.Dev), st.Ino}, nil
}

// Path is where the socket was bound, for messages and for clients on the host.
func (s *Socket) Path() string { return s.dir.join(s.name) }

// Close stops listening and removes the socket's file if it is still the one bound:
// whatever an agent put in its place stays.
func (s *Socket) Close() error {
	err := s.UnixListener.Close()
	if fi, serr := s.dir.Lstat(s.name); serr == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && [2]uint64{uint64(st.Dev), st.Ino} == s.id {
			if rerr := s.dir.Remove(s.name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
	}
	return errors.Join(err, s.dir.Close())
}

// Dial connects to the unix socket name in d, which must be a socket and not a symlink:
// the connection goes through an O_PATH descriptor of that very file, so nothing renamed
// over it redirects the daemon to another socket of the host.
func (d *Dir) Dial(ctx context.Context, name string) (net.Conn, error) {
	p, base, err := d.parent(name)
	if err != nil {
		return nil, err
	}
	defer d.release(p)
	fd, err := unix.Openat(p.fd(), base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathError("dial", d.join(name), err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, pathError("dial", d.join(name), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, pathError("dial", d.join(name), fmt.Errorf("not a socket (mode %#o)", st.Mode&unix.S_IFMT))
	}
	var dialer net.Dialer
	return dialer.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}
