package ipc

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
)

// toolSpec is one MCP tool: its description and parameters (which make its
// input schema), an optional step that fills in defaults before the grant
// rules see the arguments, and the work it does.
type toolSpec struct {
	name     string
	desc     string
	params   []param
	readOnly bool
	defaults func(s *Server, a args) error
	run      func(s *Server, ctx context.Context, a args) (any, error)
}

// mcpTool is the tool as tools/list shows it.
func (t *toolSpec) mcpTool() mcp.Tool {
	tool := mcp.NewToolWithRawSchema(t.name, t.desc, schema(t.params))
	tool.Annotations = mcp.ToolAnnotation{
		ReadOnlyHint:    mcp.ToBoolPtr(t.readOnly),
		DestructiveHint: mcp.ToBoolPtr(false),
		OpenWorldHint:   mcp.ToBoolPtr(false),
	}
	return tool
}

// Descriptions of parameters several tools share.
const (
	textDesc     = "The message text (at most 64 KiB)."
	chatJIDDesc  = "The chat to send to, as platform:id, e.g. tg:-5075870332."
	scheduleDesc = `For cron: a 5-field cron expression ("0 9 * * 1-5"). For interval: a duration ("90m", "24h") or a number of milliseconds. For once: an RFC 3339 time ("2030-01-02T15:04:05Z").`
)

// specs are the tools of the seed, one spec per entry of the tier table.
var specs = map[string]*toolSpec{
	"send_message": {
		desc: "Send a message to a chat. It goes into the group's outbox, from which arizukod delivers it.",
		params: []param{
			{name: "chat_jid", kind: argString, required: true, max: maxShortBytes, desc: chatJIDDesc},
			{name: "text", kind: argString, required: true, max: MaxTextBytes, desc: textDesc},
		},
		run: (*Server).sendMessage,
	},
	"send_reply": {
		desc: "Reply in the chat this turn answers (or in chat_jid). It goes into the group's outbox.",
		params: []param{
			{name: "text", kind: argString, required: true, max: MaxTextBytes, desc: textDesc},
			{name: "chat_jid", kind: argString, max: maxShortBytes, desc: "The chat to reply in; defaults to the chat this turn answers."},
		},
		defaults: (*Server).replyDefaults,
		run:      (*Server).sendReply,
	},
	"send_document": {
		desc: "Send a file of the group's workspace to a chat. It goes into the group's outbox.",
		params: []param{
			{name: "chat_jid", kind: argString, required: true, max: maxShortBytes, desc: chatJIDDesc},
			{name: "path", kind: argString, required: true, max: maxPathBytes, desc: "A regular file under /workspace: absolute (/workspace/out/report.pdf) or relative to /workspace (out/report.pdf). Symlinks are refused."},
			{name: "name", kind: argString, max: maxShortBytes, desc: "The file name the recipient sees; defaults to the path's last element."},
		},
		defaults: (*Server).documentDefaults,
		run:      (*Server).sendDocument,
	},
	"clear_session": {
		desc: "Forget this group's agent session, so that its next turn starts a new conversation.",
		run:  (*Server).clearSession,
	},
	"inject_message": {
		desc: "Put a message into a group's inbox; the group gets a turn for it.",
		params: []param{
			{name: "folder", kind: argString, required: true, max: maxFolderLen, desc: "The registered group to inject into: this group or one below it, e.g. main/research."},
			{name: "text", kind: argString, required: true, max: MaxTextBytes, desc: textDesc},
		},
		run: (*Server).injectMessage,
	},
	"register_group": {
		desc: "Register a new group below this one. Its parent must be registered.",
		params: []param{
			{name: "folder", kind: argString, required: true, max: maxFolderLen, desc: "The new group's folder: lowercase segments of [a-z0-9_] joined by '/', below this group's folder, e.g. main/research/w1."},
			{name: "name", kind: argString, required: true, max: maxShortBytes, desc: "A human-readable name."},
			{name: "description", kind: argString, max: maxDescBytes, desc: "What the group is for."},
		},
		run: (*Server).registerGroup,
	},
	"get_groups": {
		desc:     "List the registered groups this group may see: itself and the groups below it.",
		readOnly: true,
		run:      (*Server).getGroups,
	},
	"refresh_groups": {
		desc:     "Read the registered groups again from the database and list them as get_groups does. The server keeps no cache, so this is get_groups under the name agents know.",
		readOnly: true,
		run:      (*Server).getGroups,
	},
	"spawn_group": {
		desc: "Create a group below this one and optionally give it a first message to start a turn.",
		params: []param{
			{name: "folder", kind: argString, required: true, max: maxFolderLen, desc: "The new group's folder, below this group's; its parent must be registered."},
			{name: "name", kind: argString, required: true, max: maxShortBytes, desc: "A human-readable name."},
			{name: "description", kind: argString, max: maxDescBytes, desc: "What the group is for."},
			{name: "prompt", kind: argString, max: MaxTextBytes, desc: "A first message for the new group's inbox."},
		},
		run: (*Server).spawnGroup,
	},
	"delegate_to_child": {
		desc: "Hand a message to a direct child group; it gets a turn for it.",
		params: []param{
			{name: "child", kind: argString, required: true, max: maxFolderLen, desc: "The direct child: its folder (main/research) or its last segment (research)."},
			{name: "text", kind: argString, required: true, max: MaxTextBytes, desc: textDesc},
		},
		defaults: (*Server).childDefaults,
		run:      (*Server).delegateToChild,
	},
	"delegate_to_parent": {
		desc: "Hand a message to the parent group; it gets a turn for it.",
		params: []param{
			{name: "text", kind: argString, required: true, max: MaxTextBytes, desc: textDesc},
		},
		run: (*Server).delegateToParent,
	},
	"schedule_task": {
		desc: "Schedule a prompt to run as a turn of its own, by cron, at a fixed interval, or once.",
		params: []param{
			{name: "prompt", kind: argString, required: true, max: MaxTextBytes, desc: "What the task's turn is asked to do."},
			{name: "schedule_kind", kind: argString, required: true, max: maxShortBytes, enum: []string{"cron", "interval", "once"}, desc: "How schedule reads."},
			{name: "schedule", kind: argString, required: true, max: maxShortBytes, desc: scheduleDesc},
			{name: "folder", kind: argString, max: maxFolderLen, desc: "The group the task runs for: this group (the default) or one below it."},
		},
		defaults: (*Server).taskDefaults,
		run:      (*Server).scheduleTask,
	},
	"get_task": {
		desc:     "Show a scheduled task of this group or a group below it.",
		params:   []param{{name: "id", kind: argString, required: true, max: maxShortBytes, desc: "The task id, e.g. t_0123456789abcdef."}},
		readOnly: true,
		run:      (*Server).getTask,
	},
	"update_task": {
		desc: "Change a task's prompt or schedule, or pause and resume it. Changing the schedule or resuming computes its next run from now.",
		params: []param{
			{name: "id", kind: argString, required: true, max: maxShortBytes, desc: "The task id."},
			{name: "prompt", kind: argString, max: MaxTextBytes, desc: "The new prompt."},
			{name: "schedule_kind", kind: argString, max: maxShortBytes, enum: []string{"cron", "interval", "once"}, desc: "The new kind; needs schedule."},
			{name: "schedule", kind: argString, max: maxShortBytes, desc: scheduleDesc},
			{name: "state", kind: argString, max: maxShortBytes, enum: []string{"active", "paused"}, desc: "active runs the task on schedule, paused keeps it without running it."},
		},
		run: (*Server).updateTask,
	},
	"cancel_task": {
		desc:   "Cancel a task for good: it is marked completed and never runs again. Its history stays.",
		params: []param{{name: "id", kind: argString, required: true, max: maxShortBytes, desc: "The task id."}},
		run:    (*Server).cancelTask,
	},
	"list_tasks": {
		desc:     "List the tasks of this group and the groups below it.",
		params:   []param{{name: "state", kind: argString, max: maxShortBytes, enum: []string{"active", "paused", "completed"}, desc: "Only tasks in this state."}},
		readOnly: true,
		run:      (*Server).listTasks,
	},
	"list_routes": {
		desc:     "List the routes this group sees, in matching order: those it or a group below it added, and those delivering to it or below (owner \"\" is the operator).",
		readOnly: true,
		run:      (*Server).listRoutes,
	},
	"set_routes": {
		desc: "Replace the routes this group added to itself and the groups below it with the given routes. They are consulted only for inbound messages already routed to this group.",
		params: []param{
			{name: "routes", kind: argRoutes, required: true, max: MaxRoutes, desc: "The new routes (at most 256); each target must be this group or a registered group below it. [] removes them all."},
		},
		run: (*Server).setRoutes,
	},
	"add_route": {
		desc: "Add a route of this group: inbound messages routed to this group that match it go to the target's inbox instead.",
		params: []param{
			{name: "seq", kind: argInteger, required: true, desc: "Order of the route: lower seq is tried first."},
			{name: "match", kind: argString, required: true, allowEmpty: true, max: maxMatchBytes, desc: matchDesc},
			{name: "target", kind: argString, required: true, max: maxFolderLen, desc: "The registered group receiving the messages: this group or one below it."},
		},
		defaults: (*Server).routeDefaults,
		run:      (*Server).addRoute,
	},
	"delete_route": {
		desc:   "Delete a route this group or a group below it added.",
		params: []param{{name: "id", kind: argInteger, required: true, desc: "The route id, as list_routes shows it."}},
		run:    (*Server).deleteRoute,
	},
}

func init() {
	for name, spec := range specs {
		spec.name = name
	}
}
