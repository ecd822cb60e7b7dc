package daemon

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// listen returns the first socket systemd passed (passed, from activation.Listeners, which
// also removes LISTEN_* from the environment so that no child inherits them), or a unix
// socket made at path with mode.
func listen(passed []net.Listener, path string, mode os.FileMode, group string) (net.Listener, bool, error) {
	for _, l := range passed {
		if l != nil {
			return l, true, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, false, fmt.Errorf("listen %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, false, fmt.Errorf("listen %s: a file that is not a socket is in the way", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, false, fmt.Errorf("listen %s: another daemon answers there", path)
		}
		os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, false, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, false, fmt.Errorf("listen %s: %w", path, err)
	}
	if group != "" {
		gid, err := lookupGID(group)
		if err == nil {
			err = os.Chown(path, -1, gid)
		}
		if err != nil {
			l.Close()
			return nil, false, fmt.Errorf("listen %s: group %s: %w", path, group, err)
		}
	}
	return l, false, nil
}

func lookupGID(group string) (int, error) {
	g, err := user.LookupGroup(group)
	if err != nil {
		return -1, err
	}
	return strconv.Atoi(g.Gid)
}

// peerListener admits only the daemon's own user, root, and members of one group, judged
// by the kernel's SO_PEERCRED of each connection. Others get a 403 and are closed.
type peerListener struct {
	net.Listener
	uid      int
	groupGID int // -1: no group
	log      *slog.Logger
}

func newPeerListener(l net.Listener, group string, log *slog.Logger) (*peerListener, error) {
	gid := -1
	if group != "" {
		g, err := lookupGID(group)
		if err != nil {
			return nil, fmt.Errorf("allow_group %q: %w", group, err)
		}
		gid = g
	}
	return &peerListener{Listener: l, uid: os.Getuid(), groupGID: gid, log: log}, nil
}

func (p *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := p.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cred, err := peerCred(c)
		if err == nil && p.allowed(cred) {
			return c, nil
		}
		reason := "credentials unavailable"
		if err == nil {
			reason = fmt.Sprintf("uid %d gid %d (pid %d) is not the service user, root or a member of the allowed group", cred.Uid, cred.Gid, cred.Pid)
		}
		p.log.Warn("refused API connection", "reason", reason)
		go refuse(c, reason)
	}
}

// refuse answers 403 with the reason and closes c. It shuts down only its own side first
// and reads what the peer sends (for two seconds at most): a socket closed outright would
// make the peer's write of its request fail, and the peer would never read the reason.
func refuse(c net.Conn, reason string) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	body := fmt.Sprintf(`{"error":%q}`, "forbidden: "+reason)
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if uc, ok := c.(*net.UnixConn); ok {
		uc.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

func peerCred(c net.Conn) (*unix.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

func (p *peerListener) allowed(c *unix.Ucred) bool {
	if int(c.Uid) == p.uid || c.Uid == 0 {
		return true
	}
	if p.groupGID < 0 {
		return false
	}
	if int(c.Gid) == p.groupGID {
		return true
	}
	return inSupplementaryGroup(int(c.Pid), p.groupGID)
}

// inSupplementaryGroup reads the peer's supplementary groups from /proc, which
// SO_PEERCRED does not carry.
func inSupplementaryGroup(pid, gid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			for _, g := range strings.Fields(rest) {
				if g == strconv.Itoa(gid) {
					return true
				}
			}
		}
	}
	return false
}
