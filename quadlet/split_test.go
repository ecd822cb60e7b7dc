package quadlet

import (
	"errors"
	"slices"
	"testing"
)

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in      string
		mode    splitMode
		want    []string
		wantErr bool
	}{
		{"", execWords, nil, false},
		{" \t ", execWords, nil, false},
		{"a  b\tc", execWords, []string{"a", "b", "c"}, false},
		{`"a b" 'c d'`, execWords, []string{"a b", "c d"}, false},
		{`a"b c"d`, execWords, []string{"ab cd"}, false},
		{`"it's" 'say "hi"'`, execWords, []string{"it's", `say "hi"`}, false},
		{`\x41\u00e9\U0001F600\101\s\t`, execWords, []string{"Aé😀A \t"}, false},
		{`"\x41 \"q\" \\"`, execWords, []string{`A "q" \`}, false},
		{`'\n'`, execWords, []string{"\n"}, false},
		{`\xff`, execWords, []string{"\u00ff"}, false},
		{`\ud800`, execWords, []string{"\ufffd"}, false},
		{`a "b c`, execWords, []string{"a", "b c"}, false},
		{`a b\`, execWords, []string{"a", "b"}, false},
		{`a \`, execWords, []string{"a"}, false},
		{`a ""`, execWords, []string{"a"}, false},
		{`a "" b`, execWords, nil, true},
		{`\q`, execWords, nil, true},
		{`\x00`, execWords, nil, true},
		{`\000`, execWords, nil, true},
		{`\400`, execWords, nil, true},
		{`\x4`, execWords, nil, true},
		{`\U00110000`, execWords, nil, true},
		{`\$HOME`, execWords, nil, true},
		{`CAP\A "x y" 'z'`, listWords, []string{`CAP\A`, "x y", "z"}, false},
		{`"a\" b`, listWords, []string{`a\`, "b"}, false},
		{`"unbalanced`, listWords, nil, true},
		{`'' x`, listWords, nil, true},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.in, tt.mode)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("splitWords(%q, %d) = %q, %v; want %q, error %v", tt.in, tt.mode, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestJoinRoundTrip(t *testing.T) {
	words := [][]string{
		{"plain", "--flag=value", "a'b", `a"b`, `back\slash`, "trailing\\", "sp ace", "\ttab", "new\nline",
			"\x01\x7f\u0080\u0085\u00a0", "é😀", `'"'`, `""`, "#hash", ";", "%%", "$$"},
	}
	for _, ws := range words {
		for _, w := range ws {
			s, err := joinExec([]string{w})
			if err != nil {
				t.Fatalf("joinExec(%q): %v", w, err)
			}
			if got, err := splitWords(s, execWords); err != nil || !slices.Equal(got, []string{w}) {
				t.Errorf("exec %q -> %q -> %q, %v", w, s, got, err)
			}
			if checkRawValue(s) != nil {
				t.Errorf("exec %q -> %q is not a writable value", w, s)
			}
			if w == "new\nline" {
				if _, err := joinList([]string{w}); err == nil {
					t.Errorf("joinList(%q) did not fail", w)
				}
				continue
			}
			s, err = joinList([]string{w})
			if err != nil {
				t.Fatalf("joinList(%q): %v", w, err)
			}
			if got, err := splitWords(s, listWords); err != nil || !slices.Equal(got, []string{w}) {
				t.Errorf("list %q -> %q -> %q, %v", w, s, got, err)
			}
			if checkRawValue(s) != nil {
				t.Errorf("list %q -> %q is not a writable value", w, s)
			}
		}
		s, err := joinExec(ws)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := splitWords(s, execWords); err != nil || !slices.Equal(got, ws) {
			t.Errorf("exec list -> %q -> %q, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "a\x00b", "\xff"} {
		if _, err := joinExec([]string{bad}); err == nil {
			t.Errorf("joinExec(%q) did not fail", bad)
		}
		if _, err := joinList([]string{bad}); err == nil {
			t.Errorf("joinList(%q) did not fail", bad)
		}
	}
}

func TestLiteral(t *testing.T) {
	tests := []struct {
		text, want string
		err        error
	}{
		{"plain", "plain", nil},
		{"100%%", "100%", nil},
		{"$$HOME", "$HOME", nil},
		{"a$b", "a$b", nil},
		{"a$", "a$", nil},
		{"$${X}", "${X}", nil},
		{"%%h and %%%%", "%h and %%", nil},
		{"%h/x", "", ErrUnitContext},
		{"a%N", "", ErrUnitContext},
		{"a${X}", "", ErrUnitContext},
		{"100%", "", ErrInvalid},
		{"%1", "", ErrInvalid},
	}
	for _, tt := range tests {
		got, err := literalValue(tt.text)
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("literalValue(%q) = %q, %v; want %q, %v", tt.text, got, err, tt.want, tt.err)
		}
		if err == nil {
			if back, err := literalValue(unitText(got)); err != nil || back != got {
				t.Errorf("literalValue(unitText(%q)) = %q, %v", got, back, err)
			}
		}
	}
	for w, bad := range map[string]bool{"$HOME": true, "$": true, "$1": true, "${X}": false, "$$X": false, "a$X": false} {
		if err := checkWordStart(w); (err != nil) != bad || bad && !errors.Is(err, ErrUnitContext) {
			t.Errorf("checkWordStart(%q) = %v", w, err)
		}
	}
}
