package docker

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/runtime/engine"
)

// TestNoLimits: the reasons Docker cannot apply the limits, from what its Info reports.
func TestNoLimits(t *testing.T) {
	if got := noLimits(true, true, true, "cgroupfs"); got != "" {
		t.Errorf("docker with every limit: %q", got)
	}
	if got := noLimits(false, true, false, "systemd"); !strings.Contains(got, "no memory, pids limit support") {
		t.Errorf("docker without memory and pids: %q", got)
	}
	if got := noLimits(false, false, false, "none"); !strings.Contains(got, "without a cgroup driver") {
		t.Errorf("rootless docker on v1: %q", got)
	}
}

// TestNetworkGate: whatever a caller put in a Spec, Docker is never asked for the host's
// network or another namespace's. An allowed one gets past the gate to the (absent) engine.
func TestNetworkGate(t *testing.T) {
	p, err := New("unix://" + filepath.Join(t.TempDir(), "none.sock"))
	if err != nil {
		t.Fatal(err)
	}
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
}
