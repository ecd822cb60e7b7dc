package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Text an agent or a chat user wrote (replies, notices, errors, prompts of tasks, chats,
// file names) reaches a terminal through the commands' human output. Every such string
// passes through safeText or safeLine first: a control character would otherwise act on
// the terminal (clear it, move the cursor to forge or hide lines, set the clipboard with
// OSC 52, retitle the window). --json output is exact instead: its strings decode to the
// very text (jsonWriter).

// safeLine renders s for one line of a terminal, such as a table cell: every C0 control
// (newline and tab too), DEL and C1 control shows as an escape (\n, \t, \r, \x1b, \u009b)
// and every byte that is not UTF-8 as \xNN; the rest is kept.
func safeLine(s string) string { return safeRender(s, false, "") }

// safeText renders s as safeLine does but keeps its newlines and tabs as they are: its
// lines stay lines, and each line after the first that is not empty starts with indent, so
// that no line of s can pass for a line of the command's own (a "main: " label, a notice,
// a row). A CR before a newline is dropped; any other shows as \r.
func safeText(s, indent string) string { return safeRender(s, true, indent) }

func safeRender(s string, lines bool, indent string) string {
	if isPlain(s, lines) && !(lines && indent != "" && strings.Contains(s, "\n")) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case lines && r == '\r' && i+1 < len(s) && s[i+1] == '\n':
		case lines && r == '\n':
			b.WriteByte('\n')
			if j := i + 1; j < len(s) && s[j] != '\n' && !strings.HasPrefix(s[j:], "\r\n") {
				b.WriteString(indent)
			}
		case lines && r == '\t':
			b.WriteByte('\t')
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isPlain reports that s is UTF-8 without a control character (but newline and tab when
// lines is set): safeRender would return it as it is.
func isPlain(s string, lines bool) bool {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return false
		case lines && (r == '\n' || r == '\t'):
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			return false
		}
	}
	return true
}

// jsonWriter is where JSON goes to a terminal. encoding/json escapes the C0 controls of
// strings but writes the C1 controls (U+0080 to U+009F) as they are, which terminals act on
// like ESC sequences (U+009B is CSI). The writer writes each as the escape \u00XX: the same
// JSON, whose strings decode to the same text. It relies on each Write holding whole
// runes, as json.Encoder's one Write per value does.
type jsonWriter struct{ w io.Writer }

func (j jsonWriter) Write(p []byte) (int, error) {
	if !hasC1(p) {
		return j.w.Write(p)
	}
	out := make([]byte, 0, len(p)+32)
	for i := 0; i < len(p); i++ {
		if p[i] == 0xc2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] <= 0x9f {
			out = fmt.Appendf(out, `\u%04x`, p[i+1])
			i++
			continue
		}
		out = append(out, p[i])
	}
	if _, err := j.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func hasC1(p []byte) bool {
	for i := 0; i+1 < len(p); i++ {
		if p[i] == 0xc2 && p[i+1] >= 0x80 && p[i+1] <= 0x9f {
			return true
		}
	}
	return false
}

// lineJSON is how --json prints one value a line (outbox --follow --json).
func lineJSON(w io.Writer) *json.Encoder { return json.NewEncoder(jsonWriter{w}) }
