// Package sidecar runs a group's MCP sidecars: small servers that live next to the agent
// for the length of one turn and serve it through a unix socket in the group's IPC
// directory (ipc/<folder>/sidecars/<name>.sock, /var/run/pub/arizuko/sidecars/<name>.sock
// in both containers).
//
// It owns the sidecar part of a group's container config (Config: fields, or a Quadlet
// .container file read with the quadlet package), the hardened container each sidecar
// becomes (Unit: the same hardening as an agent container, which no config can loosen),
// and their life around a turn (Manager). Where a systemd manager answers on D-Bus (the
// daemon's user's own, also for the packaged system service, which runs as arizuko; the
// system's only for root), each sidecar is a transient unit
// arizuko-sc-<instance tag>-<folder slug>-<name>.service whose main process is the
// engine's CLI running the container in the foreground, so its output is in the journal
// under the unit's name, the unit carries the limits and the manager kills what is left;
// elsewhere (inside a container, a user without a manager) the containers run directly on
// the engine. The names carry the daemon's instance (ContainerName) and the unit stops its
// container by the ID its run wrote: two daemons on one engine or one manager never touch
// each other's sidecars.
//
// It must not touch the store, the queue or the agent's container: the caller starts the
// sidecars before the turn, lists their names in settings.json and stops them after.
package sidecar
