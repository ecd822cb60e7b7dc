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
// # Authority is scoped to a tree
//
// A group's tools act on its own subtree only: its folder and the folders
// below it. For a root group that is its tree, so on a host serving two
// communities (two roots, main and other) neither's agent can touch the
// other's groups, inboxes, tasks or routes; below the root each group is
// narrowed further to its own branch. Tier 0 is no exception: the tier says
// which tools a group has, the subtree where they act.
//
//	tool                           acts on
//	inject_message                 folder in the subtree
//	register_group, spawn_group    a new folder strictly below the caller (no new root)
//	schedule_task                  folder in the subtree (default: the caller)
//	get/update/cancel_task         tasks of folders in the subtree
//	list_tasks, get_groups,        what lies in the subtree
//	refresh_groups
//	add_route                      a route of the caller to a target in the subtree
//	set_routes                     the caller's own routes to targets in the subtree
//	delete_route                   routes the caller or a group below it added
//	list_routes                    those, and routes delivering into the subtree
//	delegate_to_child/parent       the direct child or parent (single tree edges)
//	send_*, clear_session          the caller's own outbox and session
//
// Outside the subtree a by-id object (task, route) is "not found", as if it
// did not exist; a folder argument outside it is denied with the reason.
//
// The one way across is an operator's grant that names the folder: a call
// whose folder argument lies outside the caller's subtree is allowed exactly
// when the rule deciding it (the last matching one) is positive and names
// that argument, so that its glob matched the folder (Rules.Reaches). The
// argument is folder for inject_message, register_group, spawn_group and
// schedule_task, and target for add_route. For example, given to main:
//
//	rule                               main may
//	*                                  use its tools inside main's tree
//	inject_message(folder=other/desk)  and put messages into other/desk
//	add_route(target=other/*)          and forward its own inbound
//	                                   messages below other
//	schedule_task(folder=other)        and schedule tasks that run as other
//	spawn_group(folder=lab)            and create the new root lab
//
// A rule that does not name the folder, such as "*" or "inject_message",
// never reaches outside the subtree, so the default rules ("*") keep every
// group in its own. A glob '*' matches '/' too: folder=other/* is every
// group below other, not other itself (add folder=other for that). Negative
// rules work as everywhere: "!inject_message(folder=other/private)" after a
// wider grant takes that folder back. The tier table still applies first:
// no grant gives a tier a tool it lacks. Tools without a folder argument
// (by-id task and route tools, listings, set_routes) never cross: tasks
// scheduled across are seen and managed by the target's tree, and a route
// across is deleted by the group that added it or by the operator.
//
// Grants are the operator's: they are set only through the API
// (PUT /v1/groups/{folder}/grants, `arizukod groups grants FOLDER RULE...`).
// No tool writes them (the Store interface has no method that could), so no
// agent can widen its own or anyone's reach.
//
// # Routes and the tree
//
// Routes match inbound messages with key=glob terms (ROUTES.md) and are taken
// in layers by owner (Route, RouteInbound): the operator's routes (made
// through the API) pick a folder, then the routes the group at that folder
// added pick among its subtree, and so on down. A group's routes therefore
// decide only for messages already routed to the group itself and only
// among its own subtree: no seq, match or target of theirs can take a
// message routed elsewhere, or go before a route they do not own. A route a
// group adds out of its subtree (by an operator's grant) forwards the
// group's own messages and stays in force only while the grant does. A group
// sees the routes it or a group below it added and the routes delivering
// into its subtree; it deletes only the former, and set_routes replaces only
// its own routes within its subtree. Delegation follows single edges of the
// tree: delegate_to_child targets a direct child (IsChild),
// delegate_to_parent the direct parent (Parent); reaching a grandchild takes
// one delegation per level, each a turn of its own.
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
// Scope: every group sees and acts on its own subtree only (see "Authority
// is scoped to a tree"); the scope is checked before whether a folder is
// registered, so a refusal never tells whether a group exists elsewhere.
// register_group creates a group strictly below the caller, spawn_group
// (tier 0) likewise with an optional first message. Targets of
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
