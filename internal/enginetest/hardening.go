package enginetest

import (
	"path/filepath"
	"strings"

	"github.com/arizuko/arizukod/quadlet"
	"github.com/arizuko/arizukod/runtime/engine"
)

// QuadletHardening reads back from a Quadlet unit the hardening its container gets, as
// Podman's generator turns it into podman run flags: for a test to compare with
// engine.Hardened.
func QuadletHardening(c *quadlet.Container) engine.Hardening {
	var h engine.Hardening
	for _, capability := range c.DropCapability {
		h.CapDrop = append(h.CapDrop, strings.ToUpper(capability))
	}
	h.NoNewPrivileges = c.NoNewPrivileges != nil && *c.NoNewPrivileges
	h.ReadOnlyRoot = c.ReadOnly != nil && *c.ReadOnly
	// Podman adds its tmpfs mounts to a read-only root unless told not to.
	h.EngineTmpfs = c.ReadOnlyTmpfs == nil || *c.ReadOnlyTmpfs
	h.Pull = c.Pull
	return h
}

// ArgvHardening reads back from a `podman run` or `docker run` command line (argv[0] the
// CLI) the hardening its container gets: for a test to compare with engine.Hardened.
func ArgvHardening(argv []string) engine.Hardening {
	var h engine.Hardening
	// Podman adds its tmpfs mounts to a read-only root unless told not to; Docker never.
	h.EngineTmpfs = !strings.Contains(filepath.Base(argv[0]), "docker")
	for i := 1; i < len(argv); i++ {
		flag, value, inline := strings.Cut(argv[i], "=")
		next := func() string {
			if inline {
				return value
			}
			if i+1 < len(argv) {
				i++
				return argv[i]
			}
			return ""
		}
		switch flag {
		case "--cap-drop":
			h.CapDrop = append(h.CapDrop, strings.ToUpper(next()))
		case "--security-opt":
			if next() == "no-new-privileges" {
				h.NoNewPrivileges = true
			}
		case "--read-only":
			h.ReadOnlyRoot = !inline || value == "true"
		case "--read-only-tmpfs":
			h.EngineTmpfs = !inline || value == "true"
		case "--pull":
			h.Pull = next()
		}
	}
	return h
}
