package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/arizuko/arizukod/config"
)

// Errors of the checks before an engine is asked to create a container.
var (
	// ErrNoLimits: the engine cannot apply memory, CPU and pids limits, and the operator
	// did not allow turns without them.
	ErrNoLimits = errors.New("resource limits cannot be applied")
	// ErrNetworkMode: the engine has no such network mode.
	ErrNetworkMode = errors.New("network mode not available")
)

// admit is the runner's last look at a turn's spec before the engine is asked: whatever
// the store held, the network passes config.CheckNetwork with the operator's list and is
// one the engine has, and the limits hold unless the operator allowed turns without them.
// It sets the network as the engines name it.
func (r *Runner) admit(s *Spec) error {
	network, err := config.CheckNetwork(s.Network, r.cfg.Networks)
	if err != nil {
		return err
	}
	info := r.info()
	if err := info.CheckNetwork(network); err != nil {
		return err
	}
	if err := info.CheckLimits(r.cfg.AllowUnlimited); err != nil {
		return err
	}
	s.Network = network
	return nil
}

// limitControllers are the cgroup controllers a container's limits need.
var limitControllers = []string{"memory", "cpu", "pids"}

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

// CheckNetwork returns nil when the engine has network, as config.CheckNetwork returns
// it: none and named networks always (the engine refuses a name it does not know when
// the container is created), bridge, slirp4netns and pasta when Networks lists them.
// An engine not yet known (no Name) is not checked.
func (i Info) CheckNetwork(network string) error {
	switch network {
	case config.NetworkBridge, config.NetworkSlirp4netns, config.NetworkPasta:
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
	case network == config.NetworkPasta:
		hint = "pasta needs Podman 4.4 or later with passt installed on the engine's host"
	case network == config.NetworkSlirp4netns:
		hint = "install slirp4netns on the engine's host"
	default:
		hint = "use none or a network in limits.allowed_networks"
	}
	return fmt.Errorf("%w: %s has no %s network: %s", ErrNetworkMode, i, network, hint)
}

// podmanNoLimits says why Podman cannot apply the limits, "" when it can. Rootless Podman
// on cgroups v1 drops them with a warning; with the cgroupfs manager on cgroups v2 it
// accepts them and applies none (contrib/systemd/README.md); without a delegated
// controller the kernel has nothing to apply them with.
func podmanNoLimits(rootless bool, cgroups, manager string, controllers []string) string {
	switch {
	case rootless && cgroups == "v1":
		return "rootless Podman cannot set them on cgroups v1, where no controller is delegated to a user; boot with cgroups v2 and run Podman under the user's systemd manager (cgroup_manager = \"systemd\", a lingering user), or use a rootful engine"
	case rootless && manager != "systemd":
		return fmt.Sprintf("rootless Podman with the %s cgroup manager creates no cgroup it may write and applies none of them; run it with cgroup_manager = \"systemd\" under the user's systemd manager (a lingering user, Delegate=memory cpu pids)", manager)
	}
	if missing := missingControllers(controllers); len(missing) > 0 {
		return fmt.Sprintf("the engine's cgroup has no %s controller; delegate them to it (systemd: Delegate=memory cpu pids)", strings.Join(missing, ", "))
	}
	return ""
}

func missingControllers(have []string) []string {
	var missing []string
	for _, c := range limitControllers {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	return missing
}

// dockerNoLimits says why Docker cannot apply the limits, "" when it can, from the
// kernel features its Info reports.
func dockerNoLimits(memory, cpu, pids bool, driver string) string {
	var missing []string
	for _, f := range []struct {
		name string
		ok   bool
	}{{"memory", memory}, {"cpu", cpu}, {"pids", pids}} {
		if !f.ok {
			missing = append(missing, f.name)
		}
	}
	switch {
	case driver == "none":
		return "Docker runs without a cgroup driver (rootless Docker on cgroups v1): it applies none of them; boot with cgroups v2 and delegate memory, cpu and pids to the user (systemd: Delegate=yes), or use a rootful engine"
	case len(missing) > 0:
		return fmt.Sprintf("Docker reports no %s limit support; enable the %s cgroup controller for it (for rootless Docker: cgroups v2 with Delegate=yes)", strings.Join(missing, ", "), strings.Join(missing, ", "))
	}
	return ""
}

// engineNetwork is the last gate before an engine: whoever built the spec, the container
// never gets the host's network or another namespace's. Named networks are the caller's
// policy (config.CheckNetwork with limits.allowed_networks); here any name passes.
func engineNetwork(s Spec) (string, error) {
	n, err := config.CheckNetwork(s.Network, []string{s.Network})
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCreate, err)
	}
	return n, nil
}
