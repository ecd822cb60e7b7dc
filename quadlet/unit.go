package quadlet

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on the input. MaxLineLen is systemd's LONG_LINE_MAX (1 MiB, systemd.syntax(7));
// the others only keep a hostile file from costing much memory.
const (
	MaxLineLen  = 1 << 20
	MaxFileSize = 2 << 20
	MaxLines    = 1 << 16
)

// Sentinel errors. Every error this package returns wraps exactly one of them.
var (
	// ErrSyntax: the text is not a well-formed unit file. The message names the line.
	ErrSyntax = errors.New("unit file syntax")
	// ErrInvalid: a well-formed unit that Podman's generator (or systemd) would refuse
	// or silently change, or a value that cannot be written as unit file text.
	ErrInvalid = errors.New("invalid unit")
	// ErrUnitContext: the meaning depends on things only the generator or the unit's
	// manager knows: systemd specifiers and environment variables, other Quadlet units,
	// the unit file's own path or name.
	ErrUnitContext = errors.New("needs the unit's context")
)

// File is a unit file as a list of logical lines in file order. Repeated sections are
// kept where they are; looking a key up goes through every section of that name in
// order, which is what Podman's parser does when it merges them.
type File struct {
	Lines []Line
}

// Line is one logical line: a section header, a setting, a comment or a blank line.
type Line struct {
	// Num is the 1-based number of the line's first physical line in the parsed text;
	// 0 for lines built in code.
	Num int
	// Section is the header's name for a header line, and for every other line the
	// section it belongs to ("" for comments before the first header).
	Section string
	Header  bool
	// Key and Value of a setting; Key is "" for headers, comments and blank lines.
	Key   string
	Value string
	// Comment is a comment line's text starting with '#' or ';', "" for a blank line.
	Comment string
}

// Parse reads a unit file the way Podman 5.4's generator does (UnitFile.Parse in
// pkg/systemd/parser/unitfile.go), and refuses what that parser would silently drop or
// misread; every error names the line and wraps ErrSyntax:
//
//   - each physical line is trimmed of surrounding white space (Go's unicode.IsSpace,
//     as Podman does; a CR before the newline goes with it);
//   - a line that ends in a backslash continues on the next line. As in Podman the
//     backslash is removed and the pieces are joined without adding a space (systemd
//     itself puts a space there); comment and blank lines inside a continuation are
//     skipped by the join and kept here as lines just above the joined setting.
//     A continuation still open at the end of the file is an error (Podman drops it
//     or, on the very last line, ignores the backslash);
//   - a setting needs a section; a key is what precedes the first '=', trimmed; the
//     value is the rest with leading white space removed;
//   - NUL bytes, invalid UTF-8, a CR inside a line, physical or joined lines over
//     MaxLineLen, files over MaxFileSize or MaxLines are errors.
func Parse(data []byte) (*File, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: file is %d bytes, more than %d", ErrSyntax, len(data), MaxFileSize)
	}
	p := parser{f: &File{}}
	if len(data) == 0 {
		return p.f, nil
	}
	for i, raw := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if i == MaxLines {
			return nil, fmt.Errorf("line %d: %w: more than %d lines", i+1, ErrSyntax, MaxLines)
		}
		if err := p.physical(i+1, raw); err != nil {
			return nil, err
		}
	}
	if p.contFrom > 0 {
		return nil, fmt.Errorf("line %d: %w: continuation still open at the end of the file", p.contFrom, ErrSyntax)
	}
	return p.f, nil
}

type parser struct {
	f        *File
	section  string
	contFrom int // first line of an open continuation, 0 if none
	cont     strings.Builder
	skipped  []Line // comments and blank lines inside the open continuation
}

func (p *parser) physical(num int, raw string) error {
	if len(raw) > MaxLineLen {
		return fmt.Errorf("line %d: %w: longer than %d bytes", num, ErrSyntax, MaxLineLen)
	}
	if strings.IndexByte(raw, 0) >= 0 {
		return fmt.Errorf("line %d: %w: NUL byte", num, ErrSyntax)
	}
	if !utf8.ValidString(raw) {
		return fmt.Errorf("line %d: %w: not valid UTF-8", num, ErrSyntax)
	}
	line := strings.TrimSpace(raw)
	if strings.IndexByte(line, '\r') >= 0 {
		return fmt.Errorf("line %d: %w: carriage return inside the line", num, ErrSyntax)
	}
	if isComment(line) {
		c := Line{Num: num, Section: p.section, Comment: line}
		if p.contFrom > 0 {
			p.skipped = append(p.skipped, c)
		} else {
			p.f.Lines = append(p.f.Lines, c)
		}
		return nil
	}
	if body, ok := strings.CutSuffix(line, `\`); ok {
		if p.contFrom == 0 {
			if body == "" {
				return fmt.Errorf("line %d: %w: a lone backslash continues nothing", num, ErrSyntax)
			}
			p.contFrom = num
		}
		p.cont.WriteString(body)
		if p.cont.Len() > MaxLineLen {
			return fmt.Errorf("line %d: %w: continued line longer than %d bytes", p.contFrom, ErrSyntax, MaxLineLen)
		}
		return nil
	}
	if p.contFrom > 0 {
		p.cont.WriteString(line)
		line, num = p.cont.String(), p.contFrom
		p.cont.Reset()
		p.contFrom = 0
		if len(line) > MaxLineLen {
			return fmt.Errorf("line %d: %w: continued line longer than %d bytes", num, ErrSyntax, MaxLineLen)
		}
	}
	return p.logical(num, line)
}

func (p *parser) logical(num int, line string) error {
	if name, ok := headerName(line); ok {
		if err := checkSectionName(name); err != nil {
			return fmt.Errorf("line %d: %w: %v", num, ErrSyntax, err)
		}
		p.flushSkipped()
		p.section = name
		p.f.Lines = append(p.f.Lines, Line{Num: num, Section: name, Header: true})
		return nil
	}
	eq := strings.IndexByte(line, '=')
	if eq <= 0 {
		return fmt.Errorf("line %d: %w: %q is neither a section header, a Key=Value setting nor a comment", num, ErrSyntax, clip(line))
	}
	if p.section == "" {
		return fmt.Errorf("line %d: %w: setting before the first section header", num, ErrSyntax)
	}
	// Podman trims around '=' byte by byte with unicode.IsSpace(rune(b)): ASCII white
	// space, and the bytes 0x85 and 0xA0, which cuts a key ending in a character
	// encoded with such a last byte (à, U+00A0, U+2005, ...) in half.
	key := strings.TrimRight(line[:eq], asciiSpace)
	if strings.HasSuffix(key, "\x85") || strings.HasSuffix(key, "\xa0") {
		return fmt.Errorf("line %d: %w: key %q ends in a character Podman's parser cuts in half", num, ErrSyntax, clip(key))
	}
	if err := checkKey(key); err != nil {
		return fmt.Errorf("line %d: %w: %v", num, ErrSyntax, err)
	}
	p.flushSkipped()
	value := strings.TrimLeft(line[eq+1:], asciiSpace)
	p.f.Lines = append(p.f.Lines, Line{Num: num, Section: p.section, Key: key, Value: value})
	return nil
}

// flushSkipped puts the comments met inside a continuation above the joined line, in
// the section that line ends up in.
func (p *parser) flushSkipped() {
	for _, c := range p.skipped {
		c.Section = p.section
		p.f.Lines = append(p.f.Lines, c)
	}
	p.skipped = nil
}

// asciiSpace is the white space Podman's parser removes around '=' (see logical).
const asciiSpace = " \t\n\v\f\r"

func isComment(line string) bool {
	return line == "" || line[0] == '#' || line[0] == ';'
}

// headerName follows lineIsGroup in Podman's parser: '[' first, and nothing but
// spaces and tabs after the first ']'.
func headerName(line string) (string, bool) {
	if !strings.HasPrefix(line, "[") {
		return "", false
	}
	end := strings.IndexByte(line, ']')
	if end < 0 || strings.Trim(line[end+1:], " \t") != "" {
		return "", false
	}
	return line[1:end], true
}

func checkSectionName(name string) error {
	if name == "" {
		return errors.New("empty section name")
	}
	for _, r := range name {
		if r == '[' || r == ']' || unicode.IsControl(r) {
			return fmt.Errorf("invalid section name %q", clip(name))
		}
	}
	return nil
}

// checkKey accepts what Podman's keyNameIsValid accepts (non-empty, no '=', no
// surrounding spaces) minus control characters, and minus the first characters that
// would make the line read back as a comment or a header.
func checkKey(key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	if strings.ContainsRune(key, '=') {
		return fmt.Errorf("key %q contains '='", clip(key))
	}
	if strings.TrimFunc(key, unicode.IsSpace) != key {
		return fmt.Errorf("key %q has surrounding white space", clip(key))
	}
	if strings.IndexAny(key[:1], "#;[") == 0 {
		return fmt.Errorf("key %q starts with %q", clip(key), key[:1])
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("key %q contains a control character", clip(key))
		}
	}
	return nil
}

// checkRawValue is what a value must be to be written after "Key=" and read back
// unchanged: one line, no leading ASCII white space (removed after '='), no trailing
// white space (removed from the line), no trailing backslash.
func checkRawValue(v string) error {
	switch {
	case !utf8.ValidString(v):
		return errors.New("not valid UTF-8")
	case strings.ContainsAny(v, "\x00\n\r"):
		return errors.New("contains a NUL, newline or carriage return")
	case strings.TrimLeft(v, asciiSpace) != v || strings.TrimRightFunc(v, unicode.IsSpace) != v:
		return errors.New("has leading or trailing white space")
	case strings.HasSuffix(v, `\`):
		return errors.New("ends in a backslash, which would continue the line")
	case len(v) > MaxLineLen:
		return fmt.Errorf("longer than %d bytes", MaxLineLen)
	}
	return nil
}

// Render writes the file back as text, one line per logical line. It checks that the
// lines can be read back as they are: a File from Parse always renders.
func (f *File) Render() ([]byte, error) {
	var b bytes.Buffer
	section := ""
	for i, l := range f.Lines {
		if err := l.check(section); err != nil {
			return nil, fmt.Errorf("%w: Lines[%d]: %v", ErrInvalid, i, err)
		}
		switch {
		case l.Header:
			section = l.Section
			b.WriteString("[" + l.Section + "]")
		case l.Key != "":
			b.WriteString(l.Key + "=" + l.Value)
		default:
			b.WriteString(l.Comment)
		}
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

func (l Line) check(section string) error {
	switch {
	case l.Header:
		if l.Key != "" || l.Value != "" || l.Comment != "" {
			return errors.New("a header carries only a section name")
		}
		if err := checkSectionName(l.Section); err != nil {
			return err
		}
		if !utf8.ValidString(l.Section) || len(l.Section)+2 > MaxLineLen {
			return fmt.Errorf("section name %q is too long or not UTF-8", clip(l.Section))
		}
		return nil
	case l.Section != section:
		return fmt.Errorf("line says section %q but follows [%s]", clip(l.Section), clip(section))
	case l.Key != "":
		if l.Comment != "" {
			return errors.New("a setting has no comment text")
		}
		if err := checkKey(l.Key); err != nil {
			return err
		}
		if !utf8.ValidString(l.Key) || len(l.Key)+1+len(l.Value) > MaxLineLen {
			return fmt.Errorf("setting %s is too long or not UTF-8", clip(l.Key))
		}
		if err := checkRawValue(l.Value); err != nil {
			return fmt.Errorf("%s: value %v", l.Key, err)
		}
		if l.Section == "" {
			return fmt.Errorf("setting %s before the first section header", clip(l.Key))
		}
		return nil
	default:
		if l.Value != "" {
			return errors.New("a value without a key")
		}
		if !isComment(l.Comment) || !utf8.ValidString(l.Comment) || strings.ContainsAny(l.Comment, "\x00\n\r") ||
			strings.TrimSpace(l.Comment) != l.Comment || len(l.Comment) > MaxLineLen {
			return fmt.Errorf("%q is not a one-line comment starting with '#' or ';'", clip(l.Comment))
		}
		return nil
	}
}

// settings returns the lines setting key in section that still count: those after the
// last empty assignment (LookupAllRaw in Podman's parser, and systemd's list settings).
func (f *File) settings(section, key string) []Line {
	var out []Line
	for _, l := range f.Lines {
		if l.Header || l.Key != key || l.Section != section {
			continue
		}
		if l.Value == "" {
			out = out[:0]
			continue
		}
		out = append(out, l)
	}
	return out
}

// last returns the last line setting key in section, an empty assignment included.
func (f *File) last(section, key string) (Line, bool) {
	for i := len(f.Lines) - 1; i >= 0; i-- {
		if l := f.Lines[i]; !l.Header && l.Key == key && l.Section == section {
			return l, true
		}
	}
	return Line{}, false
}

// Values returns the values of key in section in file order, starting after the last
// empty assignment.
func (f *File) Values(section, key string) []string {
	var out []string
	for _, l := range f.settings(section, key) {
		out = append(out, l.Value)
	}
	return out
}

// Value returns the value of the last assignment of key in section (which may be
// empty) and whether there is one.
func (f *File) Value(section, key string) (string, bool) {
	l, ok := f.last(section, key)
	return l.Value, ok
}

func clip(s string) string {
	const max = 60
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
