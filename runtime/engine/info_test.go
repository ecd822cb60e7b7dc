package engine

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckLimits(t *testing.T) {
	applied := Info{Name: "podman", Version: "4.3.1"}
	if err := applied.CheckLimits(false); err != nil {
		t.Errorf("limits applied: %v", err)
	}
	none := Info{Name: "podman", Version: "4.3.1", Rootless: true, NoLimits: "rootless Podman cannot set them on cgroups v1"}
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
