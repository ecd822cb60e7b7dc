package sidecar

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/arizuko/arizukod/runtime/engine"
)

// ErrBadConfig is wrapped by every error about a sidecar's configuration.
var ErrBadConfig = errors.New("bad sidecar config")

// Limits of a sidecar's configuration.
const (
	MaxNameLen     = 32
	MaxSidecars    = 16
	MaxQuadletSize = 64 << 10
	maxImageLen    = 512
	maxArgs        = 256
	maxArgLen      = 8 << 10
	maxEnv         = 256
	maxEnvValueLen = 32 << 10
)

// Config is one sidecar in a group's container config (JSON, under "sidecars"). Either
// the fields describe it, or Quadlet holds the text of a Podman Quadlet .container unit
// (then Name is the only other field). Whatever the source, the container gets the
// hardening of an agent container; see NewUnit.
type Config struct {
	// Name names the sidecar's socket, its mcpServers entry and its unit:
	// [a-z0-9][a-z0-9_]{0,31}. No '-', so that arizuko-sc-<instance tag>-<folder slug>-<name>
	// names one sidecar of one folder only (folder slugs join segments with '-').
	Name    string            `json:"name"`
	Image   string            `json:"image,omitempty"`
	Command []string          `json:"command,omitempty"` // arguments after the image's entrypoint
	Env     map[string]string `json:"env,omitempty"`
	Memory  string            `json:"memory,omitempty"` // like "256m"; default DefaultMemory
	CPUs    float64           `json:"cpus,omitempty"`   // default DefaultCPUs
	// Network is the sidecar's network, by the rule of engine.CheckNetwork: "none" (the
	// default), bridge, slirp4netns, pasta, or a network of limits.allowed_networks.
	Network string `json:"network,omitempty"`
	Quadlet string `json:"quadlet,omitempty"`
}

// Validate checks the sidecars of one group: each Config, and names used once. networks
// are the named networks the operator allowed (limits.allowed_networks).
func Validate(cs []Config, networks []string) error {
	if len(cs) > MaxSidecars {
		return fmt.Errorf("%w: %d sidecars, at most %d", ErrBadConfig, len(cs), MaxSidecars)
	}
	seen := map[string]bool{}
	for i, c := range cs {
		if err := c.Validate(networks); err != nil {
			return fmt.Errorf("sidecars[%d]: %w", i, err)
		}
		if seen[c.Name] {
			return fmt.Errorf("sidecars[%d]: %w: name %q is used twice", i, ErrBadConfig, c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

// Names returns the sidecars' names in order: what session.Options.Sidecars wants.
func Names(cs []Config) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// Validate checks one sidecar, including its Quadlet unit when it has one; networks as
// for Validate.
func (c Config) Validate(networks []string) error {
	_, err := c.source(networks)
	return err
}

// source reads the sidecar as its config describes it.
func (c Config) source(networks []string) (*source, error) {
	if err := checkName(c.Name); err != nil {
		return nil, err
	}
	if c.Quadlet != "" {
		var set []string
		for _, f := range []struct {
			name string
			set  bool
		}{{"image", c.Image != ""}, {"command", len(c.Command) > 0}, {"env", len(c.Env) > 0},
			{"memory", c.Memory != ""}, {"cpus", c.CPUs != 0}, {"network", c.Network != ""}} {
			if f.set {
				set = append(set, f.name)
			}
		}
		if len(set) > 0 {
			return nil, fmt.Errorf("%w: sidecar %s: quadlet replaces the fields; remove %s", ErrBadConfig, c.Name, strings.Join(set, ", "))
		}
		return fromQuadlet(c, networks)
	}
	return fromFields(c, networks)
}

func checkName(n string) error {
	if n == "" || len(n) > MaxNameLen {
		return fmt.Errorf("%w: name %q: must be 1-%d bytes", ErrBadConfig, clip(n), MaxNameLen)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && c == '_') {
			return fmt.Errorf("%w: name %q: names are [a-z0-9][a-z0-9_]*", ErrBadConfig, clip(n))
		}
	}
	return nil
}

// checkImage refuses what would not be one image reference on a command line.
func checkImage(image string) error {
	switch {
	case image == "":
		return errors.New("image: required")
	case len(image) > maxImageLen:
		return fmt.Errorf("image: longer than %d bytes", maxImageLen)
	case strings.HasPrefix(image, "-"):
		return fmt.Errorf("image %q: starts with '-'", clip(image))
	}
	for _, r := range image {
		if r <= ' ' || r == 0x7f || r >= utf8.RuneSelf {
			return fmt.Errorf("image %q: only printable ASCII without spaces", clip(image))
		}
	}
	return nil
}

func checkArgs(args []string) error {
	if len(args) > maxArgs {
		return fmt.Errorf("command: more than %d arguments", maxArgs)
	}
	for i, a := range args {
		if len(a) > maxArgLen || strings.IndexByte(a, 0) >= 0 || !utf8.ValidString(a) {
			return fmt.Errorf("command[%d]: must be UTF-8 without NUL bytes, at most %d bytes", i, maxArgLen)
		}
	}
	return nil
}

// checkEnv accepts names [A-Za-z_][A-Za-z0-9_]* outside the ARIZUKO_ prefix, with UTF-8
// values that fit on one line of an env file.
func checkEnv(env map[string]string) error {
	if len(env) > maxEnv {
		return fmt.Errorf("env: more than %d variables", maxEnv)
	}
	for k, v := range env {
		if k == "" {
			return errors.New("env: empty name")
		}
		for i := 0; i < len(k); i++ {
			c := k[i]
			if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
				return fmt.Errorf("env %q: names are [A-Za-z_][A-Za-z0-9_]*", clip(k))
			}
		}
		if strings.HasPrefix(k, "ARIZUKO_") {
			return fmt.Errorf("env %s: the ARIZUKO_ prefix is arizukod's", k)
		}
		if len(v) > maxEnvValueLen || strings.ContainsAny(v, "\x00\n\r") || !utf8.ValidString(v) {
			return fmt.Errorf("env %s: the value must be one line of UTF-8, at most %d bytes", k, maxEnvValueLen)
		}
	}
	return nil
}

// checkNetwork is engine.CheckNetwork: never the host's network or another
// container's, which would undo the isolation, and only the named networks the operator
// allowed.
func checkNetwork(n string, networks []string) (string, error) {
	network, err := engine.CheckNetwork(n, networks)
	if err != nil {
		return "", fmt.Errorf("network: %w", err)
	}
	return network, nil
}

func parseMemory(s string) (int64, error) {
	if s == "" {
		return DefaultMemory, nil
	}
	m, err := engine.ParseMemory(s)
	if err != nil {
		return 0, fmt.Errorf("memory: %w", err)
	}
	return m, nil
}

func nanoCPUs(cpus float64) (int64, error) {
	switch {
	case cpus == 0:
		return DefaultNanoCPUs, nil
	case cpus < 0.01 || cpus > 1024:
		return 0, fmt.Errorf("cpus: %v is out of range (0.01 to 1024)", cpus)
	}
	return int64(cpus*1e9+0.5) / 1e7 * 1e7, nil
}

// clip shortens text quoted in an error.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:61] + "..."
}
