package memory

import (
	"strconv"
	"unicode/utf8"
)

// markerReserve is room kept free for one truncation marker line. The longest,
// "[truncated: N bytes omitted] (M more files in facts/)\n" with 19-digit
// numbers, is 90 bytes.
const markerReserve = 96

// appendEscaped appends s to dst as block text (attr false) or as the value of
// a double-quoted attribute (attr true), adding at most limit bytes. It returns
// the extended slice and how many bytes of s it consumed; the output is cut at a
// character boundary, never inside an escape.
//
// Escaping: '&', '<' and '>' always (and '"' in attributes) become entities, so
// no input can open or close a tag. Sanitising: "\r\n" and a lone '\r' become
// '\n'; other C0 control bytes except '\t' and '\n', and invalid UTF-8, become
// U+FFFD; in attributes '\n' and '\t' become "&#10;" and "&#9;". Sanitising
// keeps the JSON encoding of the result within MaxPromptJSON.
func appendEscaped(dst []byte, s string, limit int, attr bool) ([]byte, int) {
	used, i := 0, 0
	for i < len(s) {
		c := s[i]
		n := 1
		var rep string
		switch {
		case c == '&':
			rep = "&amp;"
		case c == '<':
			rep = "&lt;"
		case c == '>':
			rep = "&gt;"
		case c == '"' && attr:
			rep = "&quot;"
		case c == '\r' || c == '\n':
			if c == '\r' && i+1 < len(s) && s[i+1] == '\n' {
				n = 2
			}
			rep = "\n"
			if attr {
				rep = "&#10;"
			}
		case c == '\t':
			rep = "\t"
			if attr {
				rep = "&#9;"
			}
		case c < 0x20:
			rep = "\uFFFD"
		case c < utf8.RuneSelf:
			rep = s[i : i+1]
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			rep = s[i : i+size]
			n = size
			if r == utf8.RuneError && size == 1 {
				rep = "\uFFFD"
			}
		}
		if used+len(rep) > limit {
			break
		}
		dst = append(dst, rep...)
		used += len(rep)
		i += n
	}
	return dst, i
}

// appendAttr appends ` name="value"` with value escaped.
func appendAttr(dst []byte, name, value string) []byte {
	dst = append(dst, ' ')
	dst = append(dst, name...)
	dst = append(dst, '=', '"')
	dst, _ = appendEscaped(dst, value, len(value)*6, true)
	return append(dst, '"')
}

// appendMarker appends the visible truncation marker "[truncated: N bytes
// omitted]" (N counts bytes of the source files or summaries left out).
func appendMarker(dst []byte, omitted int64) []byte {
	dst = append(dst, "[truncated: "...)
	dst = strconv.AppendInt(dst, omitted, 10)
	return append(dst, " bytes omitted]"...)
}
