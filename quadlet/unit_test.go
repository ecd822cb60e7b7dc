package quadlet

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseRoundTrip(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"only comments", "# a\n\n; b\n", "# a\n\n; b\n"},
		{"no final newline", "[Unit]\nDescription=x", "[Unit]\nDescription=x\n"},
		{"crlf and indentation", "  [Unit]  \r\n\tDescription = some text \r\n", "[Unit]\nDescription=some text\n"},
		{"key spaces before =", "[Unit]\nDescription   =\t  x y\n", "[Unit]\nDescription=x y\n"},
		{"continuation keeps inner space", "[Unit]\nDescription=a \\\n   b\\\nc\n", "[Unit]\nDescription=a bc\n"},
		{"comment inside continuation moves up", "[Unit]\nA=1 \\\n# c\n\n; d\n 2\n", "[Unit]\n# c\n\n; d\nA=1 2\n"},
		{"continued header", "[Uni\\\nt]\nA=1\n", "[Unit]\nA=1\n"},
		{"comment ending in backslash does not continue", "[Unit]\n# c \\\nA=1\n", "[Unit]\n# c \\\nA=1\n"},
		{"repeated sections and keys kept", "[A]\nk=1\n[B]\nk=2\n[A]\nk=3\nk=\n", "[A]\nk=1\n[B]\nk=2\n[A]\nk=3\nk=\n"},
		{"value with = and #", "[A]\nk=a=b # not a comment\n", "[A]\nk=a=b # not a comment\n"},
		{"header with trailing blanks and spaces inside", "[ A b ]\t \nk=v\n", "[ A b ]\nk=v\n"},
		{"key with inner space", "[A]\nmy key=v\n", "[A]\nmy key=v\n"},
		{"empty value", "[A]\nk=\nk=   \n", "[A]\nk=\nk=\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			out, err := f.Render()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Fatalf("got\n%q\nwant\n%q", out, tt.want)
			}
			f2, err := Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			if !sameLines(f, f2) {
				t.Fatalf("reparse differs:\n%+v\n%+v", f.Lines, f2.Lines)
			}
		})
	}
}

// sameLines compares two files ignoring line numbers.
func sameLines(a, b *File) bool {
	return slices.EqualFunc(a.Lines, b.Lines, func(x, y Line) bool {
		x.Num, y.Num = 0, 0
		return x == y
	})
}

func TestParseLineNumbers(t *testing.T) {
	f, err := Parse([]byte("# c\n[A]\nk=1 \\\n  2\nj=3\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Line{
		{Num: 1, Comment: "# c"},
		{Num: 2, Section: "A", Header: true},
		{Num: 3, Section: "A", Key: "k", Value: "1 2"},
		{Num: 5, Section: "A", Key: "j", Value: "3"},
	}
	if !slices.Equal(f.Lines, want) {
		t.Fatalf("got %+v", f.Lines)
	}
}

func TestValues(t *testing.T) {
	f, err := Parse([]byte("[A]\nk=1\n[B]\nk=x\n[A]\nk=2\nk=\nk=3\nk=4\nj=\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Values("A", "k"); !slices.Equal(got, []string{"3", "4"}) {
		t.Errorf("Values(A, k) = %q", got)
	}
	if got := f.Values("B", "k"); !slices.Equal(got, []string{"x"}) {
		t.Errorf("Values(B, k) = %q", got)
	}
	if got := f.Values("A", "j"); got != nil {
		t.Errorf("Values(A, j) = %q", got)
	}
	if v, ok := f.Value("A", "j"); !ok || v != "" {
		t.Errorf("Value(A, j) = %q, %v", v, ok)
	}
	if v, ok := f.Value("A", "k"); !ok || v != "4" {
		t.Errorf("Value(A, k) = %q, %v", v, ok)
	}
	if _, ok := f.Value("C", "k"); ok {
		t.Error("Value(C, k) found")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in string
		line     string
	}{
		{"key without =", "[Container]\nImage\n", "line 2:"},
		{"setting before any section", "Image=x\n[Container]\n", "line 1:"},
		{"continuation at end of file", "[Container]\nImage=x\nExec=a \\\n", "line 3:"},
		{"continuation at end of file after comments", "[Container]\nExec=a \\\n# c\n\n", "line 2:"},
		{"lone backslash", "[Container]\n\\\nImage=x\n", "line 2:"},
		{"NUL byte", "[Container]\nImage=a\x00b\n", "line 2:"},
		{"invalid UTF-8", "[Container]\nImage=\xff\n", "line 2:"},
		{"carriage return inside a line", "[Container]\nImage=a\rb\n", "line 2:"},
		{"huge line", "[Container]\nImage=" + strings.Repeat("a", MaxLineLen) + "\n", "line 2:"},
		{"huge continued line", "[Container]\nImage=" + strings.Repeat(strings.Repeat("a", MaxLineLen/4)+"\\\n", 5) + "b\n", "line 2:"},
		{"empty section name", "[]\n", "line 1:"},
		{"section name with a control character", "[A\x01]\n", "line 1:"},
		{"garbage after header", "[Container] x\n", "line 1:"},
		{"unclosed header", "[Container\n", "line 1:"},
		{"key starting with [", "[A]\n[k=v\n", "line 2:"},
		{"key with a control character", "[A]\nk\x01=v\n", "line 2:"},
		{"empty key", "[A]\n=v\n", "line 2:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v is not ErrSyntax", err)
			}
			if !strings.HasPrefix(err.Error(), tt.line) {
				t.Fatalf("error %q does not start with %q", err, tt.line)
			}
		})
	}
	for name, in := range map[string]string{
		"too large":      strings.Repeat("#"+strings.Repeat("x", 1000)+"\n", MaxFileSize/1000),
		"too many lines": strings.Repeat("\n", MaxLines+1),
	} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrSyntax) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Parse([]byte(strings.Repeat("\n", MaxLines))); err != nil {
		t.Errorf("MaxLines lines: %v", err)
	}
}

func TestFileRenderErrors(t *testing.T) {
	tests := []struct {
		name  string
		lines []Line
	}{
		{"setting before a header", []Line{{Section: "A", Key: "k", Value: "v"}}},
		{"section mismatch", []Line{{Section: "A", Header: true}, {Section: "B", Key: "k"}}},
		{"newline in value", []Line{{Section: "A", Header: true}, {Section: "A", Key: "k", Value: "a\nb"}}},
		{"leading space in value", []Line{{Section: "A", Header: true}, {Section: "A", Key: "k", Value: " a"}}},
		{"trailing backslash", []Line{{Section: "A", Header: true}, {Section: "A", Key: "k", Value: `a\`}}},
		{"bad key", []Line{{Section: "A", Header: true}, {Section: "A", Key: "#k", Value: "v"}}},
		{"comment without #", []Line{{Comment: "text"}}},
		{"multi-line comment", []Line{{Comment: "# a\n# b"}}},
		{"value without key", []Line{{Value: "v"}}},
		{"bad section name", []Line{{Section: "A]", Header: true}}},
		{"header with a key", []Line{{Section: "A", Header: true, Key: "k"}}},
		{"setting with a comment", []Line{{Section: "A", Header: true}, {Section: "A", Key: "k", Comment: "# c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := (&File{Lines: tt.lines}).Render()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
		})
	}
}
