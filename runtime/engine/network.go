package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrNetwork matches (errors.Is) every network CheckNetwork refuses.
var ErrNetwork = errors.New("network not allowed")

// reservedNetworks are the engines' words for a network stack that is not the
// container's own, or that is a mode rather than a network: never a named network.
var reservedNetworks = []string{"host", "private", "default", "container", "ns", "slirp", NetworkNone, NetworkBridge, NetworkSlirp4netns, NetworkPasta}

// CheckNetwork is the one rule for the network of every container arizukod makes: the
// daemon's limits.network, a group's containerConfig.network, a sidecar's network, and
// the runner's last look before it asks the engine. It returns the network as the
// engines name it: "" is "none", "slirp" is "slirp4netns". Accepted are "none",
// "bridge", "slirp4netns" (or "slirp"), "pasta", and a named network listed in allowed
// (limits.allowed_networks). Everything else is refused with ErrNetwork: "host" and the
// namespace-sharing modes (container:ID, ns:PATH) would hand the agent a network stack
// that is not its own; any other name was not allowed by the operator.
func CheckNetwork(name string, allowed []string) (string, error) {
	switch name {
	case "", NetworkNone:
		return NetworkNone, nil
	case NetworkBridge, NetworkSlirp4netns, NetworkPasta:
		return name, nil
	case "slirp":
		return NetworkSlirp4netns, nil
	case "host":
		return "", fmt.Errorf("%w: \"host\" would give the agent the host's network; %s", ErrNetwork, networkHint)
	}
	if mode, _, shared := strings.Cut(name, ":"); shared && slices.Contains([]string{"container", "ns", "netns", "ns-path"}, mode) {
		return "", fmt.Errorf("%w: %q would share another network namespace with the agent; %s", ErrNetwork, clip(name), networkHint)
	}
	if err := CheckNetworkName(name); err != nil {
		return "", fmt.Errorf("%w: %v; %s", ErrNetwork, err, networkHint)
	}
	if !slices.Contains(allowed, name) {
		return "", fmt.Errorf("%w: %q is not in limits.allowed_networks of the daemon's configuration (%s)", ErrNetwork, name, listOrNone(allowed))
	}
	return name, nil
}

const networkHint = `want "none", "bridge", "slirp4netns", "pasta" or a network in limits.allowed_networks`

// CheckNetworkName accepts what an operator may list in limits.allowed_networks: a
// name both engines accept ([A-Za-z0-9][A-Za-z0-9_.-]*, at most 63 bytes) that is
// not one of the engines' reserved words.
func CheckNetworkName(name string) error {
	if !ValidName(name) {
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

// ValidName reports whether s is a name both engines accept for a network or as a label
// value: letters, digits, '_', '.', '-', starting with a letter or digit, at most 63 bytes.
func ValidName(s string) bool {
	if s == "" || len(s) > 63 || !isAlnum(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && !strings.ContainsRune("_.-", rune(s[i])) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// clip shortens text quoted in an error.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:61] + "..."
}
