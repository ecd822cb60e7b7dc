package runtime

import (
	"errors"
	"strings"
	"testing"
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
		got := podmanNoLimits(tc.rootless, tc.cgroups, tc.manager, tc.controllers)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := dockerNoLimits(true, true, true, "cgroupfs"); got != "" {
		t.Errorf("docker with every limit: %q", got)
	}
	if got := dockerNoLimits(false, true, false, "systemd"); !strings.Contains(got, "no memory, pids limit support") {
		t.Errorf("docker without memory and pids: %q", got)
	}
	if got := dockerNoLimits(false, false, false, "none"); !strings.Contains(got, "without a cgroup driver") {
		t.Errorf("rootless docker on v1: %q", got)
	}
}

func TestCheckLimits(t *testing.T) {
	applied := Info{Name: "podman", Version: "4.3.1"}
	if err := applied.CheckLimits(false); err != nil {
		t.Errorf("limits applied: %v", err)
	}
	none := Info{Name: "podman", Version: "4.3.1", Rootless: true, NoLimits: podmanNoLimits(true, "v1", "cgroupfs", nil)}
	err := none.CheckLimits(false)
	if !errors.Is(err, ErrNoLimits) {
		t.Fatalf("no limits, no opt-out: %v", err)
	}
	for _, part := range []string{"podman 4.3.1 (rootless)", "cgroups v1", "allow_unlimited = true"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("%q does not say %q", err, part)
		}
	}
	if err := none.CheckLimits(true); err != nil {
		t.Errorf("no limits, opted out: %v", err)
	}
}

// TestEngineNetworks: the modes each engine of the test host has, and the answer for the
// ones it lacks.
func TestEngineNetworks(t *testing.T) {
	podman4 := Info{Name: "podman", Version: "4.3.1", Networks: []string{"bridge", "slirp4netns"}}
	podman5 := Info{Name: "podman", Version: "5.4.2", Networks: []string{"bridge"}}
	docker := Info{Name: "docker", Version: "20.10.24", Networks: []string{"bridge"}}
	for _, tc := range []struct {
		info    Info
		network string
		want    string // a part of the error; empty: allowed
	}{
		{podman4, "none", ""},
		{podman4, "bridge", ""},
		{podman4, "slirp4netns", ""},
		{podman4, "agents", ""},
		{podman4, "pasta", "podman 4.3.1 has no pasta network: pasta needs Podman 4.4"},
		{podman5, "slirp4netns", "podman 5.4.2 has no slirp4netns network: install slirp4netns"},
		{podman5, "pasta", "podman 5.4.2 has no pasta network"},
		{docker, "bridge", ""},
		{docker, "slirp4netns", "docker 20.10.24 has no slirp4netns network: slirp4netns and pasta are Podman's"},
		{docker, "pasta", "docker 20.10.24 has no pasta network"},
		{Info{}, "pasta", ""},
	} {
		err := tc.info.CheckNetwork(tc.network)
		if (err == nil) != (tc.want == "") || err != nil && (!errors.Is(err, ErrNetworkMode) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %s: %v, want %q", tc.info, tc.network, err, tc.want)
		}
	}
}

// TestEngineNetworkGate: whatever a caller put in a Spec, no engine is asked for the
// host's network or another namespace's.
func TestEngineNetworkGate(t *testing.T) {
	for in, want := range map[string]string{"": "none", "none": "none", "bridge": "bridge", "slirp": "slirp4netns", "pasta": "pasta", "any-name": "any-name"} {
		if got, err := engineNetwork(Spec{Network: in}); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"host", "container:abc", "ns:/proc/1/ns/net", "private", "default", "a b"} {
		if got, err := engineNetwork(Spec{Network: in}); !errors.Is(err, ErrCreate) {
			t.Errorf("%q: %q, %v; want ErrCreate", in, got, err)
		}
	}
}
