// Package engine is what arizukod knows of a container engine: the Engine interface its
// adapters (runtime/podman, runtime/docker) implement, the Spec of a container with its
// mounts and limits, the labels that mark arizukod's containers, the network modes, and
// the errors callers branch on.
//
// Hardening is not a caller's option: a Spec has no field for capabilities, privileges or
// a writable root, and every Engine creates its containers with all capabilities dropped,
// no-new-privileges and a read-only root filesystem.
//
// It holds types and the checks on them only: it talks to no engine and imports nothing
// of arizukod, so that config, the adapters and the runner can all depend on it.
package engine
