// Package mountsec decides what of the host an agent container may see: it
// validates additional mounts against the operator's allowlist and builds the
// filtered environment file handed to containers.
//
// It owns the allowlist format (mount-allowlist.json), the built-in blocked
// patterns, the mount request/decision types, the dotenv parser and the env
// file writer. It is a pure library over the filesystem: it never talks to a
// container engine, the store or the network, never mounts anything and never
// logs a secret value (Secrets formats as its names only).
//
// # Policy
//
//   - Additional mounts need an allowlist; without one every request is
//     rejected (rule no-allowlist).
//   - A host path is judged after resolving every symlink, and the real path is
//     what the runner mounts. Blocked patterns are matched against the
//     requested path and against the real path, component by component,
//     case-insensitively (trailing '.' and ' ' are ignored, as some
//     filesystems do).
//   - Paths holding any non-ASCII byte are rejected outright (rule non-ascii):
//     that closes Unicode look-alikes (".ѕsh" with a Cyrillic ѕ), fullwidth
//     forms and NFC/NFD normalisation differences on filesystems that fold
//     them. Control characters and ':' ',' '\' are rejected too, as they break
//     engine mount syntax.
//   - Paths must be written in clean form: "..", ".", "//" and trailing '/'
//     are rejected rather than interpreted.
//   - A mount may not be, contain, or sit inside a protected path (the data
//     directory, the allowlist's own directory), and may not contain the
//     service user's home or a location named by an anchored blocked pattern.
//     Blocked patterns cannot see files created later below a mounted
//     directory: an allowed root must not hold secrets.
//   - Mounts are read-only unless asked otherwise; read-write needs the root's
//     allowReadWrite and either the root group or nonMainReadOnly off.
//
// # Remaining window
//
// Validate resolves the path and returns the real path; Recheck verifies just
// before the container is created that the real path still resolves to
// itself. Between Recheck and the engine's mount(2), performed by another
// process that follows symlinks in the source, anyone who can write to a
// parent directory of the real path can still swap a component for a symlink.
// Keep allowed roots writable only by the service user, and do not run a turn
// whose read-write mount contains another turn's mount source concurrently.
package mountsec
