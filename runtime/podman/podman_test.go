package podman

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/arizuko/arizukod/runtime/engine"
)

// TestNoLimits: which engine setups apply the memory, CPU and pids limits, as their Info
// reports them (the figures of the test host and of contrib/systemd/README.md).
func TestNoLimits(t *testing.T) {
	all := []string{"cpuset", "cpu", "cpuacct", "blkio", "memory", "devices", "freezer", "pids"}
	for _, tc := range []struct {
		name        string
		rootless    bool
		cgroups     string
		manager     string
		controllers []string
		want        string // a part of the reason; empty: the limits apply
	}{
		{"rootful v1 (podman4, podman5 here)", false, "v1", "cgroupfs", all, ""},
		{"rootful v2", false, "v2", "systemd", []string{"cpuset", "cpu", "io", "memory", "pids"}, ""},
		{"rootless v1 (podman-rootless here)", true, "v1", "cgroupfs", nil, "cgroups v1"},
		{"rootless v2 cgroupfs (no user manager)", true, "v2", "cgroupfs", []string{"memory", "pids", "cpu"}, "cgroupfs cgroup manager"},
		{"rootless v2 systemd, delegated", true, "v2", "systemd", []string{"memory", "pids", "cpu"}, ""},
		{"rootless v2 systemd, not delegated", true, "v2", "systemd", []string{"memory"}, "no cpu, pids controller"},
		{"rootful v2 without pids", false, "v2", "systemd", []string{"cpu", "memory"}, "no pids controller"},
	} {
		got := noLimits(tc.rootless, tc.cgroups, tc.manager, tc.controllers)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestNetworkGate: whatever a caller put in a Spec, Podman is never asked for the host's
// network or another namespace's. An allowed one gets past the gate to the (absent) engine,
// whose connection retries pass on a synctest bubble's fake clock.
func TestNetworkGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New("unix://" + filepath.Join(t.TempDir(), "none.sock"))
		for _, in := range []string{"", "none", "bridge", "slirp", "pasta", "any-name"} {
			if _, err := p.Create(context.Background(), engine.Spec{Image: "x", Network: in}); err == nil || errors.Is(err, engine.ErrCreate) {
				t.Errorf("%q: %v; want it past the gate, to the missing engine", in, err)
			}
		}
		for _, in := range []string{"host", "container:abc", "ns:/proc/1/ns/net", "private", "default", "a b"} {
			if _, err := p.Create(context.Background(), engine.Spec{Image: "x", Network: in}); !errors.Is(err, engine.ErrCreate) || !errors.Is(err, engine.ErrNetwork) {
				t.Errorf("%q: %v; want ErrCreate and ErrNetwork", in, err)
			}
		}
	})
}
