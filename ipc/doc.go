// Package ipc is the per-turn MCP server: for each turn one server for the group's folder
// on a unix socket (data/ipc/<folder>/router.sock, mounted at /var/run/pub/arizuko/ in the
// container), stopped when the container exits, with the 20 tools of the seed. The socket
// is the caller's identity: its folder gives the group, the folder's depth gives the tier.
//
// What it owns: the tools (their parameters, schemas and work) and the gate every call
// passes. What a tier and the grant rules allow is decided by package ipc/policy. Its tools
// do their work through store functions handed in at construction.
//
// What it must not touch: it owns no tables and keeps no state but the
// socket's file descriptor, so restarting the server between turns is safe.
// It does not start containers, resolve folders to directories (groupfolder)
// or import the container engine bindings.
//
// # The server
//
// Start listens on ServerConfig.SocketPath (after removing whatever a
// previous server or an agent left there, never following a symlink) with
// mode SocketMode (0600: the agent runs as the daemon's user and the IPC
// directory is 0700, so nobody else needs more). Every connection speaks
// newline-delimited JSON-RPC 2.0, the MCP stdio framing that socat relays,
// with an MCP session of its own (mcp-go's StdioServer is not used: its
// session is process-wide, so a second connection would be refused). Lines
// are at most MaxMessageBytes and at most MaxConns connections are served at
// once. Stop closes everything and removes the socket file if it is still
// the one Start made, so a restarted server's socket is never removed by the
// old one.
//
// A server started Held serves a warm agent before its turn: Claude Code connects its MCP
// servers at its start, so initialize and tools/list are answered, but every tools/call is
// refused until Bind gives the server its turn (the chat, the run); then the connection
// made before serves the turn. Refusing rather than holding the call keeps a warm agent
// from acting before its turn at all: its model token is not taken yet either, so a
// legitimate call cannot come before Bind.
//
// tools/list shows the tools policy.Allowed for the tier and the rules, read from
// the store at that moment. Every tools/call goes through the same gate, in
// this order: the tier; the arguments (unknown names, types, sizes such as
// MaxTextBytes, enumerations, strings valid UTF-8 as sent rather than
// turned into U+FFFD by the JSON decoder), so that no glob ever runs on an
// unbounded value; the defaults (send_reply's chat_jid is ServerConfig.ReplyTo,
// schedule_task's folder the caller, delegate_to_child's child a full
// folder, send_document's path relative to /workspace); the rules, read
// again from the store; then the tool. A refusal is a tool error
// ("denied: ...") naming the tier or the rule; a bad argument one naming the
// argument; an unknown tool a JSON-RPC error naming it.
//
// Grant rules as the server reads them: never set (store.ErrNotFound) means
// policy.DefaultRules; set to an empty list means no rule, so everything is denied;
// a list that does not parse denies everything and says why. A rule that
// names a parameter none of the tools it matches has (see policy.Params), such
// as "!send_message(chat=tg:*)", would never match, so a typo would silently
// open what a negative rule closes: the tools it applies to are denied and
// hidden until it is fixed, with the rule in the reason.
//
// Scope: every group sees and acts on its own subtree only (see "Authority
// is scoped to a tree"); the scope is checked before whether a folder is
// registered, so a refusal never tells whether a group exists elsewhere.
// register_group creates a group strictly below the caller, spawn_group
// (tier 0) likewise with an optional first message; both register in one
// write that leaves a group already registered (by the operator, with its
// container config) as it is, and say so. Targets of
// inject_message, delegations, tasks and routes must be registered groups.
// add_route's match is put in canonical form before the rules see it. refresh_groups is get_groups: the server has no cache.
// Tasks: intervals are stored as milliseconds (the tool also takes Go
// durations), ServerConfig.NextRun validates the schedule (minimum interval,
// cron syntax) and gives the first run, which must lie in the future; update_task recomputes it
// when the schedule changes or a paused task resumes, and cancel_task marks
// the task completed instead of deleting it. A message put into an inbox
// wakes the daemon's queue through ServerConfig.Wake. send_document takes a
// regular file of the group directory (the container's /workspace), reached
// without a symlink leaving it and not itself a symlink, and records its
// path relative to /workspace.
package ipc
