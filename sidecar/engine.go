package sidecar

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/session"
)

// engineLogMax caps the engine's log of a sidecar run on the engine.
const engineLogMax = 16 << 20

// Spec is the container the engine runs when no systemd manager does: the same
// container as the unit's, with the config's env in it (the API carries it, no command
// line). engine.Spec has no command, entrypoint or the like, so a sidecar that sets
// one is ErrUnsupported here, naming the key.
func (u *Unit) Spec() (engine.Spec, error) {
	c := u.Container
	var set []string
	for _, k := range []struct {
		key string
		set bool
	}{
		{"command (Exec)", len(c.Exec) > 0}, {"Entrypoint", c.Entrypoint != ""}, {"HostName", c.HostName != ""},
		{"RunInit", isTrue(c.RunInit)}, {"StopSignal", c.StopSignal != ""}, {"StopTimeout", c.StopTimeout != ""},
		{"ShmSize", c.ShmSize != ""}, {"Annotation", len(c.Annotation) > 0}, {"Timezone", c.Timezone != ""},
	} {
		if k.set {
			set = append(set, k.key)
		}
	}
	if len(set) > 0 {
		return engine.Spec{}, fmt.Errorf("sidecar %s: %s: %w (sidecars run directly on the engine here, without systemd)", u.Name, strings.Join(set, ", "), ErrUnsupported)
	}
	env := maps.Clone(c.Environment)
	maps.Copy(env, u.Env)
	s := engine.Spec{
		Name:        c.ContainerName,
		Image:       c.Image,
		Labels:      maps.Clone(c.Label),
		Mounts:      []engine.Mount{{Source: u.SocketDir, Target: session.SidecarSocketDir, Origin: "ipc"}},
		Network:     c.Network[0],
		MemoryBytes: u.MemoryBytes,
		NanoCPUs:    u.NanoCPUs,
		PidsLimit:   u.PidsLimit,
		Runtime:     u.Runtime,
		Rlimits:     u.Rlimits,
		User:        c.User,
		WorkingDir:  c.WorkingDir,
		LogMaxBytes: engineLogMax,
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		s.Env = append(s.Env, k+"="+env[k])
	}
	for _, t := range c.Tmpfs {
		target, opts, _ := strings.Cut(t, ":")
		s.Tmpfs = append(s.Tmpfs, engine.Tmpfs{Target: target, Options: opts})
	}
	return s, nil
}
