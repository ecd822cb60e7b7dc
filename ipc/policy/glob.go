package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Glob is a compiled shell-style pattern used by grant rules and route
// matches. A folder glob (the value of a grant rule's parameter that names a
// folder: folder, child, target) is a path pattern: '/' is matched only by
// itself or by "**", so "main/*" is main's children and "main/**" everything
// below main. In every other glob (tool names, other parameters, route
// matches) '/' is a character like any other and "**" is the same as "*".
//
//	pattern  matches
//	*        any sequence of characters, including the empty one; in a
//	         folder glob none of them '/' (within one segment)
//	**       any sequence of characters, including '/' (a subtree)
//	?        exactly one character (in a folder glob, not '/')
//	[abc]    one character of the set; ranges as in [a-z0-9]
//	[!abc]   one character not in the set; [^abc] is the same
//	\c       the character c itself (\*, \?, \[, \\, \", \,)
//
// Inside a class a '-' that cannot form a range (first or last) is literal,
// and ']' must be escaped; in a folder glob a class never matches '/'.
// Matching works on Unicode characters; invalid UTF-8 in the matched text
// counts as U+FFFD.
type Glob struct {
	pattern string
	toks    []globTok
	folder  bool // compiled as a folder glob
}

type globKind uint8

const (
	globLit globKind = iota
	globAny
	globStar
	globClass
)

type runeRange struct{ lo, hi rune }

type globTok struct {
	kind   globKind
	r      rune
	neg    bool
	ranges []runeRange
	// inSegment: the token never matches '/' (a folder glob's '*', '?' and
	// classes).
	inSegment bool
}

// globError locates a problem inside a pattern (byte offset) so the rule or
// match parser can report the column in its own input.
type globError struct {
	off int
	msg string
}

// compileGlob compiles pattern, as a folder glob when folder is true.
func compileGlob(pattern string, folder bool) (Glob, *globError) {
	if !utf8.ValidString(pattern) {
		return Glob{}, &globError{off: invalidUTF8At(pattern), msg: "invalid UTF-8"}
	}
	g := Glob{pattern: pattern, folder: folder}
	for i := 0; i < len(pattern); {
		c, size := utf8.DecodeRuneInString(pattern[i:])
		switch c {
		case '*':
			run := len(pattern[i:]) - len(strings.TrimLeft(pattern[i:], "*"))
			g.toks = append(g.toks, globTok{kind: globStar, inSegment: folder && run == 1})
			i += run
		case '?':
			g.toks = append(g.toks, globTok{kind: globAny, inSegment: folder})
			i += size
		case '[':
			tok, next, err := compileClass(pattern, i)
			if err != nil {
				return Glob{}, err
			}
			tok.inSegment = folder
			g.toks = append(g.toks, tok)
			i = next
		case '\\':
			r, next, err := escaped(pattern, i)
			if err != nil {
				return Glob{}, err
			}
			g.toks = append(g.toks, globTok{kind: globLit, r: r})
			i = next
		default:
			g.toks = append(g.toks, globTok{kind: globLit, r: c})
			i += size
		}
	}
	return g, nil
}

// escaped reads the character after the backslash at i.
func escaped(pattern string, i int) (rune, int, *globError) {
	if i+1 >= len(pattern) {
		return 0, 0, &globError{off: i, msg: "trailing backslash escapes nothing"}
	}
	r, size := utf8.DecodeRuneInString(pattern[i+1:])
	return r, i + 1 + size, nil
}

// compileClass reads the class starting at the '[' at start.
func compileClass(pattern string, start int) (globTok, int, *globError) {
	tok := globTok{kind: globClass}
	i := start + 1
	if i < len(pattern) && (pattern[i] == '!' || pattern[i] == '^') {
		tok.neg = true
		i++
	}
	// item reads one class character at j, escaped or plain.
	item := func(j int) (rune, int, *globError) {
		if pattern[j] == '\\' {
			return escaped(pattern, j)
		}
		r, size := utf8.DecodeRuneInString(pattern[j:])
		return r, j + size, nil
	}
	for {
		if i >= len(pattern) {
			return globTok{}, 0, &globError{off: start, msg: "unterminated character class"}
		}
		if pattern[i] == ']' {
			if len(tok.ranges) == 0 {
				return globTok{}, 0, &globError{off: start, msg: "empty character class (escape ']' as \\])"}
			}
			return tok, i + 1, nil
		}
		lo, next, err := item(i)
		if err != nil {
			return globTok{}, 0, err
		}
		hi := lo
		if next+1 < len(pattern) && pattern[next] == '-' && pattern[next+1] != ']' {
			hi, next, err = item(next + 1)
			if err != nil {
				return globTok{}, 0, err
			}
			if hi < lo {
				return globTok{}, 0, &globError{off: i, msg: fmt.Sprintf("character range %q-%q is reversed", lo, hi)}
			}
		}
		tok.ranges = append(tok.ranges, runeRange{lo, hi})
		i = next
	}
}

// String returns the pattern the glob was compiled from.
func (g Glob) String() string { return g.pattern }

// literal reports whether the pattern has no wildcards or classes.
func (g Glob) literal() bool {
	for _, t := range g.toks {
		if t.kind != globLit {
			return false
		}
	}
	return true
}

// matches reports whether the token matches the character r; a '*' matches
// the characters it may repeat.
func (t globTok) matches(r rune) bool {
	if t.inSegment && r == '/' {
		return false
	}
	switch t.kind {
	case globLit:
		return r == t.r
	case globAny, globStar:
		return true
	case globClass:
		in := false
		for _, rg := range t.ranges {
			if rg.lo <= r && r <= rg.hi {
				in = true
				break
			}
		}
		return in != t.neg
	}
	return false
}

// Match reports whether s matches the whole pattern. The cost is at most
// len(pattern)*len(s).
func (g Glob) Match(s string) bool {
	if g.folder {
		return g.matchSet(s)
	}
	return g.matchBacktrack(s)
}

// matchBacktrack matches a glob whose stars match every character: it
// backtracks only to the last '*', which is exact for such stars.
func (g Glob) matchBacktrack(s string) bool {
	ti, si := 0, 0
	starTok, starStr := -1, 0
	for si < len(s) {
		if ti < len(g.toks) {
			t := g.toks[ti]
			if t.kind == globStar {
				starTok, starStr = ti, si
				ti++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[si:])
			if t.matches(r) {
				ti++
				si += size
				continue
			}
		}
		if starTok < 0 {
			return false
		}
		_, size := utf8.DecodeRuneInString(s[starStr:])
		starStr += size
		ti, si = starTok+1, starStr
	}
	for ti < len(g.toks) && g.toks[ti].kind == globStar {
		ti++
	}
	return ti == len(g.toks)
}

// matchSet follows the set of positions the pattern can be at (the glob's
// NFA, as listing does), which is exact whatever the stars match.
func (g Glob) matchSet(s string) bool {
	cur, next := g.startSet(), g.newSet()
	for _, c := range s {
		clear(next)
		g.stepInto(next, cur, c)
		if next.empty() {
			return false
		}
		cur, next = next, cur
	}
	return g.accepts(cur)
}
