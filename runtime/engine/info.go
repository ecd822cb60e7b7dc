package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Errors of the checks before an engine is asked to create a container.
var (
	// ErrNoLimits: the engine cannot apply memory, CPU and pids limits, and the operator
	// did not allow turns without them.
	ErrNoLimits = errors.New("resource limits cannot be applied")
	// ErrNetworkMode: the engine has no such network mode.
	ErrNetworkMode = errors.New("network mode not available")
)

// String names the engine for a message: "podman 4.3.1 (rootless)".
func (i Info) String() string {
	s := strings.TrimSpace(i.Name + " " + i.Version)
	if i.Rootless {
		s += " (rootless)"
	}
	return s
}

// CheckLimits returns nil when the engine applies the memory, CPU and pids limits, or
// allowUnlimited says to run without them; otherwise ErrNoLimits saying why and what
// fixes it.
func (i Info) CheckLimits(allowUnlimited bool) error {
	if i.NoLimits == "" || allowUnlimited {
		return nil
	}
	return fmt.Errorf("%w on %s: %s; or set allow_unlimited = true in [limits] of arizukod.toml to run turns without them", ErrNoLimits, i, i.NoLimits)
}

// CheckNetwork returns nil when the engine has network, as CheckNetwork returns
// it: none and named networks always (the engine refuses a name it does not know when
// the container is created), bridge, slirp4netns and pasta when Networks lists them.
// An engine not yet known (no Name) is not checked.
func (i Info) CheckNetwork(network string) error {
	switch network {
	case NetworkBridge, NetworkSlirp4netns, NetworkPasta:
	default:
		return nil
	}
	if i.Name == "" || slices.Contains(i.Networks, network) {
		return nil
	}
	var hint string
	switch {
	case i.Name == "docker":
		hint = "slirp4netns and pasta are Podman's; use none, bridge or a network in limits.allowed_networks"
	case network == NetworkPasta:
		hint = "pasta needs Podman 4.4 or later with passt installed on the engine's host"
	case network == NetworkSlirp4netns:
		hint = "install slirp4netns on the engine's host"
	default:
		hint = "use none or a network in limits.allowed_networks"
	}
	return fmt.Errorf("%w: %s has no %s network: %s", ErrNetworkMode, i, network, hint)
}
