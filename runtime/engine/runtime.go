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

// CheckRuntime returns nil when the engine has runtime registered, or when it cannot say
// (Podman does not list its runtimes: its create refuses a runtime it lacks, and
// RuntimeFix explains that refusal). "" is the engine's default, always there.
func (i Info) CheckRuntime(runtime string) error {
	if runtime == "" || i.Runtimes == nil || slices.Contains(i.Runtimes, runtime) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrRuntimeMissing, i.RuntimeFix(runtime))
}

// RuntimeFix says, for a message, that the engine of i lacks OCI runtime runtime and what
// fixes it.
func (i Info) RuntimeFix(runtime string) string {
	name := i.String()
	if name == "" {
		name = "the engine"
	}
	var fix string
	switch i.Name {
	case "docker":
		fix = fmt.Sprintf(`register it in the daemon's daemon.json ("runtimes": {%q: {"path": ...}}) and reload dockerd (SIGHUP)`, runtime)
	default:
		conf := "/etc/containers/containers.conf"
		if i.Rootless {
			conf = "~/.config/containers/containers.conf"
		}
		fix = fmt.Sprintf("register it in %s under [engine.runtimes] (%s = [\"/path/to/%s\"]) and restart the Podman service", conf, runtime, runtime)
	}
	s := fmt.Sprintf("OCI runtime %q is not registered with %s: install it and %s", runtime, name, fix)
	if runtime == RuntimeRunsc {
		s += `; gVisor needs its own --network=none and --host-uds=all flags: register a wrapper that passes them (contrib/gvisor/runsc-arizuko) or, for Docker, runtimeArgs`
	}
	return s + `; or give the group another runtime (containerConfig.runtime, limits.runtime)`
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
