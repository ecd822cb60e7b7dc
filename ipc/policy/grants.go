package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrDenied is wrapped by every *DeniedError.
var ErrDenied = errors.New("ipc: tool call denied")

// DeniedError says why a tool call was refused: by the tier table (ByTier),
// by a negative rule (Rule), or because no rule allowed it (Rule == "").
type DeniedError struct {
	Tool   string
	Tier   int
	ByTier bool
	Rule   string
	Reason string
}

func (e *DeniedError) Error() string { return e.Reason }

func (e *DeniedError) Unwrap() error { return ErrDenied }

// Rule is one parsed grant rule: [!]tool[(param=glob,...)].
type Rule struct {
	Deny   bool
	Tool   Glob
	Params []ParamGlob
}

// ParamGlob narrows a rule to calls whose parameter Key has a string form
// matching Value.
type ParamGlob struct {
	Key   string
	Value Glob
}

// Rules is a group's ordered rule list; the last matching rule decides.
type Rules []Rule

// Decision is the outcome of Rules.Decide.
type Decision struct {
	Allowed bool
	Rule    string // canonical text of the deciding rule; "" for the default deny
	Reason  string // for the tool error, e.g. "send_message denied by rule !send_*"
}

// DefaultRules are the grants of a group that has none stored: "*", so the
// tier table alone decides. A group is locked out with the explicit rule "!*".
func DefaultRules() Rules {
	return Rules{{Tool: Glob{pattern: "*", toks: []globTok{{kind: globStar}}}}}
}

// ParseRules parses a group's stored rule list in order. An empty list yields
// DefaultRules. The error names the index of the bad rule.
func ParseRules(list []string) (Rules, error) {
	if len(list) == 0 {
		return DefaultRules(), nil
	}
	rules := make(Rules, 0, len(list))
	for i, s := range list {
		r, err := ParseRule(s)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// ParseRule parses one grant rule:
//
//	rule  = ["!"] tool [ "(" param { "," param } ")" ]
//	param = name "=" value
//
// tool is a glob over tool names that must match at least one known tool (a
// plain name must be a tool: typos are errors, not silent no-ops). name is
// [A-Za-z_][A-Za-z0-9_]* and may appear once per rule. value is a glob (a
// folder glob for folder, child and target), bare
// (ending at ',', ')' or whitespace; '(' and '"' must be escaped) or quoted
// "..." (where \" is a quote). Whitespace between tokens is ignored. Errors
// name the column and the problem.
func ParseRule(text string) (Rule, error) {
	s := &scanner{what: "grant rule", in: text}
	if !utf8.ValidString(text) {
		return Rule{}, s.errAt(invalidUTF8At(text), "invalid UTF-8")
	}
	var r Rule
	s.skipSpace()
	if !s.eof() && s.peek() == '!' {
		r.Deny = true
		s.pos++
		s.skipSpace()
	}
	toolStart := s.pos
	for !s.eof() && !isSpace(s.peek()) && s.peek() != '(' {
		if s.peek() == '\\' && s.pos+1 < len(s.in) {
			_, size := utf8.DecodeRuneInString(s.in[s.pos+1:])
			s.pos += 1 + size
			continue
		}
		if s.peek() == '"' {
			return Rule{}, s.errAt(s.pos, "unexpected '\"' in the tool pattern")
		}
		s.pos++
	}
	pattern := s.in[toolStart:s.pos]
	if pattern == "" {
		return Rule{}, s.errAt(toolStart, "missing tool name, found %s", s.next())
	}
	tool, gerr := compileGlob(pattern, false)
	if gerr != nil {
		return Rule{}, s.errAt(toolStart+gerr.off, "tool pattern: %s", gerr.msg)
	}
	if !matchesAnyTool(tool) {
		if tool.literal() {
			return Rule{}, s.errAt(toolStart, "unknown tool %q", pattern)
		}
		return Rule{}, s.errAt(toolStart, "tool pattern %q matches no tool", pattern)
	}
	r.Tool = tool
	s.skipSpace()
	if s.eof() {
		return r, nil
	}
	if s.peek() != '(' {
		return Rule{}, s.errAt(s.pos, "unexpected %s after the tool pattern; parameters go in parentheses", s.next())
	}
	open := s.pos
	s.pos++
	s.skipSpace()
	if !s.eof() && s.peek() == ')' {
		return Rule{}, s.errAt(open, "empty parameter list; drop the parentheses")
	}
	stop := func(c byte) bool { return c == ',' || c == ')' }
	for {
		s.skipSpace()
		keyStart := s.pos
		key := s.ident()
		if key == "" {
			return Rule{}, s.errAt(s.pos, "expected a parameter name, found %s", s.next())
		}
		for _, p := range r.Params {
			if p.Key == key {
				return Rule{}, s.errAt(keyStart, "parameter %q given twice", key)
			}
		}
		s.skipSpace()
		if s.eof() || s.peek() != '=' {
			return Rule{}, s.errAt(s.pos, "expected '=' after parameter %q, found %s", key, s.next())
		}
		s.pos++
		s.skipSpace()
		val, err := s.value("parameter "+strconv.Quote(key), stop, `("`, folderParams[key])
		if err != nil {
			return Rule{}, err
		}
		r.Params = append(r.Params, ParamGlob{Key: key, Value: val})
		s.skipSpace()
		if s.eof() {
			return Rule{}, s.errAt(open, "unclosed parameter list")
		}
		if s.peek() == ',' {
			s.pos++
			continue
		}
		if s.peek() != ')' {
			return Rule{}, s.errAt(s.pos, "expected ',' or ')', found %s", s.next())
		}
		s.pos++
		break
	}
	s.skipSpace()
	if !s.eof() {
		return Rule{}, s.errAt(s.pos, "unexpected %s after ')'", s.next())
	}
	return r, nil
}

func matchesAnyTool(g Glob) bool {
	for name := range maxTier {
		if g.Match(name) {
			return true
		}
	}
	return false
}

// String renders the rule canonically; ParseRule of it gives the same rule.
func (r Rule) String() string {
	var b strings.Builder
	if r.Deny {
		b.WriteByte('!')
	}
	b.WriteString(r.Tool.pattern)
	if len(r.Params) > 0 {
		b.WriteByte('(')
		for i, p := range r.Params {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(p.Key)
			b.WriteByte('=')
			b.WriteString(quoteValue(p.Value.pattern))
		}
		b.WriteByte(')')
	}
	return b.String()
}

// matches reports whether the rule applies to a call of tool with params:
// the tool glob matches and every named parameter is present with a string
// form matching its glob.
func (r Rule) matches(tool string, params map[string]any) bool {
	if !r.Tool.Match(tool) {
		return false
	}
	for _, p := range r.Params {
		v, ok := ParamString(params[p.Key])
		if !ok || !p.Value.Match(v) {
			return false
		}
	}
	return true
}

// ParamString is the text a parameter glob is matched against: strings as
// they are, booleans "true"/"false", numbers in plain decimal without
// exponent or trailing zeros (42, -5075870332, 1.5), arrays and objects as
// compact JSON with sorted keys. A missing parameter and JSON null have no
// string form (ok is false), so a rule naming them does not match.
func ParamString(v any) (s string, ok bool) {
	switch v := v.(type) {
	case nil:
		return "", false
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32), true
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case int32:
		return strconv.FormatInt(int64(v), 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case uint32:
		return strconv.FormatUint(uint64(v), 10), true
	case uint:
		return strconv.FormatUint(uint64(v), 10), true
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return strconv.FormatInt(n, 10), true
		}
		if f, err := v.Float64(); err == nil {
			return strconv.FormatFloat(f, 'f', -1, 64), true
		}
		return v.String(), true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// Decide applies the rules to a call: the last matching rule wins and no
// match denies.
func (r Rules) Decide(tool string, params map[string]any) Decision {
	i := r.decider(tool, params)
	if i < 0 {
		return Decision{Reason: "no grant rule allows " + tool}
	}
	text := r[i].String()
	if r[i].Deny {
		return Decision{Rule: text, Reason: fmt.Sprintf("%s denied by rule %s", tool, text)}
	}
	return Decision{Allowed: true, Rule: text, Reason: fmt.Sprintf("%s allowed by rule %s", tool, text)}
}

// decider returns the index of the rule that decides a call (the last one
// matching it), or -1 when none matches.
func (r Rules) decider(tool string, params map[string]any) int {
	for i := len(r) - 1; i >= 0; i-- {
		if r[i].matches(tool, params) {
			return i
		}
	}
	return -1
}

// Reaches reports whether the rules carry a call of tool with params to the
// folder in its parameter param although that folder lies outside the
// caller's subtree: the rule deciding the call allows it and names param, so
// its glob matched that very folder. A rule that does not name the folder,
// such as "*" or "inject_message", never reaches outside the subtree; the
// operator crosses trees only by writing the folder into a rule, as in
// inject_message(folder=other/**).
func (r Rules) Reaches(tool string, params map[string]any, param string) bool {
	i := r.decider(tool, params)
	return i >= 0 && !r[i].Deny && slices.ContainsFunc(r[i].Params, func(p ParamGlob) bool { return p.Key == param })
}

// Allowed reports whether tool belongs in the tools/list of a group with this
// tier and rules: its tier allows it and some call could pass the rules.
func Allowed(tool string, tier int, rules Rules) bool {
	return TierAllows(tool, tier) && rules.MayList(tool)
}

// CheckCall decides one tools/call. It returns nil or a *DeniedError
// (wrapping ErrDenied) whose message says whether the tier or which rule
// refused the call. The tier is checked first. params must be the arguments
// the tool will act on, after defaults are filled in.
func CheckCall(tool string, tier int, rules Rules, params map[string]any) error {
	if _, ok := maxTier[tool]; !ok {
		return &DeniedError{Tool: tool, Tier: tier, Reason: fmt.Sprintf("unknown tool %q", tool)}
	}
	if !TierAllows(tool, tier) {
		return &DeniedError{Tool: tool, Tier: tier, ByTier: true, Reason: TierRefusal(tool, tier)}
	}
	d := rules.Decide(tool, params)
	if d.Allowed {
		return nil
	}
	return &DeniedError{Tool: tool, Tier: tier, Rule: d.Rule, Reason: d.Reason}
}
