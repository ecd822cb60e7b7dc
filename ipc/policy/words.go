package policy

import (
	"fmt"
	"strings"
)

// maxWordsRules is how many rules Words spells out; the rest are counted.
const maxWordsRules = 64

// Words says in plain sentences what a group at folder may do with its tools, for its
// agent's system prompt: the subtree its tools act on, the tools it may call (Allowed:
// its tier and its rules together), the operator's rules each in words, and how a call is
// decided. The text is plain; the caller escapes it for its context.
func Words(folder string, rules Rules) string {
	tier := FolderTier(folder)
	var b strings.Builder
	fmt.Fprintf(&b, "Your arizuko tools are called as mcp__arizuko__<name>. They act on your folder, %s, and the folders below it, never on another group's, unless a rule below names that folder. ", folder)
	fmt.Fprintf(&b, "Your folder is tier %d (%s).\n", tier, TierLabel(tier))
	var may []string
	for _, tool := range Tools() {
		if Allowed(tool, tier, rules) {
			may = append(may, tool)
		}
	}
	if len(may) == 0 {
		b.WriteString("You may call none of them: every call is refused.\n")
	} else {
		fmt.Fprintf(&b, "You may call: %s.\n", strings.Join(may, ", "))
	}
	b.WriteString("The operator's grant rules, in order (for each call the last rule that matches decides; a call no rule matches is refused):\n")
	for i, r := range rules {
		if i == maxWordsRules {
			fmt.Fprintf(&b, "- and %d more rules\n", len(rules)-i)
			break
		}
		fmt.Fprintf(&b, "- %s: %s\n", r, r.Words())
	}
	b.WriteString("A refused call returns an error that names the rule or the tier. Only the operator changes these grants.\n")
	return b.String()
}

// Words says what the rule decides: "allow every tool", "deny send_message when chat_jid
// matches tg:*".
func (r Rule) Words() string {
	verb := "allow"
	if r.Deny {
		verb = "deny"
	}
	var what string
	switch {
	case matchesEveryTool(r.Tool):
		what = "every tool"
	case r.Tool.literal():
		what = r.Tool.pattern
	default:
		what = "the tools matching " + r.Tool.pattern
	}
	if len(r.Params) == 0 {
		return verb + " " + what
	}
	conds := make([]string, len(r.Params))
	for i, p := range r.Params {
		conds[i] = p.Key + " matches " + p.Value.pattern
	}
	return verb + " " + what + " when " + strings.Join(conds, " and ")
}

// matchesEveryTool reports whether g matches every tool name.
func matchesEveryTool(g Glob) bool {
	for name := range maxTier {
		if !g.Match(name) {
			return false
		}
	}
	return true
}
