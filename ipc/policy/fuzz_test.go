package policy

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func checkSyntaxError(t *testing.T, in string, err error) {
	t.Helper()
	var se *SyntaxError
	if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) {
		t.Fatalf("%q: error %v is not a *SyntaxError", in, err)
	}
	if se.Column < 1 || se.Column > utf8.RuneCountInString(in)+1 || se.Msg == "" {
		t.Fatalf("%q: bad position or message: %v", in, err)
	}
}

func ruleKey(r Rule) string {
	parts := []string{r.Tool.String()}
	if r.Deny {
		parts[0] = "deny " + parts[0]
	}
	for _, p := range r.Params {
		parts = append(parts, p.Key, p.Value.String())
	}
	return strings.Join(parts, "\x00")
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{
		"*", "!send_*", "send_message(chat_jid=tg:*)", `send_message(text="a,b \"c\"")`,
		"send_message ( a = 1 , b=[x-z] )", `send_message(a=\,\))`, "send_message()", "!",
		`get_[!x]*(k="")`, "send_message(a=1,a=2)", "日本(a=1)",
	} {
		f.Add(s, "tg:-1")
	}
	f.Fuzz(func(t *testing.T, text, value string) {
		r, err := ParseRule(text)
		if err != nil {
			checkSyntaxError(t, text, err)
			return
		}
		canonical := r.String()
		again, err := ParseRule(canonical)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", canonical, text, err)
		}
		if ruleKey(again) != ruleKey(r) || again.String() != canonical {
			t.Fatalf("%q -> %q -> %q: not the same rule", text, canonical, again.String())
		}
		params := map[string]any{}
		for _, p := range r.Params {
			params[p.Key] = value
		}
		rules := Rules{r}
		for _, tool := range Tools() {
			d := rules.Decide(tool, params)
			if d.Allowed && !rules.MayList(tool) {
				t.Fatalf("%q allows %s(%v) but MayList is false", canonical, tool, params)
			}
		}
	})
}

func FuzzParseMatch(f *testing.F) {
	for _, s := range []string{
		"", "room=-5075870332", "platform=telegram verb=mention", `sender="tg:*"`,
		`room="a b" verb=[!m]*`, "chat=1", "room=1 room=2", `room="x`, `room=a\ b`,
	} {
		f.Add(s, "telegram", "-5075870332")
	}
	f.Fuzz(func(t *testing.T, text, platform, room string) {
		m, err := ParseMatch(text)
		if err != nil {
			checkSyntaxError(t, text, err)
			return
		}
		canonical := m.String()
		again, err := ParseMatch(canonical)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", canonical, text, err)
		}
		if again.String() != canonical || len(again.terms) != len(m.terms) {
			t.Fatalf("%q -> %q -> %q: not the same match", text, canonical, again.String())
		}
		for i, term := range m.terms {
			if again.terms[i].key != term.key || again.terms[i].glob.String() != term.glob.String() {
				t.Fatalf("%q -> %q: term %d differs", text, canonical, i)
			}
		}
		msg := InboundMessage{Platform: platform, Room: room, ChatJID: room, Sender: platform, Verb: room}
		if m.Matches(msg) != again.Matches(msg) {
			t.Fatalf("%q and %q disagree on %+v", text, canonical, msg)
		}
	})
}

// FuzzMayList checks MayList against Decide: a call the rules allow means the
// tool is listed, and a listed tool comes with parameters the rules allow.
func FuzzMayList(f *testing.F) {
	f.Add("send_message(a=[xy],b=[xy])\n!send_message(a=x,b=x)\n!send_message(a=y,b=y)", "x", "y")
	f.Add("send_message(a=*)\n!send_message(a=*b)\n!send_message(a=a?)", "ab", "")
	f.Add("*\n!send_message(a=tg:*)", "tg:1", "b")
	f.Add("send_*(a=??)\n!send_message(a=?)\n!send_message(a=???*)", "xy", "z")
	f.Add("send_message(a=[a-c]*,b=*)\n!send_*(a=b*)\n!send_message(b=?)\nsend_reply", "c", "")
	f.Fuzz(func(t *testing.T, text, a, b string) {
		var rules Rules
		for _, line := range strings.Split(text, "\n") {
			if r, err := ParseRule(line); err == nil {
				rules = append(rules, r)
			}
		}
		if len(rules) > 8 {
			return
		}
		const tool = "send_message"
		w, ok, complete := rules.witness(tool)
		if !complete {
			return
		}
		calls := []map[string]any{{}, {"a": a}, {"b": b}, {"a": a, "b": b}}
		for _, r := range rules {
			call := map[string]any{"a": a}
			for _, p := range r.Params {
				if v, ok := p.Value.sample(); ok {
					call[p.Key] = v
				}
			}
			calls = append(calls, call)
		}
		for _, params := range calls {
			if d := rules.Decide(tool, params); d.Allowed && !ok {
				t.Fatalf("rules %q allow %v (%s) but MayList is false", text, params, d.Reason)
			}
		}
		if ok {
			params := make(map[string]any, len(w))
			for k, v := range w {
				params[k] = v
			}
			if d := rules.Decide(tool, params); !d.Allowed {
				t.Fatalf("rules %q: witness %q is refused: %s", text, w, d.Reason)
			}
		}
	})
}
