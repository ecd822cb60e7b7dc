package policy

import "strings"

// params are the parameters of each tool of maxTier that a grant rule may name: the
// arguments the MCP server's tool takes, in its order (a test of package ipc keeps the two
// equal).
var params = map[string][]string{
	"send_message":       {"chat_jid", "text"},
	"send_reply":         {"text", "chat_jid"},
	"send_document":      {"chat_jid", "path", "name"},
	"clear_session":      nil,
	"inject_message":     {"folder", "text"},
	"register_group":     {"folder", "name", "description"},
	"get_groups":         nil,
	"refresh_groups":     nil,
	"spawn_group":        {"folder", "name", "description", "prompt"},
	"delegate_to_child":  {"child", "text"},
	"delegate_to_parent": {"text"},
	"schedule_task":      {"prompt", "schedule_kind", "schedule", "folder"},
	"get_task":           {"id"},
	"update_task":        {"id", "prompt", "schedule_kind", "schedule", "state"},
	"cancel_task":        {"id"},
	"list_tasks":         {"state"},
	"list_routes":        nil,
	"set_routes":         {"routes"},
	"add_route":          {"seq", "match", "target"},
	"delete_route":       {"id"},
}

// folderParams are the parameters that name a folder: a grant rule's glob for one of
// them is a folder glob, where '*' stays within one segment (see Glob).
var folderParams = map[string]bool{"folder": true, "child": true, "target": true}

// Params are the parameters of tool a grant rule may name, in the tool's order; nil for
// a tool without parameters or one that does not exist.
func Params(tool string) []string { return params[tool] }

// RuleProblem says why rules cannot decide calls of tool: a rule that applies to tool
// names a parameter that none of the tools its pattern matches has. Such a rule would
// silently never match (a typo in a negative rule would open what it was meant to close),
// so calls of those tools are denied until it is fixed. "" means no problem.
func RuleProblem(rules Rules, tool string) string {
	for _, r := range rules {
		if !r.Tool.Match(tool) {
			continue
		}
		for _, p := range r.Params {
			var matched []string
			known := false
			for _, name := range Tools() {
				if r.Tool.Match(name) {
					matched = append(matched, name)
					known = known || hasParam(name, p.Key)
				}
			}
			if known {
				continue
			}
			if r.Tool.literal() {
				return "grant rule " + r.String() + " names parameter " + p.Key + ", which " + tool +
					" does not have (its parameters: " + paramList(tool) + "); " + tool +
					" is denied until the rule is fixed"
			}
			return "grant rule " + r.String() + " names parameter " + p.Key + ", which none of the tools it matches (" +
				strings.Join(matched, ", ") + ") has; " + tool + " is denied until the rule is fixed"
		}
	}
	return ""
}

func hasParam(tool, name string) bool {
	for _, p := range params[tool] {
		if p == name {
			return true
		}
	}
	return false
}

func paramList(tool string) string {
	if len(params[tool]) == 0 {
		return "none"
	}
	return strings.Join(params[tool], ", ")
}
