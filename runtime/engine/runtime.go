package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The OCI runtimes arizukod knows by name. Any name the operator lists in
// limits.allowed_runtimes is accepted; these are the ones the messages name.
const (
	RuntimeRunc  = "runc"
	RuntimeCrun  = "crun"
	RuntimeRunsc = "runsc" // gVisor
)

var (
	// ErrRuntime matches (errors.Is) every OCI runtime CheckRuntime refuses: not a name,
	// or not one the operator allowed.
	ErrRuntime = errors.New("OCI runtime not allowed")
	// ErrRuntimeMissing: the engine has no such OCI runtime registered.
	ErrRuntimeMissing = errors.New("OCI runtime not available")
)

// CheckRuntime is the one rule for the OCI runtime of every container arizukod makes: the
// daemon's limits.runtime, a group's containerConfig.runtime, and the runner's last look
// before it asks the engine. "" is the engine's own default (runc or crun, as the engine
// is configured) and always allowed; any other name must be listed in allowed
// (limits.allowed_runtimes).
func CheckRuntime(name string, allowed []string) error {
	if name == "" {
		return nil
	}
	if err := CheckRuntimeName(name); err != nil {
		return fmt.Errorf("%w: %v", ErrRuntime, err)
	}
	if !slices.Contains(allowed, name) {
		return fmt.Errorf("%w: %q is not in limits.allowed_runtimes of the daemon's configuration (%s); the operator lists the runtimes groups may name there, e.g. allowed_runtimes = [\"runc\", \"runsc\"]",
			ErrRuntime, name, listOrNone(allowed))
	}
	return nil
}

// CheckRuntimeName accepts what an operator may list in limits.allowed_runtimes: the name
// under which the engine has the runtime registered (Podman's [engine.runtimes] of
// containers.conf, Docker's "runtimes" of daemon.json), never a path.
func CheckRuntimeName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("%q: an OCI runtime's name as the engine registers it (letters, digits, '_', '.', '-', at most 63, not a path), such as runc, crun or runsc", clip(name))
	}
	return nil
}

// CheckRuntime returns nil when a container of the engine can run under runtime: one
// registered with Docker, Podman's service's own. "" is the engine's default, always
// there. An engine that has not said which runtimes it has (no Runtimes) is refused any
// other: a turn that asked for gVisor never runs under another runtime.
func (i Info) CheckRuntime(runtime string) error {
	if runtime == "" || slices.Contains(i.Runtimes, runtime) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrRuntimeMissing, i.RuntimeFix(runtime))
}

// RuntimeFix says, for a message, that the engine of i cannot run a container under
// runtime, and what fixes it.
func (i Info) RuntimeFix(runtime string) string {
	name := i.String()
	if name == "" {
		name = "the engine"
	}
	gvisor := ""
	if runtime == RuntimeRunsc {
		gvisor = "; gVisor needs its own --network=none and --host-uds=all flags"
	}
	var s string
	switch {
	case i.Name == "docker":
		s = fmt.Sprintf(`OCI runtime %q is not registered with %s: install it and register it in the daemon's daemon.json ("runtimes": {%q: {"path": ..., "runtimeArgs": [...]}}), then reload dockerd (SIGHUP)%s`, runtime, name, runtime, gvisor)
	case i.RuntimePerService:
		conf := "/etc/containers/containers.conf"
		if i.Rootless {
			conf = "~/.config/containers/containers.conf"
		}
		if gvisor != "" {
			gvisor = "; gVisor through a wrapper that passes it --network=none and --host-uds=all (contrib/gvisor/runsc-arizuko)"
		}
		s = fmt.Sprintf("%s runs every container under its service's OCI runtime (%s), not %q: Podman's API has no runtime per container. Run arizukod on a Podman service whose %s says runtime = %q under [engine], with %s registered under [engine.runtimes]%s; every group on that engine then runs under it",
			name, strings.Join(i.Runtimes, ", "), runtime, conf, runtime, runtime, gvisor)
	default:
		s = fmt.Sprintf("%s has not said which OCI runtimes it has, so %q is not known to be there: install it and register it with the engine%s", name, runtime, gvisor)
	}
	return s + "; or give the group another runtime (containerConfig.runtime, limits.runtime)"
}

// runtimeRefused says whether an engine's create error refuses the OCI runtime (Podman:
// `default OCI runtime "x" not found`; Docker: `Unknown runtime specified x`).
func runtimeRefused(msg string) bool {
	return strings.Contains(msg, "OCI runtime") || strings.Contains(msg, "nknown runtime")
}

// CreateError is err, the engine's refusal to create a container of s, with what fixes it
// when it refuses s's OCI runtime: then it matches ErrRuntimeMissing too.
func (i Info) CreateError(s Spec, err error) error {
	if s.Runtime == "" || !runtimeRefused(err.Error()) {
		return err
	}
	return fmt.Errorf("%w (%w: %s)", err, ErrRuntimeMissing, i.RuntimeFix(s.Runtime))
}
