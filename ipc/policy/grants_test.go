package policy

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func mustRules(t testing.TB, texts ...string) Rules {
	t.Helper()
	var rules Rules
	for _, s := range texts {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatalf("ParseRule(%q): %v", s, err)
		}
		rules = append(rules, r)
	}
	return rules
}

func TestParseRule(t *testing.T) {
	tests := []struct {
		in        string
		canonical string
		deny      bool
		params    []string // key=pattern
	}{
		{"*", "*", false, nil},
		{"send_message", "send_message", false, nil},
		{"!send_*", "!send_*", true, nil},
		{"  ! send_message  ", "!send_message", true, nil},
		{"send_message(chat_jid=tg:*)", "send_message(chat_jid=tg:*)", false, []string{"chat_jid=tg:*"}},
		{"!send_message(chat_jid=tg:*)", "!send_message(chat_jid=tg:*)", true, []string{"chat_jid=tg:*"}},
		{"send_message ( chat_jid = tg:* , room=5 )", "send_message(chat_jid=tg:*,room=5)", false, []string{"chat_jid=tg:*", "room=5"}},
		{`send_message(chat_jid="tg:*")`, "send_message(chat_jid=tg:*)", false, []string{"chat_jid=tg:*"}},
		{`send_message(text="a,b (c)")`, `send_message(text="a,b (c)")`, false, []string{"text=a,b (c)"}},
		{`send_message(text="say \"hi\"")`, `send_message(text="say \"hi\"")`, false, []string{`text=say \"hi\"`}},
		{`send_message(text=a\,b)`, `send_message(text="a\,b")`, false, []string{`text=a\,b`}},
		{`send_message(text="")`, `send_message(text="")`, false, []string{"text="}},
		{`delegate_to_child(folder=main/research/*)`, `delegate_to_child(folder=main/research/*)`, false, []string{"folder=main/research/*"}},
		{`send_[a-z]*(n=1)`, `send_[a-z]*(n=1)`, false, []string{"n=1"}},
		{`send\_reply`, `send\_reply`, false, nil},
		{"get_*(_x9=?)", "get_*(_x9=?)", false, []string{"_x9=?"}},
	}
	for _, tt := range tests {
		r, err := ParseRule(tt.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tt.in, err)
			continue
		}
		if r.String() != tt.canonical || r.Deny != tt.deny {
			t.Errorf("ParseRule(%q) = %q deny=%v, want %q deny=%v", tt.in, r.String(), r.Deny, tt.canonical, tt.deny)
		}
		var params []string
		for _, p := range r.Params {
			params = append(params, p.Key+"="+p.Value.String())
		}
		if strings.Join(params, "|") != strings.Join(tt.params, "|") {
			t.Errorf("ParseRule(%q) params %q, want %q", tt.in, params, tt.params)
		}
		again, err := ParseRule(r.String())
		if err != nil || again.String() != r.String() {
			t.Errorf("re-parse of %q: %q, %v", r.String(), again.String(), err)
		}
	}
}

func TestParseRuleErrors(t *testing.T) {
	tests := []struct {
		in     string
		column int
		msg    string
	}{
		{"", 1, "missing tool name"},
		{"   ", 4, "missing tool name"},
		{"!", 2, "missing tool name"},
		{"(x=1)", 1, "missing tool name"},
		{"send_mesage", 1, `unknown tool "send_mesage"`},
		{"sned_*", 1, `tool pattern "sned_*" matches no tool`},
		{"send_message chat_jid=x", 14, "parameters go in parentheses"},
		{"send_message()", 13, "empty parameter list"},
		{"send_message(", 14, "expected a parameter name"},
		{"send_message(=x)", 14, "expected a parameter name"},
		{"send_message(9a=x)", 14, "expected a parameter name"},
		{"send_message(chat_jid)", 22, "expected '=' after parameter \"chat_jid\""},
		{"send_message(chat_jid=)", 23, `missing value for parameter "chat_jid"`},
		{"send_message(chat_jid=,a=b)", 23, "missing value"},
		{"send_message(chat_jid=x", 13, "unclosed parameter list"},
		{"send_message(chat_jid=x y)", 25, "expected ',' or ')', found 'y'"},
		{"send_message(a=1,a=2)", 18, `parameter "a" given twice`},
		{"send_message(a=f(x))", 17, `unexpected '(' in the value of parameter "a"`},
		{`send_message(a=x"y")`, 17, `unexpected '"'`},
		{`send_message(a="xy)`, 16, "unterminated quoted value"},
		{`send_message(a="x"y)`, 19, "after the quoted value"},
		{"send_message(a=[z-a])", 17, "reversed"},
		{`send_message(a="[x")`, 17, "unterminated character class"},
		{"send_message(a=1) x", 19, "unexpected 'x' after ')'"},
		{`send"message`, 5, `unexpected '"' in the tool pattern`},
		{"send_[", 6, "unterminated character class"},
		{"日本(a=\xff)", 6, "invalid UTF-8"},
	}
	for _, tt := range tests {
		_, err := ParseRule(tt.in)
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseRule(%q) = %v, want a *SyntaxError", tt.in, err)
			continue
		}
		if se.What != "grant rule" || se.Column != tt.column || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("ParseRule(%q): %v\nwant column %d containing %q", tt.in, err, tt.column, tt.msg)
		}
	}
}

func TestParseRules(t *testing.T) {
	rules, err := ParseRules(nil)
	if err != nil || len(rules) != 1 || rules[0].String() != "*" {
		t.Fatalf("ParseRules(nil) = %v, %v; want DefaultRules", rules, err)
	}
	rules, err = ParseRules([]string{"send_*", "!send_message"})
	if err != nil || len(rules) != 2 {
		t.Fatalf("ParseRules: %v, %v", rules, err)
	}
	_, err = ParseRules([]string{"*", "bogus"})
	if !errors.Is(err, ErrSyntax) || !strings.HasPrefix(err.Error(), "rule 1: ") {
		t.Errorf("ParseRules with a bad rule: %v", err)
	}
}

func TestParamString(t *testing.T) {
	tests := []struct {
		v    any
		want string
		ok   bool
	}{
		{nil, "", false},
		{"tg:-1", "tg:-1", true},
		{"", "", true},
		{true, "true", true},
		{false, "false", true},
		{float64(42), "42", true},
		{float64(-5075870332), "-5075870332", true},
		{1.5, "1.5", true},
		{1e21, "1000000000000000000000", true},
		{float32(0.25), "0.25", true},
		{7, "7", true},
		{int64(-3), "-3", true},
		{int32(3), "3", true},
		{uint(3), "3", true},
		{uint32(3), "3", true},
		{uint64(3), "3", true},
		{json.Number("9007199254740993"), "9007199254740993", true},
		{json.Number("1.50"), "1.5", true},
		{json.Number("1e2"), "100", true},
		{[]any{"a", 1.0}, `["a",1]`, true},
		{map[string]any{"b": 1.0, "a": true}, `{"a":true,"b":1}`, true},
		{func() {}, "", false},
	}
	for _, tt := range tests {
		got, ok := ParamString(tt.v)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParamString(%#v) = %q, %v; want %q, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestDecide(t *testing.T) {
	tg := map[string]any{"chat_jid": "tg:-100"}
	wa := map[string]any{"chat_jid": "wa:1"}
	tests := []struct {
		name    string
		rules   []string
		tool    string
		params  map[string]any
		allowed bool
		rule    string
		reason  string
	}{
		{"no rules deny", nil, "send_message", nil, false, "", "no grant rule allows send_message"},
		{"star", []string{"*"}, "send_message", nil, true, "*", "send_message allowed by rule *"},
		{"last wins deny", []string{"*", "!send_*"}, "send_message", nil, false, "!send_*", "send_message denied by rule !send_*"},
		{"last wins allow", []string{"!send_*", "send_message"}, "send_message", nil, true, "send_message", ""},
		{"other tool", []string{"send_message"}, "send_reply", nil, false, "", "no grant rule allows send_reply"},
		{"param deny matches", []string{"*", "!send_message(chat_jid=tg:*)"}, "send_message", tg, false, "!send_message(chat_jid=tg:*)", "send_message denied by rule !send_message(chat_jid=tg:*)"},
		{"param deny other chat", []string{"*", "!send_message(chat_jid=tg:*)"}, "send_message", wa, true, "*", ""},
		{"param deny missing param", []string{"*", "!send_message(chat_jid=tg:*)"}, "send_message", nil, true, "*", ""},
		{"param deny null param", []string{"*", "!send_message(chat_jid=*)"}, "send_message", map[string]any{"chat_jid": nil}, true, "*", ""},
		{"param allow matches", []string{"send_message(chat_jid=tg:*)"}, "send_message", tg, true, "send_message(chat_jid=tg:*)", ""},
		{"param allow missing", []string{"send_message(chat_jid=tg:*)"}, "send_message", nil, false, "", ""},
		{"all params needed", []string{"send_message(chat_jid=tg:*,room=1)"}, "send_message", tg, false, "", ""},
		{"all params given", []string{"send_message(chat_jid=tg:*,room=1)"}, "send_message", map[string]any{"chat_jid": "tg:x", "room": 1.0}, true, "send_message(chat_jid=tg:*,room=1)", ""},
		{"number form", []string{"send_message(room=-5075870332)"}, "send_message", map[string]any{"room": -5075870332.0}, true, "send_message(room=-5075870332)", ""},
		{"bool form", []string{"*", "!schedule_task(once=true)"}, "schedule_task", map[string]any{"once": true}, false, "!schedule_task(once=true)", ""},
		{"folder star is one segment", []string{"inject_message(folder=main/*)"}, "inject_message", map[string]any{"folder": "main/a/b"}, false, "", ""},
		{"folder star child", []string{"inject_message(folder=main/*)"}, "inject_message", map[string]any{"folder": "main/a"}, true, "inject_message(folder=main/*)", ""},
		{"folder double star subtree", []string{"inject_message(folder=main/**)"}, "inject_message", map[string]any{"folder": "main/a/b"}, true, "inject_message(folder=main/**)", ""},
		{"negative folder star leaves grandchildren", []string{"inject_message(folder=main/**)", "!inject_message(folder=main/*)"}, "inject_message", map[string]any{"folder": "main/a/b"}, true, "inject_message(folder=main/**)", ""},
		{"negative folder double star", []string{"inject_message(folder=main/**)", "!inject_message(folder=main/a/**)"}, "inject_message", map[string]any{"folder": "main/a/b/c"}, false, "!inject_message(folder=main/a/**)", ""},
		{"target and child are folders", []string{"add_route(target=main/*)", "delegate_to_child(child=main/*)"}, "add_route", map[string]any{"target": "main/a/b"}, false, "", ""},
		{"other parameters cross slash", []string{"send_document(path=media/*)"}, "send_document", map[string]any{"path": "media/a/b.pdf"}, true, "send_document(path=media/*)", ""},
		{"text star crosses slash", []string{"*", "!send_message(text=*secret*)"}, "send_message", map[string]any{"text": "see /etc/secret/x"}, false, "!send_message(text=*secret*)", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustRules(t, tt.rules...).Decide(tt.tool, tt.params)
			if d.Allowed != tt.allowed || d.Rule != tt.rule {
				t.Errorf("Decide = %+v, want allowed=%v rule=%q", d, tt.allowed, tt.rule)
			}
			if tt.reason != "" && d.Reason != tt.reason {
				t.Errorf("Reason = %q, want %q", d.Reason, tt.reason)
			}
		})
	}
}

// TestReaches: only a positive deciding rule that names the folder argument
// carries a call out of the caller's subtree.
func TestReaches(t *testing.T) {
	other := map[string]any{"folder": "other/desk", "text": "x"}
	tests := []struct {
		name  string
		rules []string
		param string
		want  bool
	}{
		{"the default names no folder", []string{"*"}, "folder", false},
		{"the tool alone names no folder", []string{"inject_message"}, "folder", false},
		{"a rule naming the folder", []string{"*", "inject_message(folder=other/*)"}, "folder", true},
		{"the exact folder", []string{"inject_message(folder=other/desk)"}, "folder", true},
		{"a glob over tools naming the folder", []string{"*(folder=other/*)"}, "folder", true},
		{"another folder", []string{"*", "inject_message(folder=other/x*)"}, "folder", false},
		{"a later * decides", []string{"inject_message(folder=other/*)", "*"}, "folder", false},
		{"a later negation decides", []string{"inject_message(folder=other/*)", "!inject_message(folder=other/desk)"}, "folder", false},
		{"a negation of another folder", []string{"inject_message(folder=other/*)", "!inject_message(folder=other/private)"}, "folder", true},
		{"a rule naming another parameter", []string{"inject_message(text=x)"}, "folder", false},
		{"the parameter asked for", []string{"inject_message(folder=other/*)"}, "target", false},
		{"no rules", nil, "folder", false},
	}
	for _, tt := range tests {
		if got := mustRules(t, tt.rules...).Reaches("inject_message", other, tt.param); got != tt.want {
			t.Errorf("%s: Reaches(%v) = %v, want %v", tt.name, tt.rules, got, tt.want)
		}
	}
}

func TestMayList(t *testing.T) {
	tests := []struct {
		name  string
		rules []string
		tool  string
		want  bool
	}{
		{"no rules", nil, "send_message", false},
		{"star", []string{"*"}, "send_message", true},
		{"other tool only", []string{"send_reply"}, "send_message", false},
		{"negated after", []string{"send_*", "!send_message"}, "send_message", false},
		{"negated sibling", []string{"send_*", "!send_message"}, "send_reply", true},
		{"negated before", []string{"!send_message", "send_*"}, "send_message", true},
		{"only negations", []string{"!send_message(chat_jid=x)"}, "send_message", false},
		{"narrow negation", []string{"send_message", "!send_message(chat_jid=tg:*)"}, "send_message", true},
		{"narrow grant", []string{"send_message(chat_jid=tg:*)"}, "send_message", true},
		{"grant covered by wider negation", []string{"send_message(chat_jid=tg:*)", "!send_message(chat_jid=*)"}, "send_message", false},
		{"grant covered by equal negation", []string{"send_message(chat_jid=tg:*)", "!send_message(chat_jid=tg:*)"}, "send_message", false},
		{"grant partly negated", []string{"send_message(chat_jid=tg:*)", "!send_message(chat_jid=tg:-1*)"}, "send_message", true},
		{"grant covered by two negations", []string{"send_message(n=[ab])", "!send_message(n=a)", "!send_message(n=b)"}, "send_message", false},
		{"grant escapes two negations", []string{"send_message(n=[abc])", "!send_message(n=a)", "!send_message(n=b)"}, "send_message", true},
		{"negation on other param", []string{"send_message(chat_jid=tg:*)", "!send_message(room=*)"}, "send_message", true},
		{"negation needs both params", []string{"send_message(a=*,b=*)", "!send_message(a=*)", "!send_message(b=x)"}, "send_message", false},
		{"two params escape", []string{"send_message(a=*,b=*)", "!send_message(a=x)", "!send_message(b=y)"}, "send_message", true},
		{"crossed negations", []string{"send_message(a=[xy],b=[xy])", "!send_message(a=x,b=x)", "!send_message(a=y,b=y)", "!send_message(a=x,b=y)"}, "send_message", true},
		{"crossed negations all", []string{"send_message(a=[xy],b=[xy])", "!send_message(a=x,b=x)", "!send_message(a=y,b=y)", "!send_message(a=x,b=y)", "!send_message(a=y,b=x)"}, "send_message", false},
		{"later grant rescues", []string{"send_message(chat_jid=tg:*)", "!send_message", "send_message(room=1)"}, "send_message", true},
		{"earlier grant shadowed, later one fine", []string{"send_message", "!send_*", "send_message(x=1)", "!send_message(x=2)"}, "send_message", true},
		{"grant matching nothing", []string{"send_message(a=[!\x00-\U0010FFFF])"}, "send_message", false},
		{"literal star value", []string{`send_message(a=\*)`, "!send_message(a=?*?)"}, "send_message", true},
		{"length pins", []string{"send_message(a=??)", "!send_message(a=?)", "!send_message(a=???*)"}, "send_message", true},
		{"length pins covered", []string{"send_message(a=??)", "!send_message(a=?)", "!send_message(a=?*)"}, "send_message", false},
		{"unicode class", []string{"send_message(a=[α-ω])", "!send_message(a=[α-ψ])"}, "send_message", true},
		{"suffix and prefix", []string{"send_message(a=a*)", "!send_message(a=*b)", "!send_message(a=a)"}, "send_message", true},
		{"folder subtree less children", []string{"inject_message(folder=main/**)", "!inject_message(folder=main/*)"}, "inject_message", true},
		{"folder children less subtree", []string{"inject_message(folder=main/*)", "!inject_message(folder=main/**)"}, "inject_message", false},
		{"folder children less two levels", []string{"inject_message(folder=main/*)", "!inject_message(folder=main/*/*)"}, "inject_message", true},
		{"folder one segment, any class", []string{"inject_message(folder=main[!x]a)", "!inject_message(folder=main?a)"}, "inject_message", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := mustRules(t, tt.rules...)
			w, ok, complete := rules.witness(tt.tool)
			if ok != tt.want || !complete {
				t.Fatalf("witness = %v, %v, %v; want %v complete", w, ok, complete, tt.want)
			}
			if rules.MayList(tt.tool) != tt.want {
				t.Errorf("MayList = %v", !tt.want)
			}
			if ok {
				params := make(map[string]any, len(w))
				for k, v := range w {
					params[k] = v
				}
				if d := rules.Decide(tt.tool, params); !d.Allowed {
					t.Errorf("witness %q is not allowed: %s", w, d.Reason)
				}
			}
		})
	}
}

func TestMayListBudget(t *testing.T) {
	texts := []string{"send_message(a=*)"}
	for i := 0; i < maxListNegations+1; i++ {
		texts = append(texts, "!send_message(a=x"+strings.Repeat("y", i)+")")
	}
	_, ok, complete := mustRules(t, texts...).witness("send_message")
	if !ok || complete {
		t.Errorf("too many negations: ok=%v complete=%v, want the conservative true", ok, complete)
	}
}

func TestCheckCall(t *testing.T) {
	tests := []struct {
		name   string
		tool   string
		tier   int
		rules  []string
		params map[string]any
		byTier bool
		rule   string
		msg    string // "" when allowed
	}{
		{"root default", "spawn_group", 0, []string{"*"}, nil, false, "", ""},
		{"unknown tool", "rm_rf", 0, []string{"*"}, nil, false, "", `unknown tool "rm_rf"`},
		{"tier refuses", "send_message", 3, []string{"*"}, nil, true, "", "tier 3 (worker) may not call send_message: it is limited to tiers 0-2"},
		{"tier refuses root-only", "inject_message", 1, []string{"*"}, nil, true, "", "tier 1 (world) may not call inject_message: it is limited to tier 0"},
		{"tier before rules", "spawn_group", 2, []string{"!*"}, nil, true, "", "tier 2 (agent)"},
		{"rule refuses", "send_message", 2, []string{"*", "!send_message(chat_jid=tg:*)"}, map[string]any{"chat_jid": "tg:1"}, false, "!send_message(chat_jid=tg:*)", "send_message denied by rule !send_message(chat_jid=tg:*)"},
		{"rule allows other chat", "send_message", 2, []string{"*", "!send_message(chat_jid=tg:*)"}, map[string]any{"chat_jid": "wa:1"}, false, "", ""},
		{"no rule", "send_reply", 4, []string{"send_message"}, nil, false, "", "no grant rule allows send_reply"},
		{"worker reply", "send_reply", 4, []string{"*"}, nil, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckCall(tt.tool, tt.tier, mustRules(t, tt.rules...), tt.params)
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("CheckCall: %v", err)
				}
				return
			}
			var de *DeniedError
			if !errors.As(err, &de) || !errors.Is(err, ErrDenied) {
				t.Fatalf("CheckCall = %v, want a *DeniedError", err)
			}
			if de.ByTier != tt.byTier || de.Rule != tt.rule || !strings.Contains(de.Error(), tt.msg) || de.Tool != tt.tool || de.Tier != tt.tier {
				t.Errorf("CheckCall = %+v, want byTier=%v rule=%q message containing %q", de, tt.byTier, tt.rule, tt.msg)
			}
		})
	}
}

// TestAllowedMatrix checks listing for every tool at every tier, with the
// default grants and with narrowing ones.
func TestAllowedMatrix(t *testing.T) {
	grants := map[string]struct {
		rules []string
		drop  map[string]bool // tools these rules hide whatever the tier
	}{
		"default":          {nil, nil},
		"no sending":       {[]string{"*", "!send_*"}, map[string]bool{"send_message": true, "send_reply": true, "send_document": true}},
		"narrowed sending": {[]string{"*", "!send_message(chat_jid=tg:*)"}, nil},
		"only reply":       {[]string{"send_reply"}, nil},
		"locked out":       {[]string{"!*"}, nil},
	}
	for name, g := range grants {
		rules, err := ParseRules(g.rules)
		if err != nil {
			t.Fatal(err)
		}
		for tier := 0; tier <= 4; tier++ {
			for _, tool := range Tools() {
				want := TierAllows(tool, tier) && !g.drop[tool]
				switch name {
				case "only reply":
					want = want && tool == "send_reply"
				case "locked out":
					want = false
				}
				if got := Allowed(tool, tier, rules); got != want {
					t.Errorf("%s: Allowed(%s, %d) = %v, want %v", name, tool, tier, got, want)
				}
			}
		}
	}
}

// TestMayListRandom compares MayList with an exhaustive search over short
// values on random rule sets: an allowed call means the tool is listed, and a
// listed tool has a witness the rules allow.
func TestMayListRandom(t *testing.T) {
	globs := []string{"*", "x", "y", "?", "??", "x*", "*y", "[xy]", "[!x]", "x?", "?*?", `""`, "z*",
		"**", "x/*", "*/*", "x/**", "*/y", "?/?", "[!x]**", "*/**"}
	keys := []string{"a", "folder"}
	values := []string{""}
	for n, prev := 0, []string{""}; n < 3; n++ {
		var next []string
		for _, p := range prev {
			for _, c := range []string{"x", "y", "/"} {
				next = append(next, p+c)
			}
		}
		values = append(values, next...)
		prev = next
	}
	var calls []map[string]any
	for _, a := range append([]string{"<absent>"}, values...) {
		for _, b := range append([]string{"<absent>"}, values...) {
			call := map[string]any{}
			if a != "<absent>" {
				call["a"] = a
			}
			if b != "<absent>" {
				call["folder"] = b
			}
			calls = append(calls, call)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 400 {
		var texts []string
		for range 1 + rng.IntN(5) {
			text := "send_message"
			if rng.IntN(3) == 0 {
				text = "send_*"
			}
			var params []string
			for _, k := range keys {
				if rng.IntN(2) == 0 {
					params = append(params, k+"="+globs[rng.IntN(len(globs))])
				}
			}
			if len(params) > 0 {
				text += "(" + strings.Join(params, ",") + ")"
			}
			if rng.IntN(2) == 0 {
				text = "!" + text
			}
			texts = append(texts, text)
		}
		rules := mustRules(t, texts...)
		w, ok, complete := rules.witness("send_message")
		if !complete {
			t.Fatalf("%q: search incomplete", texts)
		}
		if ok {
			call := map[string]any{}
			for k, v := range w {
				call[k] = v
			}
			if !rules.Decide("send_message", call).Allowed {
				t.Fatalf("%q: witness %q refused", texts, w)
			}
			continue
		}
		for _, call := range calls {
			if rules.Decide("send_message", call).Allowed {
				t.Fatalf("%q: MayList is false but %v is allowed", texts, call)
			}
		}
	}
}
