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
//	schedule_task(schedule_type=cron) only cron tasks
//	delegate_to_child(folder="main/research/*")
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
package ipc
