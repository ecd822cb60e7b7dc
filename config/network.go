package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/arizuko/arizukod/runtime/engine"
)

// ErrNetwork matches (errors.Is) every network CheckNetwork refuses.
var ErrNetwork = errors.New("network not allowed")

// reservedNetworks are the engines' words for a network stack that is not the
// container's own, or that is a mode rather than a network: never a named network.
var reservedNetworks = []string{"host", "private", "default", "container", "ns", "slirp", engine.NetworkNone, engine.NetworkBridge, engine.NetworkSlirp4netns, engine.NetworkPasta}

// CheckNetwork is the one rule for the network of every container arizukod makes: the
// daemon's limits.network, a group's container_config.network, a sidecar's network, and
// the runner's last look before it asks the engine. It returns the network as the
// engines name it: "" is "none", "slirp" is "slirp4netns". Accepted are "none",
// "bridge", "slirp4netns" (or "slirp"), "pasta", and a named network listed in allowed
// (limits.allowed_networks). Everything else is refused with ErrNetwork: "host" and the
// namespace-sharing modes (container:ID, ns:PATH) would hand the agent a network stack
// that is not its own; any other name was not allowed by the operator.
func CheckNetwork(name string, allowed []string) (string, error) {
	switch name {
	case "", engine.NetworkNone:
		return engine.NetworkNone, nil
	case engine.NetworkBridge, engine.NetworkSlirp4netns, engine.NetworkPasta:
		return name, nil
	case "slirp":
		return engine.NetworkSlirp4netns, nil
	case "host":
		return "", fmt.Errorf("%w: \"host\" would give the agent the host's network; %s", ErrNetwork, networkHint)
	}
	if mode, _, shared := strings.Cut(name, ":"); shared && slices.Contains([]string{"container", "ns", "netns", "ns-path"}, mode) {
		return "", fmt.Errorf("%w: %q would share another network namespace with the agent; %s", ErrNetwork, clip(name), networkHint)
	}
	if err := checkNetworkName(name); err != nil {
		return "", fmt.Errorf("%w: %v; %s", ErrNetwork, err, networkHint)
	}
	if !slices.Contains(allowed, name) {
		return "", fmt.Errorf("%w: %q is not in limits.allowed_networks of the daemon's configuration (%s)", ErrNetwork, name, listOrNone(allowed))
	}
	return name, nil
}

const networkHint = `want "none", "bridge", "slirp4netns", "pasta" or a network in limits.allowed_networks`

// checkNetworkName accepts what an operator may list in limits.allowed_networks: a
// name both engines accept ([A-Za-z0-9][A-Za-z0-9_.-]*, at most 63 bytes) that is
// not one of the engines' reserved words.
func checkNetworkName(name string) error {
	if !isLabel(name) {
		return fmt.Errorf("%q: a network name is letters, digits, '_', '.', '-', starting with a letter or digit, at most 63", clip(name))
	}
	if slices.Contains(reservedNetworks, strings.ToLower(name)) {
		return fmt.Errorf("%q: an engine's reserved word, not a network name", name)
	}
	return nil
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "it lists none"
	}
	return "it lists " + strings.Join(names, ", ")
}

// clip shortens text quoted in an error.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:61] + "..."
}
