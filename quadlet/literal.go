package quadlet

import (
	"fmt"
	"strings"
)

// Every [Container] value ends up as (part of) a word of the generated
// `ExecStart=podman run ...` line, which systemd then processes twice before podman
// sees it: at load time it resolves %-specifiers anywhere in the line
// (systemd.unit(5) "Specifiers", "%%" is a literal '%'), and at exec time it expands
// environment variables in each word (systemd.service(5) "Command lines": a word that
// is exactly "$NAME" becomes the variable's words, "${NAME}" is replaced inside a word,
// "$$" is a literal '$'; other '$' stay). Podman's generator escapes neither.
//
// Container keeps the values podman finally sees. Reading a unit undoes that
// processing where it does not depend on the unit (literalValue) and refuses where it
// does (checkWordStart, literalValue); writing one escapes every '%' and '$' (unitText), so what the container gets
// is exactly the field's value.

// unitText is the unit file text for a literal value.
func unitText(s string) string {
	return literalEscaper.Replace(s)
}

var literalEscaper = strings.NewReplacer("%", "%%", "$", "$$")

// checkWordStart refuses a command-line word that systemd would replace by the words
// of an environment variable: one starting with '$' but not "${" or "$$".
func checkWordStart(w string) error {
	if strings.HasPrefix(w, "$") && !strings.HasPrefix(w, "${") && !strings.HasPrefix(w, "$$") {
		return fmt.Errorf("%w: the word %q is a systemd environment variable reference (write $$ for a literal $)", ErrUnitContext, clip(w))
	}
	return nil
}

// literalValue is the value podman sees for unit text s.
func literalValue(s string) (string, error) {
	if !strings.ContainsAny(s, "%$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' && c != '$' {
			b.WriteByte(c)
			continue
		}
		var next byte
		if i+1 < len(s) {
			next = s[i+1]
		}
		switch {
		case next == c:
			b.WriteByte(c)
			i++
		case c == '$' && next == '{':
			return "", fmt.Errorf("%w: %q refers to a systemd environment variable with ${...} (write $$ for a literal $)", ErrUnitContext, clip(s))
		case c == '$':
			b.WriteByte(c)
		case isLetter(next):
			return "", fmt.Errorf("%w: %q uses the systemd specifier %%%c (write %%%% for a literal %%)", ErrUnitContext, clip(s), next)
		default:
			return "", fmt.Errorf("%w: %q has a '%%' that systemd cannot resolve (write %%%% for a literal %%)", ErrInvalid, clip(s))
		}
	}
	return b.String(), nil
}

func isLetter(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
