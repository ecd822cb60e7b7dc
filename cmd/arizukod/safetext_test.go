package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/arizuko/arizukod/api/apiwire"
)

func TestSafeText(t *testing.T) {
	for _, tc := range []struct {
		name, in   string
		line, text string // safeLine(in), safeText(in, "  ")
	}{
		{"plain", "hello, wörld ✓ 😀", "hello, wörld ✓ 😀", "hello, wörld ✓ 😀"},
		{"empty", "", "", ""},
		{"clear screen", "a\x1b[2Jb", `a\x1b[2Jb`, `a\x1b[2Jb`},
		{"OSC 52 with BEL", "\x1b]52;c;ZXZpbA==\x07", `\x1b]52;c;ZXZpbA==\x07`, `\x1b]52;c;ZXZpbA==\x07`},
		{"OSC with ST", "\x1b]0;title\x1b\\", `\x1b]0;title\x1b\`, `\x1b]0;title\x1b\`},
		{"C1 CSI and OSC", "\u009b31mred\u009d8;;x\u009c", `\u009b31mred\u009d8;;x\u009c`, `\u009b31mred\u009d8;;x\u009c`},
		{"NEL is C1", "a\u0085b", `a\u0085b`, `a\u0085b`},
		{"NUL, BS, DEL", "a\x00b\x08c\x7f", `a\x00b\x08c\x7f`, `a\x00b\x08c\x7f`},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`, `a\xffb\xc3`},
		{"encoded C1 split", "\xc2", `\xc2`, `\xc2`},
		{"overlong ESC", "\xc0\x9b", `\xc0\x9b`, `\xc0\x9b`},
		{"real U+FFFD", "a\uFFFDb", "a\uFFFDb", "a\uFFFDb"},
		{"newline and tab", "a\tb\nc", `a\tb\nc`, "a\tb\n  c"},
		{"forged label", "ok\nmain: forged\nnotice: fake", `ok\nmain: forged\nnotice: fake`, "ok\n  main: forged\n  notice: fake"},
		{"empty lines stay empty", "a\n\nb\n", `a\n\nb\n`, "a\n\n  b\n"},
		{"CRLF", "a\r\nb\r\n", `a\r\nb\r\n`, "a\n  b\n"},
		{"lone CR overwrites no line", "safe\rforged", `safe\rforged`, `safe\rforged`},
		{"line separator is text", "a\u2028b", "a\u2028b", "a\u2028b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := safeLine(tc.in); got != tc.line {
				t.Errorf("safeLine(%q) = %q, want %q", tc.in, got, tc.line)
			}
			if got := safeText(tc.in, "  "); got != tc.text {
				t.Errorf("safeText(%q) = %q, want %q", tc.in, got, tc.text)
			}
			for _, got := range []string{safeLine(tc.in), safeText(tc.in, "  ")} {
				if bad := terminalControl(got); bad != "" {
					t.Errorf("%q keeps %s", got, bad)
				}
			}
		})
	}
}

// terminalControl names the first thing in s a terminal would act on: a control character
// but newline and tab, a C1 control, or a byte that is not UTF-8; "" when there is none.
func terminalControl(s string) string {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return "invalid UTF-8"
		case r == '\n' || r == '\t':
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			return fmt.Sprintf("the control %U", r)
		}
	}
	return ""
}

// TestJSONWriter: JSON for a terminal escapes the C1 controls encoding/json leaves as they
// are, and decodes to the very text.
func TestJSONWriter(t *testing.T) {
	for _, s := range []string{"plain", "\u009b31mred\u009c", "\x1b]52;c;eA==\x07\u0085", "ü ¡ \u00a0 \u00c2\u0080"} {
		var b bytes.Buffer
		if err := indentedJSON(&b).Encode(apiwire.OutboxRow{Content: s}); err != nil {
			t.Fatal(err)
		}
		if bad := terminalControl(b.String()); bad != "" {
			t.Errorf("JSON of %q keeps %s: %q", s, bad, b.String())
		}
		var row apiwire.OutboxRow
		if err := json.Unmarshal(b.Bytes(), &row); err != nil || row.Content != s {
			t.Errorf("JSON of %q decodes to %q (%v)", s, row.Content, err)
		}
	}
}

// TestChatPrinterTerminal: on a terminal a reply is labelled with the group, and the lines
// of the agent's text after the first start beyond the label, its controls shown.
func TestChatPrinterTerminal(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  apiwire.OutboxRow
		want string
	}{
		{"reply", apiwire.OutboxRow{Kind: "reply", Content: "hi\x1b[2J\nmain: forged\x07"},
			"\x1b[1mmain:\x1b[0m hi\\x1b[2J\n      main: forged\\x07\n"},
		{"notice", apiwire.OutboxRow{Kind: "notice", Content: "paused\nmain: forged"},
			"\x1b[1mmain:\x1b[0m notice: paused\n              main: forged\n"},
		{"document", apiwire.OutboxRow{Kind: "document", Content: "see", DocName: "a\x1b[Hb", DocPath: "/workspace/x"},
			"\x1b[1mmain:\x1b[0m see\n      [document a\\x1b[Hb: /workspace/x]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			p := &chatPrinter{stdout: &b, infoW: &b, tty: true}
			p.reply("main", tc.row)
			if b.String() != tc.want {
				t.Errorf("printed %q, want %q", b.String(), tc.want)
			}
		})
	}
}
