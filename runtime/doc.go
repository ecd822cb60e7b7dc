// Package runtime runs agent turns: one fresh, hardened container per turn, thrown away
// after. It owns the Engine interface with its two real implementations (Podman through the
// libpod bindings, the Docker Engine API as the fallback), the choice between them, the
// container spec every turn gets, and the Runner that drives a turn from create to remove.
//
// Hardening is not a caller's option: every container an Engine creates has all
// capabilities dropped, no-new-privileges set and a read-only root filesystem.
//
// It must not touch the store, the API or the queue: a caller hands it a Turn and gets a
// Result back. It reads and writes only the directories the caller's Layout names.
package runtime
