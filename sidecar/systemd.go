package sidecar

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// Mode says where sidecars run.
type Mode string

// Modes.
const (
	ModeSystemdUser   Mode = "systemd-user"   // transient units of the user's manager
	ModeSystemdSystem Mode = "systemd-system" // transient units of the system's manager
	ModeEngine        Mode = "engine"         // containers on the engine, no unit
)

// ErrNoSystemd says no systemd manager answered on D-Bus.
var ErrNoSystemd = errors.New("no systemd manager on D-Bus")

// dialTimeout bounds the check that a manager answers, at New and at every redial.
const dialTimeout = 5 * time.Second

// target is the systemd manager whose transient units run the sidecars, and for a user
// manager the runtime directory that holds its private socket. service says the daemon
// runs as a systemd service (INVOCATION_ID is set); runtimeDir is XDG_RUNTIME_DIR.
//
//   - root in a service: the system manager;
//   - with XDG_RUNTIME_DIR: the user's own manager there (a user service, a login);
//   - any other user in a service: that user's own manager in /run/user/UID, where
//     systemd-logind makes it. This is the packaged system service, which runs as the
//     lingering user arizuko without XDG_RUNTIME_DIR: its units go to user@UID.service,
//     next to its rootless Podman, and run as arizuko. The system manager would refuse
//     them (polkit), and contrib/systemd/README.md says why no polkit rule should allow it;
//   - otherwise (a shell without a session): no runtime directory, so no manager.
func target(service bool, runtimeDir string, uid int) (Mode, string) {
	switch {
	case service && uid == 0:
		return ModeSystemdSystem, ""
	case runtimeDir != "":
		return ModeSystemdUser, runtimeDir
	case service:
		return ModeSystemdUser, filepath.Join("/run/user", strconv.Itoa(uid))
	}
	return ModeSystemdUser, ""
}

// detect is target for this process.
func detect() (Mode, string) {
	return target(os.Getenv("INVOCATION_ID") != "", os.Getenv("XDG_RUNTIME_DIR"), os.Geteuid())
}

// dial connects to the manager of mode; runtimeDir is a user manager's runtime directory.
// The connection lives until Close: it is not bound to ctx, which only bounds (with
// dialTimeout) the check that the manager answers.
func dial(ctx context.Context, mode Mode, runtimeDir string, getenv func(string) string) (*sddbus.Conn, error) {
	bg := context.WithoutCancel(ctx)
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var tried []string
	try := func(what string, connect func() (*sddbus.Conn, error)) *sddbus.Conn {
		c, err := connect()
		if err == nil {
			if _, err = c.SystemStateContext(ctx); err == nil {
				return c
			}
			c.Close()
		}
		tried = append(tried, fmt.Sprintf("%s: %v", what, err))
		return nil
	}
	switch mode {
	case ModeSystemdUser:
		if runtimeDir == "" {
			return nil, fmt.Errorf("%w: XDG_RUNTIME_DIR is not set and this is no service, so the user manager cannot be found", ErrNoSystemd)
		}
		private := filepath.Join(runtimeDir, "systemd", "private")
		if c := try(private, func() (*sddbus.Conn, error) { return directConn("unix:path="+private, false) }); c != nil {
			return c, nil
		}
		bus := getenv("DBUS_SESSION_BUS_ADDRESS")
		if bus == "" && exists(filepath.Join(runtimeDir, "bus")) {
			bus = "unix:path=" + filepath.Join(runtimeDir, "bus")
		}
		if bus != "" {
			if c := try("the session bus "+bus, func() (*sddbus.Conn, error) { return directConn(bus, true) }); c != nil {
				return c, nil
			}
		}
	case ModeSystemdSystem:
		if c := try("the system bus", func() (*sddbus.Conn, error) { return sddbus.NewSystemConnectionContext(bg) }); c != nil {
			return c, nil
		}
		if os.Geteuid() == 0 {
			if c := try("/run/systemd/private", func() (*sddbus.Conn, error) { return sddbus.NewSystemdConnectionContext(bg) }); c != nil {
				return c, nil
			}
		}
	default:
		return nil, fmt.Errorf("mode %q is not a systemd mode", mode)
	}
	return nil, fmt.Errorf("%w (%s): %s", ErrNoSystemd, mode, strings.Join(tried, "; "))
}

// directConn speaks to a manager at address: its private socket (no bus, no Hello) or a
// bus. It never falls back to anything the environment names.
func directConn(address string, bus bool) (*sddbus.Conn, error) {
	if path, ok := strings.CutPrefix(address, "unix:path="); ok && !exists(path) {
		return nil, fmt.Errorf("no socket %s", path)
	}
	return sddbus.NewConnection(func() (*dbus.Conn, error) {
		c, err := dbus.Dial(address)
		if err != nil {
			return nil, err
		}
		if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			c.Close()
			return nil, err
		}
		if bus {
			if err := c.Hello(); err != nil {
				c.Close()
				return nil, err
			}
		}
		return c, nil
	})
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// manager is a connection to one systemd manager, redialled when it drops.
type manager struct {
	mode       Mode
	runtimeDir string // a user manager's
	getenv     func(string) string

	mu   sync.Mutex
	conn *sddbus.Conn
}

func (s *manager) get(ctx context.Context) (*sddbus.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.Connected() {
		return s.conn, nil
	}
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	c, err := dial(ctx, s.mode, s.runtimeDir, s.getenv)
	if err != nil {
		return nil, err
	}
	s.conn = c
	return c, nil
}

func (s *manager) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// execCommand is one entry of ExecStart=, ExecStop=, ExecStopPost= on D-Bus: (sasb).
type execCommand struct {
	Path          string
	Args          []string
	IgnoreFailure bool
}

func execProperty(name string, argv []string, ignoreFailure bool) sddbus.Property {
	return sddbus.Property{Name: name, Value: dbus.MakeVariant([]execCommand{{Path: argv[0], Args: argv, IgnoreFailure: ignoreFailure}})}
}

func property(name string, v any) sddbus.Property {
	return sddbus.Property{Name: name, Value: dbus.MakeVariant(v)}
}

// startUnit starts a transient service and waits for its start job.
func (s *manager) startUnit(ctx context.Context, name string, props []sddbus.Property) error {
	c, err := s.get(ctx)
	if err != nil {
		return err
	}
	ch := make(chan string, 1)
	if _, err := c.StartTransientUnitContext(ctx, name, "fail", props, ch); err != nil {
		return fmt.Errorf("start transient unit %s: %w", name, err)
	}
	select {
	case r := <-ch:
		if r != "done" {
			return fmt.Errorf("start transient unit %s: job %s", name, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("start transient unit %s: %w", name, ctx.Err())
	}
}

// stopUnit stops a unit and waits for the stop job; a unit that is not loaded is stopped.
func (s *manager) stopUnit(ctx context.Context, name string) error {
	c, err := s.get(ctx)
	if err != nil {
		return err
	}
	ch := make(chan string, 1)
	if _, err := c.StopUnitContext(ctx, name, "replace", ch); err != nil {
		if noSuchUnit(err) {
			return nil
		}
		return fmt.Errorf("stop unit %s: %w", name, err)
	}
	select {
	case r := <-ch:
		if r != "done" {
			return fmt.Errorf("stop unit %s: job %s", name, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop unit %s: %w", name, ctx.Err())
	}
}

func noSuchUnit(err error) bool {
	var e dbus.Error
	return errors.As(err, &e) && e.Name == "org.freedesktop.systemd1.NoSuchUnit"
}

// accessDenied reports whether the manager refused a call for want of authorization,
// as the system manager does to users polkit does not allow to manage units.
func accessDenied(err error) bool {
	var e dbus.Error
	return errors.As(err, &e) && (e.Name == "org.freedesktop.DBus.Error.AccessDenied" || e.Name == "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired")
}

// unitState is the unit's ActiveState and Description; a unit the manager does not have
// (never started, or collected after it ended) is "gone".
func (s *manager) unitState(ctx context.Context, name string) (state, description string, err error) {
	c, err := s.get(ctx)
	if err != nil {
		return "", "", err
	}
	props, err := c.GetUnitPropertiesContext(ctx, name)
	if err != nil {
		return "", "", err
	}
	load, _ := props["LoadState"].(string)
	state, _ = props["ActiveState"].(string)
	description, _ = props["Description"].(string)
	if load != "loaded" {
		state = "gone"
	}
	return state, description, nil
}

// invocation is the unit's current InvocationID in hex, or "" when it has none.
func (s *manager) invocation(ctx context.Context, name string) string {
	c, err := s.get(ctx)
	if err != nil {
		return ""
	}
	p, err := c.GetUnitPropertyContext(ctx, name, "InvocationID")
	if err != nil {
		return ""
	}
	id, _ := p.Value.Value().([]byte)
	return hex.EncodeToString(id)
}

func (s *manager) listUnits(ctx context.Context, pattern string) ([]sddbus.UnitStatus, error) {
	c, err := s.get(ctx)
	if err != nil {
		return nil, err
	}
	return c.ListUnitsByPatternsContext(ctx, nil, []string{pattern})
}

// journalLines is how many lines of a failed unit's log go into the error.
const journalLines = 20

// rootJournal is the command that shows a unit's whole log to root. A system user's user
// units (arizuko's, in the packaged service) log to the system journal, which that user
// may not read.
func rootJournal(mode Mode, unit string) string {
	if mode == ModeSystemdUser {
		return "journalctl _SYSTEMD_USER_UNIT=" + unit
	}
	return "journalctl -u " + unit
}

// journalTail returns the last lines a unit logged: those of one invocation when its id
// is known, else the unit's since a time. journald may take a moment to write what a
// dying process said, so an empty answer is asked again for up to 2 s.
func journalTail(ctx context.Context, mode Mode, unit, invocation string, since time.Time) string {
	jc, err := exec.LookPath("journalctl")
	if err != nil {
		return "(no journalctl to read the unit's log)"
	}
	args := []string{"--no-pager", "-q", "-o", "cat", "-n", strconv.Itoa(journalLines)}
	switch {
	case invocation != "":
		args = append(args, "_SYSTEMD_INVOCATION_ID="+invocation)
	case mode == ModeSystemdUser:
		args = append(args, "--user-unit", unit, "--since", fmt.Sprintf("@%d", since.Unix()))
	default:
		args = append(args, "-u", unit, "--since", fmt.Sprintf("@%d", since.Unix()))
	}
	variants := [][]string{args}
	if os.Geteuid() != 0 && mode == ModeSystemdUser {
		variants = append(variants, append([]string{"--user"}, args...))
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		for _, a := range variants {
			jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			out, _ := exec.CommandContext(jctx, jc, a...).Output()
			cancel()
			if text := strings.TrimSpace(string(bytes.ToValidUTF8(out, []byte("?")))); text != "" {
				return text
			}
		}
		if time.Now().After(deadline) {
			return "(no log lines this user may read; all of them, as root: " + rootJournal(mode, unit) + ")"
		}
		time.Sleep(200 * time.Millisecond)
	}
}
