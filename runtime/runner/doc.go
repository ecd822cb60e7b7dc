// Package runner runs agent turns: one fresh, hardened container per turn, thrown away
// after. It owns the agent container's one spec (AgentSpec) and mount table (MountTable),
// which `arizukod quadlet` renders too, and the Runner that drives a turn from create to
// remove: the read-only binds of the operator's copy of the code-running configuration
// over the agent's trees, with their mountpoints made before every container (protect.go),
// the soft and hard deadlines, the classification of how it ended, adoption of a
// container a previous daemon left, steering, the run log and leftover removal; and the
// folders' next containers made ahead: prepared (created, initialized) or, for an image
// that declares contract.PrepareLabel, warm agents started and waiting for their turn
// (warm.go), bounded by count and by the host's available memory.
//
// It talks to an engine only through engine.Engine, and must not touch the store, the
// API or the queue: a caller hands it a Turn and gets a Result back. It reads and writes
// only the directories the caller's Layout names.
package runner
