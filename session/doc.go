// Package session seeds a group's agent session directory before every turn.
// The session directory is data/sessions/<folder>/ on the host and /root in
// the container; Claude Code keeps its state there. Seed writes three things:
// .claude.json in the session directory, and settings.json and the skills in
// the operator's copy (Options.ConfigDir, data/claude/<slug>/, whose home/ mirrors
// the session: the runner binds its .claude/settings.json and .claude/skills/
// read-only over the session's, so the agent cannot change what its next turn
// runs; without a ConfigDir they go to the session directory itself). It must
// not touch anything else in those directories (transcripts, caches, the
// agent's own files) nor anything outside them: every path is resolved
// through an os.Root, so a symlink planted by an agent cannot redirect a read or
// a write, and files are opened non-blocking and must be regular files.
//
// # .claude/settings.json
//
// Merged, never replaced. arizukod owns exactly:
//
//   - env.<K> for every K in Options.Env (our value replaces the file's; a turn's are
//     ClaudeEnv: ARIZUKO_FOLDER, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1,
//     DISABLE_AUTOUPDATER=1, ENABLE_TOOL_SEARCH=false; never a secret), plus
//     env.ARIZUKO_MANAGED_ENV, the comma-separated list of the keys it set. On
//     the next write the keys in that list are removed before the current ones
//     are set, so a variable dropped from the configuration (a revoked token,
//     say) disappears from the file. Every other env key survives.
//   - mcpServers.arizuko: {"command":"socat","args":["STDIO","UNIX-CONNECT:/var/run/pub/arizuko/router.sock"]}.
//   - mcpServers.<name> for every sidecar of the turn, the same socat form with
//     UNIX-CONNECT:/var/run/pub/arizuko/sidecars/<name>.sock.
//   - any other mcpServers entry whose command is socat and whose arguments
//     connect to a socket under /var/run/pub/arizuko/: only arizukod serves
//     sockets there, so such an entry is a bridge it wrote for a sidecar that is
//     gone, and it is removed.
//   - hooks.PreCompact's hook running "/usr/local/bin/arizuko-claude pre-compact"
//     (PreCompactCommand), in a matcher group of its own ({"matcher": "",
//     "hooks": [{"type": "command", "command": ...}]}) appended after the
//     operator's groups: before Claude Code compacts its context, the image's
//     runner archives the transcript as an episode in /workspace/episodes/. Any
//     other hook running that command is removed (a group left empty by that
//     goes); the operator's other PreCompact hooks and other events are kept.
//
// Every other key, top-level or nested, is kept with its value as written
// (numbers are not rounded, strings not re-escaped). The file is rewritten
// only when its content changes, as two-space-indented JSON with keys in
// sorted order, atomically (temporary file in the same directory, fsync,
// rename, fsync of the directory). A new file gets mode 0600 (it may hold
// secrets); an existing file keeps its mode. A settings.json that is not a
// JSON object, or whose env, mcpServers or hooks is not an object, or whose
// hooks.PreCompact is not an array, cannot be merged
// without losing what the operator wrote (permission rules, for one): Seed then
// fails with ErrCorruptSettings naming the file and leaves it untouched, and
// the turn does not run until someone repairs it.
//
// # .claude.json
//
// Claude Code's own state file, which it rewrites. Created when missing,
// atomically and without ever exposing a partial file: hasCompletedOnboarding
// true (no first-run wizard), the trust dialog of /workspace accepted, and
// userID, the hex SHA-256 of "arizuko:" + folder, so a group keeps one
// identity across turns and re-seeding. Then, before every turn, its top-level
// mcpServers get the same entries as settings.json's (the router and the
// turn's sidecars; stale bridges of arizukod removed): Claude Code reads MCP
// servers there and ignores those of settings.json. Every other MCP server is
// refused: removed from the top level, and mcpServers, enabledMcpjsonServers
// and enableAllProjectMcpServers from every project, each logged with the
// file's path (the file is the agent's to write, so such an entry is code it
// planted for its next turn). Every other key is kept as written; the file is rewritten atomically only when that changes it. A
// .claude.json that is not a JSON object is left alone with a warning: the
// turn runs, without arizuko's tools.
//
// # .claude/skills/
//
// The bundled skills tree (container/skills/ in the repository, installed
// with the daemon) holds one directory per skill, a MIGRATION_VERSION file
// (a positive integer) and optionally migrations/. When the session has no
// .claude/skills/MIGRATION_VERSION the skill directories are copied in, each
// file only if it does not exist yet (operator edits survive), and the version
// file is written last; afterwards the tree is never copied again, so a skill
// the operator deleted stays deleted (delete MIGRATION_VERSION to re-seed the
// missing files).
//
// A migration is a file migrations/NNN-description.md, NNN an integer of at
// least three digits (2 <= NNN <= MIGRATION_VERSION, unique), holding YAML
// frontmatter with exactly one key:
//
//	---
//	files:
//	  - diary/SKILL.md
//	  - old-skill/SKILL.md
//	---
//	Free text: why these files change.
//
// Applying it makes every listed path (relative to the skills directory)
// equal to the bundled tree: the bundled content is written over the
// session's file (atomically), or, when the bundle no longer has the path, the
// session's file is removed. A new skill therefore needs a migration listing
// its files. The content is always the current bundle's, so applying
// migrations 2..N in a row ends in the bundle's state without intermediate
// versions. When the installed version is lower than the bundled one, every
// migration with a higher number is applied in order and the version file is
// bumped (atomically) after each; then it is set to the bundled version.
// Applying a migration twice gives the same files, so a crash between a
// migration's writes and its version bump costs at most one idempotent redo.
// A session whose installed version is higher than the bundle's is left alone.
//
// Two Seeds of one session at once (a message turn and a scheduled task) are
// safe: every write is atomic and idempotent, and files that must not be
// overwritten are created with a hard link, which fails instead of replacing.
//
// The package talks to no container engine, store or network.
package session
