package policy

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrSyntax is wrapped by every *SyntaxError, for callers that only need to
// know the input was malformed (for example to answer 400).
var ErrSyntax = errors.New("ipc: syntax error")

// SyntaxError reports malformed grant-rule, route-match or glob text.
type SyntaxError struct {
	What   string // "grant rule", "route match" or "glob"
	Input  string
	Column int // 1-based, counted in characters
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s %q: column %d: %s", e.What, e.Input, e.Column, e.Msg)
}

func (e *SyntaxError) Unwrap() error { return ErrSyntax }

func column(s string, off int) int {
	if off > len(s) {
		off = len(s)
	}
	return utf8.RuneCountInString(s[:off]) + 1
}

func invalidUTF8At(s string) int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(s)
}

func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

func isIdentByte(c byte, first bool) bool {
	switch {
	case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		return true
	case '0' <= c && c <= '9':
		return !first
	}
	return false
}

// scanner walks rule or match text. Offsets are bytes; errors convert them to
// columns.
type scanner struct {
	what string
	in   string
	pos  int
}

func (s *scanner) errAt(off int, format string, args ...any) error {
	return &SyntaxError{What: s.what, Input: s.in, Column: column(s.in, off), Msg: fmt.Sprintf(format, args...)}
}

func (s *scanner) eof() bool { return s.pos >= len(s.in) }

func (s *scanner) peek() byte { return s.in[s.pos] }

// next describes the character at pos for error messages.
func (s *scanner) next() string {
	if s.eof() {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(s.in[s.pos:])
	return fmt.Sprintf("%q", r)
}

func (s *scanner) skipSpace() {
	for !s.eof() && isSpace(s.peek()) {
		s.pos++
	}
}

func (s *scanner) ident() string {
	start := s.pos
	for !s.eof() && isIdentByte(s.peek(), s.pos == start) {
		s.pos++
	}
	return s.in[start:s.pos]
}

// value reads a bare or double-quoted glob and compiles it. A bare value ends
// at whitespace or a byte for which stop is true; forbid lists bytes that may
// not appear unescaped in a bare value. A backslash always takes the next
// character with it, so the text between the delimiters is the glob pattern
// verbatim: one escaping layer serves both quoting and the glob. name is the
// parameter or key the value belongs to, for messages; folder makes the glob a
// folder glob.
func (s *scanner) value(name string, stop func(byte) bool, forbid string, folder bool) (Glob, error) {
	start := s.pos
	var pattern string
	patOff := start
	if !s.eof() && s.peek() == '"' {
		i := start + 1
		for {
			if i >= len(s.in) {
				return Glob{}, s.errAt(start, "unterminated quoted value for %s", name)
			}
			if s.in[i] == '\\' && i+1 < len(s.in) {
				_, size := utf8.DecodeRuneInString(s.in[i+1:])
				i += 1 + size
				continue
			}
			if s.in[i] == '"' {
				break
			}
			i++
		}
		pattern, patOff = s.in[start+1:i], start+1
		s.pos = i + 1
		if !s.eof() && !isSpace(s.peek()) && !stop(s.peek()) {
			return Glob{}, s.errAt(s.pos, "unexpected %s after the quoted value of %s", s.next(), name)
		}
	} else {
		for !s.eof() {
			c := s.peek()
			if c == '\\' && s.pos+1 < len(s.in) {
				_, size := utf8.DecodeRuneInString(s.in[s.pos+1:])
				s.pos += 1 + size
				continue
			}
			if isSpace(c) || stop(c) {
				break
			}
			if strings.IndexByte(forbid, c) >= 0 {
				return Glob{}, s.errAt(s.pos, "unexpected %q in the value of %s; quote the whole value (\"...\") or escape it with \\", c, name)
			}
			s.pos++
		}
		pattern = s.in[start:s.pos]
		if pattern == "" {
			return Glob{}, s.errAt(start, "missing value for %s (use \"\" to match the empty string)", name)
		}
	}
	g, gerr := compileGlob(pattern, folder)
	if gerr != nil {
		return Glob{}, s.errAt(patOff+gerr.off, "value of %s: %s", name, gerr.msg)
	}
	return g, nil
}

// quoteValue renders a glob pattern as a value that scans back to the same
// pattern: bare when it is non-empty and holds no whitespace or delimiter,
// otherwise between double quotes (the pattern never holds an unescaped '"').
func quoteValue(pattern string) string {
	if pattern != "" && !strings.ContainsAny(pattern, " \t\n\r\v\f\",()") {
		return pattern
	}
	return `"` + pattern + `"`
}
