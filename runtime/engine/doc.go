// Package engine is what arizukod knows of a container engine: the Engine interface its
// adapters (runtime/podman, runtime/docker) implement, the Spec of a container with its
// mounts and limits, the labels that mark arizukod's containers, the network modes, the
// OCI runtime rule (CheckRuntime, and what an engine can give: Info.CheckRuntime), and the
// errors callers branch on.
//
// Hardening is not a caller's option: a Spec has no field for capabilities, privileges or
// a writable root, and every Engine creates its containers with Hardened (all capabilities
// dropped, no-new-privileges, a read-only root filesystem, no tmpfs of the engine's own,
// never a pull), which the sidecars' units and `arizukod quadlet` render too.
//
// It holds types and the checks on them only: it talks to no engine and imports nothing
// of arizukod, so that config, the adapters and the runner can all depend on it.
package engine
