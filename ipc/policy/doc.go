// Package policy is the rule language of arizukod's MCP tools, apart from the server that
// serves them: the tool table (which tier may call which tool, with which parameters),
// grant rules and their decisions, listing (whether any call of a tool could pass), the
// route match language and route selection, and the tree relations every check is scoped
// to. The MCP server (package ipc) and the API (validating grants and routes, routing
// inbound messages) both decide with it.
//
// It must not touch the store's tables (routing reads them through RouteSource), sockets
// or the MCP protocol.
//
// # Tiers
//
// Tier = min(depth, 3) where depth is the folder's number of segments minus
// one: 0 root (every tool), 1 world (management tools and sending), 2 agent
// (send_message, send_reply, send_document, delegate_to_parent), 3 and
// deeper worker (send_reply only). The seed's "minimum tier" column is read
// as the deepest tier that may call the tool, because deeper groups have fewer
// powers; the table is maxTier in tiers.go, the parameters rules may name
// are params in params.go.
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
// defaults are filled in. Globs are described at Glob. The value of a
// parameter that names a folder (folder, child, target) is a folder glob:
// '*' stays within one segment and '**' crosses '/', so folder=main/* is
// main's children and folder=main/** everything below main. In every other
// value '/' is an ordinary character and '**' is the same as '*' (a
// negative rule such as !send_message(text=*secret*) still covers a text
// with slashes). Before folder globs, '*' crossed '/' in folder values too:
// a stored rule written then with "*" in a folder value now matches one
// level, and one that meant a subtree must say "**".
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
//	add_route(target=other/**)         and forward its own inbound
//	                                   messages below other
//	schedule_task(folder=other)        and schedule tasks that run as other
//	spawn_group(folder=lab)            and create the new root lab
//
// A rule that does not name the folder, such as "*" or "inject_message",
// never reaches outside the subtree, so the default rules ("*") keep every
// group in its own. folder=other/** is every group below other, not other
// itself (add folder=other for that); folder=other/* only its children. Negative
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
package policy
