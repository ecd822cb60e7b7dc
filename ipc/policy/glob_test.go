package policy

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pattern string
		yes     []string
		no      []string
	}{
		{"", []string{""}, []string{"a"}},
		{"*", []string{"", "a", "a/b/c", "tg:-1"}, nil},
		{"**", []string{"", "abc"}, nil},
		{"main/*", []string{"main/", "main/a", "main/a/b"}, []string{"main", "mainx/a"}},
		{"tg:*", []string{"tg:", "tg:-100123"}, []string{"wa:1", "xtg:1"}},
		{"send_*", []string{"send_message", "send_reply"}, []string{"resend_message"}},
		{"?", []string{"a", "é", "/"}, []string{"", "ab"}},
		{"a?c", []string{"abc", "a/c"}, []string{"ac", "abbc"}},
		{"*a*b*", []string{"ab", "xaxbx", "aab"}, []string{"ba", "b"}},
		{"[abc]", []string{"a", "c"}, []string{"d", ""}},
		{"[a-c0-9]x", []string{"bx", "7x"}, []string{"dx", "x"}},
		{"[!a-c]", []string{"d", "/"}, []string{"a", "b"}},
		{"[^a-c]", []string{"d"}, []string{"c"}},
		{"[-a]", []string{"-", "a"}, []string{"b"}},
		{"[a-]", []string{"-", "a"}, []string{"b"}},
		{`[\]]`, []string{"]"}, []string{`\`}},
		{`\*`, []string{"*"}, []string{"a"}},
		{`a\,b`, []string{"a,b"}, []string{`a\,b`}},
		{`\\`, []string{`\`}, []string{`\\`}},
		{"-5075870332", []string{"-5075870332"}, []string{"5075870332"}},
		{"日本*", []string{"日本語"}, []string{"日"}},
		{"a*", []string{"a\xff"}, []string{"\xffa"}},
		{"?", []string{"\xff"}, nil},
	}
	for _, tt := range tests {
		g, err := CompileGlob(tt.pattern)
		if err != nil {
			t.Fatalf("CompileGlob(%q): %v", tt.pattern, err)
		}
		if g.String() != tt.pattern {
			t.Errorf("String() = %q, want %q", g.String(), tt.pattern)
		}
		for _, s := range tt.yes {
			if !g.Match(s) {
				t.Errorf("%q does not match %q", tt.pattern, s)
			}
		}
		for _, s := range tt.no {
			if g.Match(s) {
				t.Errorf("%q matches %q", tt.pattern, s)
			}
		}
	}
}

// A folder glob's '*', '?' and classes stay within one segment; "**" crosses
// '/'. Elsewhere '/' is a character like any other and "**" is "*".
func TestFolderGlobMatch(t *testing.T) {
	tests := []struct {
		pattern string
		folder  bool
		yes     []string
		no      []string
	}{
		{"main/*", true, []string{"main/", "main/a", "main/research"}, []string{"main", "main/a/b", "mainx/a"}},
		{"main/**", true, []string{"main/", "main/a", "main/a/b/c"}, []string{"main", "mainx/a"}},
		{"main/*/*", true, []string{"main/a/b"}, []string{"main/a", "main/a/b/c"}},
		{"main*", true, []string{"main", "mainx"}, []string{"main/a"}},
		{"main**", true, []string{"main", "mainx", "main/a/b"}, []string{"mai"}},
		{"*", true, []string{"", "main", "lab"}, []string{"main/a", "/"}},
		{"**", true, []string{"", "main", "main/a/b", "/"}, nil},
		{"***", true, []string{"main/a/b"}, nil},
		{"*/research", true, []string{"main/research", "other/research"}, []string{"main/a/research", "research"}},
		{"**/research", true, []string{"main/research", "main/a/research"}, []string{"research"}},
		{"main/?", true, []string{"main/a"}, []string{"main//", "main/ab"}},
		{"main[!a]x", true, []string{"mainbx"}, []string{"main/x", "mainax"}},
		{"main[+-0]x", true, []string{"main+x", "main0x"}, []string{"main/x"}},
		{`main\/*`, true, []string{"main/a"}, []string{"main/a/b"}},
		{"main/*", false, []string{"main/a", "main/a/b"}, []string{"main"}},
		{"main/**", false, []string{"main/a", "main/a/b"}, []string{"main"}},
		{"?", false, []string{"/"}, nil},
		{"[!a]", false, []string{"/"}, nil},
	}
	for _, tt := range tests {
		compile := CompileGlob
		if tt.folder {
			compile = CompileFolderGlob
		}
		g, err := compile(tt.pattern)
		if err != nil {
			t.Fatalf("compile %q (folder %v): %v", tt.pattern, tt.folder, err)
		}
		for _, s := range tt.yes {
			if !g.Match(s) {
				t.Errorf("%q (folder %v) does not match %q", tt.pattern, tt.folder, s)
			}
		}
		for _, s := range tt.no {
			if g.Match(s) {
				t.Errorf("%q (folder %v) matches %q", tt.pattern, tt.folder, s)
			}
		}
	}
}

func TestCompileGlobErrors(t *testing.T) {
	tests := []struct {
		pattern string
		column  int
		msg     string
	}{
		{`ab\`, 3, "trailing backslash"},
		{"a[bc", 2, "unterminated character class"},
		{"[]", 1, "empty character class"},
		{"[!]", 1, "empty character class"},
		{"x[z-a]", 3, "reversed"},
		{"a\xffb", 2, "invalid UTF-8"},
		{`[a\`, 3, "trailing backslash"},
	}
	for _, tt := range tests {
		_, err := CompileGlob(tt.pattern)
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) {
			t.Errorf("CompileGlob(%q) = %v, want a *SyntaxError", tt.pattern, err)
			continue
		}
		if se.Column != tt.column || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("CompileGlob(%q): column %d %q, want column %d containing %q", tt.pattern, se.Column, se.Msg, tt.column, tt.msg)
		}
	}
}

// globRegexp translates compiled tokens into a regular expression, a
// reference implementation for the matcher.
func globRegexp(g Glob) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	for _, t := range g.toks {
		switch t.kind {
		case globLit:
			b.WriteString(regexp.QuoteMeta(string(t.r)))
		case globAny:
			b.WriteString(map[bool]string{false: ".", true: "[^/]"}[t.inSegment])
		case globStar:
			b.WriteString(map[bool]string{false: ".*", true: "[^/]*"}[t.inSegment])
		case globClass:
			// Within a segment a class is the class less '/'.
			var parts []runeRange
			for _, rg := range t.ranges {
				parts = append(parts, splitSlash(rg, t.inSegment && !t.neg)...)
			}
			switch {
			case t.neg && t.inSegment:
				parts = append(parts, runeRange{'/', '/'})
			case len(parts) == 0: // only '/', which a segment never holds
				b.WriteString(`[^\x{0}-\x{10ffff}]`)
				continue
			}
			b.WriteString("[")
			if t.neg {
				b.WriteString("^")
			}
			for _, rg := range parts {
				fmt.Fprintf(&b, `\x{%x}-\x{%x}`, rg.lo, rg.hi)
			}
			b.WriteString("]")
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// splitSlash returns rg without '/' when cut is true, else rg.
func splitSlash(rg runeRange, cut bool) []runeRange {
	if !cut || rg.lo > '/' || rg.hi < '/' {
		return []runeRange{rg}
	}
	var out []runeRange
	if rg.lo < '/' {
		out = append(out, runeRange{rg.lo, '/' - 1})
	}
	if rg.hi > '/' {
		out = append(out, runeRange{'/' + 1, rg.hi})
	}
	return out
}

func FuzzGlobMatch(f *testing.F) {
	f.Add("*a?[b-d]*", "xxaqcyy")
	f.Add(`[!\]]*\*`, "a*")
	f.Add("**?*", "日本")
	f.Add("a*b*c", "aXbYbc")
	f.Add("main/*/[!/]?**", "main/a/bc/d")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		for _, compile := range []func(string) (Glob, error){CompileGlob, CompileFolderGlob} {
			g, err := compile(pattern)
			if err != nil {
				return
			}
			if len(pattern) > 64 || len(s) > 256 {
				return
			}
			if got, want := g.Match(s), globRegexp(g).MatchString(s); got != want {
				t.Fatalf("%q.Match(%q) = %v, regexp says %v", pattern, s, got, want)
			}
		}
	})
}
