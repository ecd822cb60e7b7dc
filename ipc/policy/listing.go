package policy

import (
	"encoding/binary"
	"slices"
	"unicode/utf8"
)

// Budgets of the listing search. Past them MayList answers true: listing a
// tool that no call can pass is harmless, because every call is re-checked
// by Decide, while hiding a callable tool would not be.
const (
	maxListNegations = 64      // later negations weighed against one positive rule
	maxListWork      = 1 << 20 // glob positions stepped per MayList call
	maxListMasks     = 4096    // combinations kept while joining parameters
)

// MayList reports whether some call of tool passes the rules, i.e. whether
// there are parameters for which Decide allows it. Such parameters exist
// exactly when some positive rule P for the tool can be matched while no
// negative rule after P matches. A minimal call gives P only the parameters
// it names, so later negations naming any other parameter never match it;
// each remaining negation N (its parameters a subset of P's; an unconditional
// one always) must be escaped by one parameter whose value matches P's glob
// and not N's. MayList settles this exactly: per parameter it explores the
// product of the glob automata to learn which sets of negations a value can
// escape, then looks for one value per parameter that together escape all.
//
// Examples: ["send_*", "!send_message"] hides send_message;
// ["send_message", "!send_message(chat_jid=tg:*)"] lists it (other chats);
// ["send_message(chat_jid=tg:*)", "!send_message(chat_jid=*)"] hides it;
// ["send_message(chat_jid=tg:*)", "!send_message(chat_jid=tg:-1*)"] lists it.
func (r Rules) MayList(tool string) bool {
	_, ok, _ := r.witness(tool)
	return ok
}

// witness looks for parameters that the rules allow for tool. complete is
// false when a budget ran out; ok is then true and params nil.
func (r Rules) witness(tool string) (params map[string]string, ok, complete bool) {
	var applicable Rules
	for _, rule := range r {
		if rule.Tool.Match(tool) {
			applicable = append(applicable, rule)
		}
	}
	complete = true
	work := maxListWork
	for i := len(applicable) - 1; i >= 0; i-- {
		pos := applicable[i]
		if pos.Deny {
			continue
		}
		var negs []Rule
		for _, n := range applicable[i+1:] {
			if n.Deny && paramsWithin(n, pos) {
				negs = append(negs, n)
			}
		}
		w, found, done := escapeAll(pos, negs, &work)
		if found && done {
			return w, true, true
		}
		complete = complete && done
	}
	if !complete {
		return nil, true, false
	}
	return nil, false, true
}

// paramsWithin reports whether every parameter n names is one p names.
func paramsWithin(n, p Rule) bool {
	for _, np := range n.Params {
		if !slices.ContainsFunc(p.Params, func(pp ParamGlob) bool { return pp.Key == np.Key }) {
			return false
		}
	}
	return true
}

// escapeAll looks for values of pos's parameters, each matching pos's glob,
// such that every negation in negs has a parameter whose value its glob does
// not match. work is the budget left, shared by the whole search.
func escapeAll(pos Rule, negs []Rule, work *int) (map[string]string, bool, bool) {
	for _, n := range negs {
		if len(n.Params) == 0 {
			return nil, false, true
		}
	}
	if len(negs) > maxListNegations {
		return nil, false, false
	}
	all := uint64(1)<<len(negs) - 1 // all ones when len(negs) is 64
	// A mask holds the negations not yet escaped; values[mask] is one choice
	// of values (in pos.Params order) reaching it.
	values := map[uint64][]string{all: nil}
	for _, p := range pos.Params {
		kinds, done := valueKinds(p, negs, work)
		if !done {
			return nil, false, false
		}
		next := make(map[uint64][]string)
		for mask, vals := range values {
			for kind, v := range kinds {
				m := mask & kind
				if _, seen := next[m]; !seen {
					next[m] = append(slices.Clip(vals), v)
				}
			}
			if len(next) > maxListMasks {
				return nil, false, false
			}
		}
		values = next
	}
	vals, ok := values[0]
	if !ok {
		return nil, false, true
	}
	w := make(map[string]string, len(pos.Params))
	for i, p := range pos.Params {
		w[p.Key] = vals[i]
	}
	return w, true, true
}

// valueKinds classifies the strings matching p.Value: each result key is the
// set of negations (bit i for negs[i]) such a value does NOT escape, with an
// example value. A negation that does not name p.Key is never escaped by it.
// It fails when the work budget runs out.
func valueKinds(p ParamGlob, negs []Rule, work *int) (map[uint64]string, bool) {
	var base uint64
	globs := []Glob{p.Value}
	var bits []uint64
	for i, n := range negs {
		j := slices.IndexFunc(n.Params, func(np ParamGlob) bool { return np.Key == p.Key })
		if j < 0 {
			base |= 1 << i
			continue
		}
		globs = append(globs, n.Params[j].Value)
		bits = append(bits, 1<<i)
	}
	if len(globs) == 1 {
		if *work -= len(p.Value.toks) + 1; *work < 0 {
			return nil, false
		}
		kinds := make(map[uint64]string, 1)
		if v, ok := p.Value.sample(); ok {
			kinds[base] = v
		}
		return kinds, true
	}
	alpha := alphabet(globs)
	width := 0
	for _, g := range globs {
		width += len(g.toks) + 1
	}
	type state struct {
		sets []globSet
		text []rune
	}
	start := state{sets: make([]globSet, len(globs))}
	for i, g := range globs {
		start.sets[i] = g.startSet()
	}
	kinds := make(map[uint64]string)
	seen := map[string]bool{stateKey(start.sets): true}
	queue := []state{start}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		if globs[0].accepts(st.sets[0]) {
			kind := base
			for i, b := range bits {
				if globs[i+1].accepts(st.sets[i+1]) {
					kind |= b
				}
			}
			if _, ok := kinds[kind]; !ok {
				kinds[kind] = string(st.text)
			}
		}
		for _, c := range alpha {
			if *work -= width; *work < 0 {
				return nil, false
			}
			first := globs[0].step(st.sets[0], c)
			if first.empty() {
				continue
			}
			sets := make([]globSet, len(globs))
			sets[0] = first
			for i := 1; i < len(globs); i++ {
				sets[i] = globs[i].step(st.sets[i], c)
			}
			key := stateKey(sets)
			if seen[key] {
				continue
			}
			seen[key] = true
			queue = append(queue, state{sets: sets, text: append(slices.Clip(st.text), c)})
		}
	}
	return kinds, true
}

// sample returns a string the glob matches; ok is false when it matches
// none (a class that excludes every character).
func (g Glob) sample() (string, bool) {
	var b []rune
	for _, t := range g.toks {
		switch t.kind {
		case globLit:
			b = append(b, t.r)
		case globAny:
			b = append(b, 'x')
		case globClass:
			chars := alphabet([]Glob{{toks: []globTok{t}}})
			i := slices.IndexFunc(chars, t.matches)
			if i < 0 {
				return "", false
			}
			b = append(b, chars[i])
		}
	}
	return string(b), true
}

// alphabet returns one character of every interval of characters that all
// the globs treat alike, skipping intervals of surrogates only.
func alphabet(globs []Glob) []rune {
	bounds := []rune{0, '/', '/' + 1} // a folder glob's wildcards treat '/' apart
	for _, g := range globs {
		for _, t := range g.toks {
			switch t.kind {
			case globLit:
				bounds = append(bounds, t.r, t.r+1)
			case globClass:
				for _, rg := range t.ranges {
					bounds = append(bounds, rg.lo, rg.hi+1)
				}
			}
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	var reps []rune
	for i, lo := range bounds {
		if lo > utf8.MaxRune {
			break
		}
		hi := rune(utf8.MaxRune)
		if i+1 < len(bounds) {
			hi = min(bounds[i+1]-1, utf8.MaxRune)
		}
		if 0xD800 <= lo && lo <= 0xDFFF {
			if hi < 0xE000 {
				continue
			}
			lo = 0xE000
		}
		reps = append(reps, lo)
	}
	return reps
}

// globSet is a set of positions in a glob's token list (an NFA state set).
type globSet []uint64

func (s globSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }

func (s globSet) add(i int) { s[i/64] |= 1 << (i % 64) }

func (s globSet) empty() bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

func (g Glob) newSet() globSet { return make(globSet, (len(g.toks)+64)/64) }

// closeStars adds the position after every star in s (a star may match nothing).
func (g Glob) closeStars(s globSet) {
	for i, t := range g.toks {
		if t.kind == globStar && s.has(i) {
			s.add(i + 1)
		}
	}
}

func (g Glob) startSet() globSet {
	s := g.newSet()
	s.add(0)
	g.closeStars(s)
	return s
}

func (g Glob) step(s globSet, c rune) globSet {
	next := g.newSet()
	g.stepInto(next, s, c)
	return next
}

// stepInto adds to next (empty) the positions s reaches by the character c.
func (g Glob) stepInto(next, s globSet, c rune) {
	for i, t := range g.toks {
		switch {
		case !s.has(i) || !t.matches(c):
		case t.kind == globStar:
			next.add(i)
		default:
			next.add(i + 1)
		}
	}
	g.closeStars(next)
}

func (g Glob) accepts(s globSet) bool { return s.has(len(g.toks)) }

func stateKey(sets []globSet) string {
	var b []byte
	for _, s := range sets {
		for _, w := range s {
			b = binary.LittleEndian.AppendUint64(b, w)
		}
	}
	return string(b)
}
