// Package ipc authorizes and dispatches the MCP tool calls an agent makes
// during a turn. For each turn the daemon starts one MCP server for the
// group's folder on a unix socket (data/ipc/<folder>/router.sock, mounted at
// /var/run/pub/arizuko/ in the container) and stops it when the container
// exits. The socket is the caller's identity: its folder gives the group, the
// folder's depth gives the tier.
//
// What it owns: the tool table (which tier may call which tool), the grant
// rule language and its decisions, the route match language and route
// selection, and the tree relations tools are checked against. Its tools do
// their work through store functions handed in at construction.
//
// What it must not touch: it owns no tables and keeps no state but the
// socket's file descriptor, so restarting the server between turns is safe.
// It does not start containers, resolve folders to directories (groupfolder)
// or import the container engine bindings.
//
// # Tiers
//
// Tier = min(depth, 3) where depth is the folder's number of segments minus
// one: 0 root (every tool), 1 world (management tools and sending), 2 agent
// (send_message, send_reply, send_document, delegate_to_parent), 3 and
// deeper worker (send_reply only). The seed's "minimum tier" column is read
// as the deepest tier that may call the tool, because deeper groups have fewer
// powers; the table is maxTier in tiers.go.
//
// # Grant rules
//
// A group's rules are an ordered list of [!]tool[(param=glob,...)], for
// example:
//
//	rule                              effect
//	*                                 every tool the tier allows
//	send_*                            all send tools
//	!send_message(chat_jid=tg:*)      but not into Telegram chats
//	schedule_task(schedule_kind=cron) only cron tasks
//	delegate_to_child(child="main/research/*")
//
// For a call, the last rule that matches decides; when none matches the call
// is denied. A rule matches when its tool glob matches the tool name and
// every parameter it names is present with a string form (see ParamString)
// that matches the glob; a missing parameter means the rule does not match,
// so the server must check the arguments the tool will act on, after
// defaults are filled in. Globs are described at Glob: '*' also matches '/'.
//
// A group with no rules stored gets DefaultRules, the single rule "*": the
// tier alone decides. A group that should see nothing stores "!*".
//
// The tools a group sees in tools/list are those its tier allows and for
// which some call could pass the rules (Rules.MayList, decided exactly; a
// tool whose only positive rule is shadowed by later negations is hidden).
// Every tools/call is checked again with its parameters by CheckCall, whose
// *DeniedError says whether the tier or which rule refused it.
//
// # Routes and the tree
//
// Routes match inbound messages with key=glob terms (ROUTES.md). Tier 0 sees
// every route; other tiers see, and set_routes replaces, only routes whose
// target is their folder or a descendant (RouteVisible). Delegation follows
// single edges of the tree: delegate_to_child targets a direct child
// (IsChild), delegate_to_parent the direct parent (Parent); reaching a
// grandchild takes one delegation per level, each a turn of its own.
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
// tools/list shows the tools Allowed for the tier and the rules, read from
// the store at that moment. Every tools/call goes through the same gate, in
// this order: the tier; the arguments (unknown names, types, sizes such as
// MaxTextBytes, enumerations), so that no glob ever runs on an unbounded
// value; the defaults (send_reply's chat_jid is ServerConfig.ReplyTo,
// schedule_task's folder the caller, delegate_to_child's child a full
// folder, send_document's path relative to /workspace); the rules, read
// again from the store; then the tool. A refusal is a tool error
// ("denied: ...") naming the tier or the rule; a bad argument one naming the
// argument; an unknown tool a JSON-RPC error naming it.
//
// Grant rules as the server reads them: never set (store.ErrNotFound) means
// DefaultRules; set to an empty list means no rule, so everything is denied;
// a list that does not parse denies everything and says why. A rule that
// names a parameter none of the tools it matches has (see ToolParams), such
// as "!send_message(chat=tg:*)", would never match, so a typo would silently
// open what a negative rule closes: the tools it applies to are denied and
// hidden until it is fixed, with the rule in the reason.
//
// Scope: below tier 0 a group sees and acts on its own subtree only; groups,
// tasks and routes outside it answer "not found", as if they did not exist.
// register_group creates a group strictly below the caller (tier 0:
// anywhere), spawn_group (tier 0) anywhere with an optional first message.
// Targets of inject_message, delegations, tasks and routes must be
// registered groups. refresh_groups is get_groups: the server has no cache.
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
