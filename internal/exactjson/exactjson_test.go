package exactjson

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMangled(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		path      string
		found     bool
	}{
		{"plain", `{"match":"room=1","seq":1}`, "", false},
		{"unicode as sent", `{"match":"room=日本","x":"\u00e9"}`, "", false},
		{"replacement char as sent", "{\"a\":\"\uFFFD\",\"b\":\"\\ufffd\"}", "", false},
		{"surrogate pair", `{"a":"\ud83d\ude00"}`, "", false},
		{"escaped backslash before u", `{"a":"\\ud800"}`, "", false},
		{"invalid byte", "{\"match\":\"room=\xff\"}", ".match", true},
		{"lone high surrogate", `{"match":"room=\ud800"}`, ".match", true},
		{"high then not low", `{"match":"\ud800\u0041"}`, ".match", true},
		{"lone low surrogate", `{"match":"\udc00"}`, ".match", true},
		{"high at the end", `"\ud800"`, "", true},
		{"upper-case hex", `{"a":"\uD800x"}`, ".a", true},
		{"in an array", `{"rules":["*","send_message(chat_jid=\udfff)"]}`, ".rules[1]", true},
		{"nested", "{\"routes\":[{\"match\":\"ok\"},{\"seq\":1,\"match\":\"room=\xc3\"}]}", ".routes[1].match", true},
		{"a key", "{\"k\xff\":\"v\"}", "", true},
		{"top-level string", "\"\xff\"", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.raw)) {
				t.Fatalf("%q is not valid JSON", tc.raw)
			}
			path, found := Mangled([]byte(tc.raw))
			if path != tc.path || found != tc.found {
				t.Errorf("Mangled(%q) = %q, %v; want %q, %v", tc.raw, path, found, tc.path, tc.found)
			}
		})
	}
}

// FuzzMangled holds Mangled to what encoding/json does: a string that decodes to text
// with U+FFFD the raw text does not spell is reported.
func FuzzMangled(f *testing.F) {
	f.Add(`"a\ud800b"`)
	f.Add("\"\xff\"")
	f.Add(`"\ud83d\ude00\\u"`)
	f.Fuzz(func(t *testing.T, s string) {
		raw := []byte(s)
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		_, found := Mangled(raw)
		spelled := strings.Count(s, "\uFFFD") + strings.Count(strings.ToLower(s), `\ufffd`)
		if got := strings.Count(v, "\uFFFD"); got > spelled && !found {
			t.Fatalf("%q decodes to %q with %d U+FFFD, %d spelled, and is not reported", s, v, got, spelled)
		}
		if found && utf8.ValidString(s) && strings.Count(v, "\uFFFD") == spelled {
			t.Fatalf("%q is reported, but decodes to %q as sent", s, v)
		}
	})
}
