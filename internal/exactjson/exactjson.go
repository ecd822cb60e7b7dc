// Package exactjson finds the strings of a JSON text that encoding/json does not decode
// as they were sent: invalid UTF-8, or an escaped surrogate that is not half of a pair
// ("\ud800"). encoding/json turns both into U+FFFD without a word, so a caller that must
// refuse them (a glob, a rule) has to look at the text itself. It owns nothing else.
package exactjson

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"
)

// Mangled reports whether raw, a valid JSON text, holds a string (a value or an object's
// key) that does not decode as sent, and where: path is "" for raw itself, and names what
// lies below it as ".key" and "[i]" ("[0].match"). Of several, it names one; a key
// itself is named by the object that holds it.
func Mangled(raw []byte) (path string, found bool) {
	if utf8.Valid(raw) && !unpairedSurrogate(raw) {
		return "", false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil && obj != nil {
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if p, ok := Mangled(obj[k]); ok {
				return "." + k + p, true
			}
		}
		return "", true
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) == nil {
		for i, e := range arr {
			if p, ok := Mangled(e); ok {
				return fmt.Sprintf("[%d]%s", i, p), true
			}
		}
	}
	return "", true
}

// unpairedSurrogate reports whether raw has a \u escape of a surrogate that is not a high
// one followed by an escaped low one. A backslash occurs in valid JSON only inside a
// string, where it starts an escape.
func unpairedSurrogate(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r := escapedRune(raw, i)
		switch {
		case r < 0:
			i++ // a one-character escape: skip its character
		case 0xD800 <= r && r < 0xDC00:
			if low := escapedRune(raw, i+6); low < 0xDC00 || low >= 0xE000 {
				return true
			}
			i += 11
		case 0xDC00 <= r && r < 0xE000:
			return true
		default:
			i += 5
		}
	}
	return false
}

// escapedRune is the rune of the \uXXXX escape at raw[i], or -1 when there is none.
func escapedRune(raw []byte, i int) rune {
	if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range raw[i+2 : i+6] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}
