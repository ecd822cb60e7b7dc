package memory

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadMeta(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     meta
		err      error
	}{
		{"plain", "---\nsummary: hello\ndate: 2024-01-15\n---\nbody", meta{"hello", "2024-01-15"}, nil},
		{"crlf", "---\r\nsummary: hello\r\n---\r\n", meta{summary: "hello"}, nil},
		{"bom", "\xEF\xBB\xBF---\nsummary: hi\n---\n", meta{summary: "hi"}, nil},
		{"dots end", "---\nsummary: hi\n...\n", meta{summary: "hi"}, nil},
		{"blanks after delimiters", "---  \nsummary: hi\n--- \t\n", meta{summary: "hi"}, nil},
		{"single quotes", "---\nsummary: 'it''s: fine'\n---\n", meta{summary: "it's: fine"}, nil},
		{"double quotes", "---\nsummary: \"tab\\there\"\n---\n", meta{summary: "tab here"}, nil},
		{"literal block", "---\nsummary: |\n  one\n  two\n---\n", meta{summary: "one two"}, nil},
		{"folded block", "---\nsummary: >-\n  one\n\n  two\n---\n", meta{summary: "one two"}, nil},
		{"number", "---\nsummary: 42\n---\n", meta{summary: "42"}, nil},
		{"null", "---\nsummary: ~\n---\n", meta{}, nil},
		{"empty value", "---\nsummary:\n---\n", meta{}, nil},
		{"empty block", "---\n---\n", meta{}, nil},
		{"first key wins", "---\nsummary: a\nsummary: b\n---\n", meta{summary: "a"}, nil},
		{"alias", "---\nx: &s shared\nsummary: *s\n---\n", meta{summary: "shared"}, nil},
		{"timestamp date", "---\ndate: 2024-01-15T10:00:00Z\n---\n", meta{date: "2024-01-15T10:00:00Z"}, nil},
		{"dashes inside a block scalar", "---\nsummary: |\n  ---x\n---\n", meta{summary: "---x"}, nil},
		{"no frontmatter", "summary: hi\n", meta{}, errNoFrontmatter},
		{"text before", "\n---\nsummary: hi\n---\n", meta{}, errNoFrontmatter},
		{"four dashes", "----\nsummary: hi\n---\n", meta{}, errNoFrontmatter},
		{"empty file", "", meta{}, errOpenFrontmatter},
		{"unclosed", "---\nsummary: hi\n", meta{}, errOpenFrontmatter},
		{"too long", "---\nsummary: " + strings.Repeat("x", maxFrontmatter) + "\n---\n", meta{}, errOpenFrontmatter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time proves the incremental reader.
			got, _, err := readMeta(iotest.OneByteReader(strings.NewReader(tc.in)), nil)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	for _, in := range []string{
		"---\nsummary: [a, b]\n---\n",
		"---\nsummary: {a: b}\n---\n",
		"---\n- a\n- b\n---\n",
		"---\nsummary: \"unterminated\n---\n",
	} {
		if m, _, err := readMeta(strings.NewReader(in), nil); err == nil {
			t.Errorf("readMeta(%q) = %+v, want an error", in, m)
		}
	}
}

// TestReadMetaStopsAtEnd: the frontmatter reader does not read the body of a
// large file.
func TestReadMetaStopsAtEnd(t *testing.T) {
	r := &countReader{r: strings.NewReader("---\nsummary: s\n---\n" + strings.Repeat("body\n", 1<<20))}
	if _, _, err := readMeta(r, nil); err != nil {
		t.Fatal(err)
	}
	if r.n > 8192 {
		t.Fatalf("read %d bytes for a 20-byte frontmatter", r.n)
	}
}

type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func FuzzFrontmatter(f *testing.F) {
	for _, s := range []string{
		"---\nsummary: hi\ndate: 2024-01-15\n---\n",
		"---\r\nsummary: |\r\n  a\r\n---\r\n",
		"\xEF\xBB\xBF---\nsummary: *x\n---\n",
		"---\nsummary: [1]\n...\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _, err := readMeta(strings.NewReader(string(data)), nil)
		if err != nil {
			return
		}
		if strings.ContainsAny(m.summary, "\n\r\t") || m.summary != strings.TrimSpace(m.summary) {
			t.Fatalf("summary not folded to one line: %q", m.summary)
		}
	})
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"</knowledge>", "<&>\"", "\r\n\x00\xff", "\u2028"} {
		f.Add(s, 100, false)
	}
	f.Fuzz(func(t *testing.T, s string, limit int, attr bool) {
		if limit < 0 || limit > 1<<20 {
			return
		}
		out, used := appendEscaped(nil, s, limit, attr)
		if len(out) > limit || used > len(s) || used < 0 {
			t.Fatalf("limit %d: %d bytes out, %d of %d used", limit, len(out), used, len(s))
		}
		if strings.ContainsAny(string(out), "<>") || attr && strings.ContainsAny(string(out), "\"\n\t") {
			t.Fatalf("unescaped output %q", out)
		}
		checkJSON(t, string(out))
	})
}
