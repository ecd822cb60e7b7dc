package policy

import (
	"strings"
	"testing"
)

// TestWords: the grants in words name the subtree, the tools the tier and the rules
// together allow, and each rule's decision.
func TestWords(t *testing.T) {
	tests := []struct {
		folder string
		rules  []string
		want   []string
		absent []string
	}{
		{"main", nil, []string{
			"act on your folder, main, and the folders below it",
			"tier 0 (root)",
			"You may call: add_route, ", "send_reply",
			"- *: allow every tool\n",
		}, nil},
		{"main/a/b/c", nil, []string{"tier 3 (worker)", "You may call: send_reply.\n"}, []string{"send_message"}},
		{"main/a", []string{"send_*", "!send_message(chat_jid=tg:*)", "!send_document"}, []string{
			"You may call: send_message, send_reply.\n",
			"- send_*: allow the tools matching send_*\n",
			"- !send_message(chat_jid=tg:*): deny send_message when chat_jid matches tg:*\n",
			"- !send_document: deny send_document\n",
		}, []string{"send_document,", "register_group"}},
		{"main", []string{"!*"}, []string{"You may call none of them", "- !*: deny every tool\n"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.folder+strings.Join(tc.rules, " "), func(t *testing.T) {
			rules, err := ParseRules(tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			got := Words(tc.folder, rules)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.absent {
				if strings.Contains(got, w) {
					t.Errorf("holds %q:\n%s", w, got)
				}
			}
		})
	}
}
