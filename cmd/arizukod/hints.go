package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/runtime/engine"
)

// host is what the hints depend on: whether systemd runs this machine (PID 1) or at least
// a user manager of this user, and which service this user would talk to.
type host struct {
	systemd     bool // systemd is PID 1
	userManager bool // a systemd user manager of this user answers
	mode        config.Mode
	// demoSocket is the private Podman service hack/demo.sh starts where systemd is not PID 1,
	// when its socket exists.
	demoSocket string
}

// demoDir is where hack/demo.sh keeps its private Podman service ($ARIZUKO_DEMO_DIR there).
const demoDir = "/var/tmp/arizuko-demo"

// probeHost looks at this machine; tests replace it.
var probeHost = func() host {
	h := host{mode: serviceMode()}
	if b, err := os.ReadFile("/proc/1/comm"); err == nil {
		h.systemd = strings.TrimSpace(string(b)) == "systemd"
	}
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
		_, err := os.Stat(filepath.Join(rt, "systemd", "private"))
		h.userManager = err == nil
	}
	if fi, err := os.Stat(filepath.Join(demoDir, "podman.sock")); err == nil && fi.Mode()&os.ModeSocket != 0 {
		h.demoSocket = "unix://" + filepath.Join(demoDir, "podman.sock")
	}
	return h
}

// systemctl is the systemctl command of this host's service mode, "" where no systemd
// manager can start units for it.
func (h host) systemctl() string {
	switch {
	case h.mode == config.ModeUser && h.userManager:
		return "systemctl --user"
	case h.mode == config.ModeSystem && h.systemd:
		return "systemctl"
	}
	return ""
}

// engineFix is what makes a container engine answer here.
func (h host) engineFix() string {
	if sc := h.systemctl(); sc != "" {
		if h.mode == config.ModeUser {
			return sc + " enable --now podman.socket   (rootful: sudo systemctl enable --now podman.socket)"
		}
		return sc + " enable --now podman.socket   (the package's own rootless Podman: systemctl enable --now arizuko-podman.socket)"
	}
	if h.demoSocket != "" {
		return "no systemd here to start podman.socket; hack/demo.sh's private Podman service listens at " + h.demoSocket +
			": export CONTAINER_HOST=" + h.demoSocket + " (every arizukod command and arizukod serve look there; or --engine-socket, engine_socket in arizukod.toml)"
	}
	return "no systemd here to start podman.socket: run hack/demo.sh, which starts a private Podman service at unix://" +
		demoDir + "/podman.sock, or start one yourself (podman system service --time=0 unix:///PATH/podman.sock &), then " +
		"export CONTAINER_HOST=unix:///PATH/podman.sock (every arizukod command and arizukod serve look there; or --engine-socket, engine_socket in arizukod.toml)"
}

// explain says what to do about an error a command ended with, or "" when the error says it
// itself: no engine answered (run --local, image), no daemon at the socket, or a socket this
// user may not open.
func explain(err error) string {
	if errors.Is(err, engine.ErrNoEngine) {
		return "fix: " + probeHost().engineFix()
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return ""
	}
	switch {
	case errors.Is(err, syscall.EACCES):
		return "this user may not open the daemon's socket: join the group allowed on it (allow_group in arizukod.toml; " +
			"the package's group is arizuko), or run the command as the daemon's user"
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
	default:
		return ""
	}
	h := probeHost()
	var b strings.Builder
	b.WriteString("no arizukod answers there. Either\n")
	if sc := h.systemctl(); sc != "" {
		fmt.Fprintf(&b, "  start the service:            %s start arizukod.socket\n", sc)
	}
	b.WriteString("  run the daemon in a terminal: arizukod serve\n")
	b.WriteString("  run a turn without a daemon:  arizukod run --local --folder F --message TEXT\n")
	b.WriteString("  or name another daemon's socket with --socket PATH")
	return b.String()
}
