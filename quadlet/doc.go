// Package quadlet reads and writes Podman Quadlet .container units: systemd unit files
// whose [Container] section Podman's generator (podman-systemd.unit(5)) turns into a
// `podman run` command line.
//
// It has three layers:
//
//   - File: the unit file syntax, faithful to the parser Podman's generator uses
//     (pkg/systemd/parser/unitfile.go in containers/podman v5.4): sections, Key=Value
//     settings, # and ; comments, trailing-backslash continuations, repeated keys and
//     empty assignments, all kept in file order so Parse then Render gives the file back,
//     normalised only in white space and with each continued line joined into one (a
//     comment inside a continuation moves above it).
//   - Container: a typed view of the keys arizukod needs, read the way the generator
//     reads them (pkg/systemd/quadlet/quadlet.go, ConvertContainer) and rendered back as
//     deterministic text that Podman 5.4's generator accepts. Keys it does not model
//     are kept verbatim in Container.Extra and listed by Container.Unsupported.
//   - Container.PodmanRunArgs: the arguments the generator would put after `podman run`
//     for the modelled keys, so a sidecar described as a .container file can be run
//     with the meaning Podman gives it, outside a generated unit.
//
// It owns nothing but this syntax and mapping: it does no I/O, starts nothing, and does
// not import the Podman bindings or any other engine package. Its tests (only they)
// check it against Podman's own unit parser and generator, pkg/systemd/parser and
// pkg/systemd/quadlet of the containers/podman/v5 module already in go.mod.
package quadlet
