package quadlet

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// splitMode is one of the two ways Podman's generator cuts a value into words. Both
// follow systemd's extract_first_word() as ported in pkg/systemd/parser/split.go of
// containers/podman v5.4 (the behaviour is reimplemented here, not the code).
type splitMode uint8

const (
	// execWords is the command-line style (SplitRelax|SplitUnquote|SplitCUnescape):
	// quotes group and are removed, C escapes are decoded (also inside quotes), an
	// unbalanced quote or a trailing backslash ends the last word, an unknown escape
	// is an error. LookupAllArgs, LookupLastArgs and LookupAllKeyVal use it: Exec,
	// PodmanArgs, Mount, EnvironmentFile, Environment, Label, Annotation.
	execWords splitMode = iota
	// listWords is config_parse_strv() style (SplitRetainEscape|SplitUnquote): quotes
	// group and are removed, a backslash is an ordinary character, an unbalanced quote
	// is an error. LookupAllStrv uses it: DropCapability, AddCapability, WantedBy.
	listWords
)

// separators are the word separators of both modes (WhitespaceSeparators in Podman).
const separators = " \t\n\r"

func isSeparator(c byte) bool { return strings.IndexByte(separators, c) >= 0 }

// splitWords returns the words of s. Where Podman's splitter fails, the generator drops
// the whole value without a word; here that is an error. Its splitter also stops at the
// first empty word (a bare pair of quotes), dropping the rest of the value; that is an error
// too when something follows.
func splitWords(s string, mode splitMode) ([]string, error) {
	var words []string
	i := 0
	for {
		for i < len(s) && isSeparator(s[i]) {
			i++
		}
		if i == len(s) {
			return words, nil
		}
		word, next, err := nextWord(s, i, mode)
		if err != nil {
			return nil, err
		}
		if word == "" {
			if strings.Trim(s[next:], separators) != "" {
				return nil, fmt.Errorf("an empty quoted word at byte %d would make Podman drop the words after it", i)
			}
			return words, nil
		}
		words = append(words, word)
		i = next
	}
}

// nextWord reads the word starting at s[i] (not a separator) and returns it with the
// index just past it.
func nextWord(s string, i int, mode splitMode) (string, int, error) {
	var b strings.Builder
	var quote byte
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\\' && mode == execWords:
			if i+1 == len(s) {
				return b.String(), len(s), nil
			}
			r, n, err := unescapeOne(s[i+1:])
			if err != nil {
				return "", 0, fmt.Errorf("%v at byte %d", err, i)
			}
			b.WriteRune(r)
			i += 1 + n
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				b.WriteByte(c)
			}
			i++
		case c == '\'' || c == '"':
			quote = c
			i++
		case isSeparator(c):
			return b.String(), i, nil
		default:
			b.WriteByte(c)
			i++
		}
	}
	if quote != 0 && mode == listWords {
		return "", 0, fmt.Errorf("unbalanced %c quote", quote)
	}
	return b.String(), len(s), nil
}

var errEscape = errors.New("unsupported escape sequence")

// unescapeOne decodes the C escape whose text (after the backslash) starts t, the way
// cUnescapeOne does with NUL refused: the simple letters, \s for a space, \xHH, \uHHHH,
// \UHHHHHHHH and \ooo. The result is always written as a rune (so \xff is U+00FF),
// as Podman does. It returns the rune and how many bytes of t it used.
func unescapeOne(t string) (rune, int, error) {
	switch t[0] {
	case 'a':
		return '\a', 1, nil
	case 'b':
		return '\b', 1, nil
	case 'f':
		return '\f', 1, nil
	case 'n':
		return '\n', 1, nil
	case 'r':
		return '\r', 1, nil
	case 't':
		return '\t', 1, nil
	case 'v':
		return '\v', 1, nil
	case '\\', '"', '\'':
		return rune(t[0]), 1, nil
	case 's':
		return ' ', 1, nil
	case 'x':
		return unescapeNumber(t, 1, 2, 16, 0xff)
	case 'u':
		return unescapeNumber(t, 1, 4, 16, 0xffff)
	case 'U':
		return unescapeNumber(t, 1, 8, 16, unicode.MaxRune)
	case '0', '1', '2', '3', '4', '5', '6', '7':
		return unescapeNumber(t, 0, 3, 8, 0xff)
	}
	return 0, 0, errEscape
}

// unescapeNumber reads digits digits in base from t[skip:] (skip is 1 after a letter
// such as x, 0 for octal). Zero (NUL) and values above max are refused.
func unescapeNumber(t string, skip, digits int, base, max uint32) (rune, int, error) {
	n := skip + digits
	if len(t) < n {
		return 0, 0, errEscape
	}
	var v uint32
	for _, c := range []byte(t[skip:n]) {
		d, ok := digitValue(c, base)
		if !ok {
			return 0, 0, errEscape
		}
		v = v*base + d
	}
	if v == 0 || v > max {
		return 0, 0, errEscape
	}
	return rune(v), n, nil
}

func digitValue(c byte, base uint32) (uint32, bool) {
	var d uint32
	switch {
	case c >= '0' && c <= '9':
		d = uint32(c - '0')
	case c >= 'a' && c <= 'f':
		d = uint32(c-'a') + 10
	case c >= 'A' && c <= 'F':
		d = uint32(c-'A') + 10
	default:
		return 0, false
	}
	return d, d < base
}

// joinExec writes words as one execWords value: a word is left bare when it has no
// white space, control character, quote or backslash, and otherwise double-quoted with
// backslash, double quote and control characters escaped (escapeWords in Podman).
func joinExec(words []string) (string, error) {
	var b strings.Builder
	for i, w := range words {
		if err := checkWordText(w); err != nil {
			return "", fmt.Errorf("word %d: %v", i+1, err)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if strings.IndexFunc(w, needsExecQuote) < 0 {
			b.WriteString(w)
			continue
		}
		b.WriteByte('"')
		for _, r := range w {
			switch {
			case r == '\\' || r == '"':
				b.WriteByte('\\')
				b.WriteRune(r)
			case r < 0x20 || r == 0x7f:
				b.WriteString(controlEscape(r))
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	}
	return b.String(), nil
}

func needsExecQuote(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || r == '"' || r == '\'' || r == '\\'
}

func controlEscape(r rune) string {
	switch r {
	case '\a':
		return `\a`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\v':
		return `\v`
	}
	return fmt.Sprintf(`\x%02x`, r)
}

// joinList writes words as one listWords value. Without escapes, a word is quoted in
// pieces: runs without '"' inside "...", each '"' as '"'.
func joinList(words []string) (string, error) {
	var b strings.Builder
	for i, w := range words {
		if err := checkWordText(w); err != nil {
			return "", fmt.Errorf("word %d: %v", i+1, err)
		}
		if strings.ContainsAny(w, "\n\r") {
			return "", fmt.Errorf("word %d: a newline or carriage return cannot be written in this list", i+1)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if strings.IndexFunc(w, needsListQuote) < 0 && !strings.HasSuffix(w, `\`) {
			b.WriteString(w)
			continue
		}
		for w != "" {
			run, rest, quoted := strings.Cut(w, `"`)
			if run != "" {
				b.WriteString(`"` + run + `"`)
			}
			if quoted {
				b.WriteString(`'"'`)
			}
			w = rest
		}
	}
	return b.String(), nil
}

func needsListQuote(r rune) bool {
	return unicode.IsSpace(r) || r == '"' || r == '\''
}

func checkWordText(w string) error {
	switch {
	case w == "":
		return errors.New("empty words cannot be written")
	case !utf8.ValidString(w):
		return errors.New("not valid UTF-8")
	case strings.IndexByte(w, 0) >= 0:
		return errors.New("contains a NUL byte")
	}
	return nil
}
