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

// scope is the manager arizukod runs under: the system's when it runs as a system service
// (INVOCATION_ID set, and uid 0 or no XDG_RUNTIME_DIR), else the user's.
func scope(getenv func(string) string, uid int) Mode {
	if getenv("INVOCATION_ID") != "" && (uid == 0 || getenv("XDG_RUNTIME_DIR") == "") {
		return ModeSystemdSystem
	}
	return ModeSystemdUser
}

// dial connects to the manager of mode. The connection lives until Close: it is not
// bound to ctx, which only bounds the check that the manager answers.
func dial(ctx context.Context, mode Mode, getenv func(string) string) (*sddbus.Conn, error) {
	bg := context.WithoutCancel(ctx)
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
		rt := getenv("XDG_RUNTIME_DIR")
		if rt == "" {
			return nil, fmt.Errorf("%w: XDG_RUNTIME_DIR is not set, so the user manager cannot be found", ErrNoSystemd)
		}
		private := filepath.Join(rt, "systemd", "private")
		if c := try(private, func() (*sddbus.Conn, error) { return privateConn(private) }); c != nil {
			return c, nil
		}
		if getenv("DBUS_SESSION_BUS_ADDRESS") != "" || exists(filepath.Join(rt, "bus")) {
			if c := try("the session bus", func() (*sddbus.Conn, error) { return sddbus.NewUserConnectionContext(bg) }); c != nil {
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

// privateConn speaks to a manager directly on its private socket, without a bus.
func privateConn(socket string) (*sddbus.Conn, error) {
	if !exists(socket) {
		return nil, fmt.Errorf("no socket %s", socket)
	}
	return sddbus.NewConnection(func() (*dbus.Conn, error) {
		c, err := dbus.Dial("unix:path=" + socket)
		if err != nil {
			return nil, err
		}
		if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			c.Close()
			return nil, err
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
	mode   Mode
	getenv func(string) string

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
	c, err := dial(ctx, s.mode, s.getenv)
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
			return "(the unit logged nothing)"
		}
		time.Sleep(200 * time.Millisecond)
	}
}
