package engine

// Hardening is what every container arizukod creates gets, the agent's and the sidecars',
// whichever engine or unit renders it: the Podman and Docker adapters, the sidecars' units
// and command lines, and `arizukod quadlet`. Each reads it from Hardened, and each has a
// test that reads it back from what it renders.
type Hardening struct {
	// CapDrop are the capabilities dropped: all of them.
	CapDrop []string
	// NoNewPrivileges: no process gains privileges (setuid, file capabilities).
	NoNewPrivileges bool
	// ReadOnlyRoot: the root filesystem is read-only.
	ReadOnlyRoot bool
	// EngineTmpfs is whether the engine may add writable tmpfs mounts of its own on the
	// read-only root (Podman does by default); without it only the Spec's Tmpfs are writable.
	EngineTmpfs bool
	// Pull is the pull policy: never. A missing image is the operator's to import or build.
	Pull string
}

// PullNever is Hardening.Pull.
const PullNever = "never"

// CapAll is the capability set that names every capability.
const CapAll = "ALL"

// Hardened returns the hardening of every container (a fresh value each time, so that no
// rendering can change another's).
func Hardened() Hardening {
	return Hardening{CapDrop: []string{CapAll}, NoNewPrivileges: true, ReadOnlyRoot: true, EngineTmpfs: false, Pull: PullNever}
}
