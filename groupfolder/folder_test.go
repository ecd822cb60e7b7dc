package groupfolder

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		depth int
		world Folder
		slug  string
	}{
		{"main", 0, "main", "main"},
		{"main/research", 1, "main", "main-research"},
		{"main/research/w1", 2, "main", "main-research-w1"},
		{"0", 0, "0", "0"},
		{"a_b/c_d", 1, "a_b", "a_b-c_d"},
		{"team_2/proj_", 1, "team_2", "team_2-proj_"},
		{strings.Repeat("a", 63), 0, Folder(strings.Repeat("a", 63)), strings.Repeat("a", 63)},
		{"a/b/c/d/e/f/g/h", 7, "a", "a-b-c-d-e-f-g-h"},
		{"shares/mediax/logs2", 2, "shares", "shares-mediax-logs2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.name)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.name, err)
			}
			if string(f) != tc.name || f.String() != tc.name {
				t.Errorf("round trip: got %q", f)
			}
			if f.Depth() != tc.depth {
				t.Errorf("Depth = %d, want %d", f.Depth(), tc.depth)
			}
			if f.World() != tc.world {
				t.Errorf("World = %q, want %q", f.World(), tc.world)
			}
			if f.ContainerSlug() != tc.slug {
				t.Errorf("ContainerSlug = %q, want %q", f.ContainerSlug(), tc.slug)
			}
			back, err := ParseSlug(f.ContainerSlug())
			if err != nil || back != f {
				t.Errorf("ParseSlug(%q) = %q, %v", f.ContainerSlug(), back, err)
			}
			if len(f.Segments()) != tc.depth+1 {
				t.Errorf("Segments = %q", f.Segments())
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	long := strings.Repeat("a", 63)
	for _, tc := range []struct {
		name    string
		rule    string
		segment string
	}{
		{"", RuleEmpty, ""},
		{"/main", RuleAbsolute, ""},
		{"/", RuleAbsolute, ""},
		{"main/", RuleTrailingSlash, ""},
		{"main//x", RuleEmptySegment, ""},
		{"..", RuleDotSegment, ".."},
		{"main/..", RuleDotSegment, ".."},
		{"main/../etc", RuleDotSegment, ".."},
		{"./main", RuleDotSegment, "."},
		{"main\x00x", RuleNUL, ""},
		{"main\\x", RuleBackslash, ""},
		{"..\\..\\etc", RuleBackslash, ""},
		{"Main", RuleUppercase, "Main"},
		{"main/Research", RuleUppercase, "Research"},
		{"maín", RuleNonASCII, "maín"},
		{"mаin", RuleNonASCII, "mаin"}, // Cyrillic а
		{"main-x", RuleCharset, "main-x"},
		{"main.x", RuleCharset, "main.x"},
		{"main x", RuleCharset, "main x"},
		{"main\nx", RuleCharset, "main\nx"},
		{"main:x", RuleCharset, "main:x"},
		{"_main", RuleLeadingChar, "_main"},
		{long + "a", RuleSegmentLen, long + "a"},
		{"a/b/c/d/e/f/g/h/i", RuleTooDeep, ""},
		{strings.Repeat(long+"/", 4) + "abc", RuleTooLong, ""},
		{"share", RuleReserved, "share"},
		{"main/share", RuleReserved, "share"},
		{"main/media", RuleReserved, "media"},
		{"main/logs", RuleReserved, "logs"},
		{"main/x/diary", RuleReserved, "diary"},
		{"main/episodes", RuleReserved, "episodes"},
		{"main/facts", RuleReserved, "facts"},
		{"main/users", RuleReserved, "users"},
		{"main/extra", RuleReserved, "extra"},
		{"main/web", RuleReserved, "web"},
		{"main/env_dir", RuleReserved, "env_dir"},
		{"main/skills", RuleReserved, "skills"},
		{"ipc", RuleReserved, "ipc"},
		{"main/input", RuleReserved, "input"},
		{"main/sidecars", RuleReserved, "sidecars"},
		{"sessions", RuleReserved, "sessions"},
		{"tmp", RuleReserved, "tmp"},
		{"main/task", RuleReserved, "task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.name)
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want error", tc.name, f)
			}
			if !errors.Is(err, ErrInvalidFolder) {
				t.Errorf("error %v does not wrap ErrInvalidFolder", err)
			}
			var ne *NameError
			if !errors.As(err, &ne) {
				t.Fatalf("error %T is not a *NameError", err)
			}
			if ne.Rule != tc.rule || ne.Segment != tc.segment {
				t.Errorf("rule %q segment %q, want %q %q (%v)", ne.Rule, ne.Segment, tc.rule, tc.segment, err)
			}
			if !strings.Contains(err.Error(), "rule "+tc.rule) {
				t.Errorf("message %q does not name the rule", err)
			}
			if Folder(tc.name).Validate() == nil {
				t.Errorf("Validate accepted %q", tc.name)
			}
		})
	}
}

func TestFolderRelations(t *testing.T) {
	for _, tc := range []struct {
		f, other Folder
		ancestor bool
	}{
		{"main", "main/research", true},
		{"main", "main/research/w1", true},
		{"main/research", "main/research/w1", true},
		{"main", "main", false},
		{"main", "mainx/research", false},
		{"mai", "main/x", false},
		{"main/research", "main", false},
		{"main/research", "main/research2", false},
		{"", "main", false},
	} {
		if got := tc.f.IsAncestorOf(tc.other); got != tc.ancestor {
			t.Errorf("%q.IsAncestorOf(%q) = %v", tc.f, tc.other, got)
		}
	}
	for _, tc := range []struct {
		f      Folder
		parent Folder
		ok     bool
	}{
		{"main", "", false},
		{"main/research", "main", true},
		{"main/research/w1", "main/research", true},
	} {
		p, ok := tc.f.Parent()
		if p != tc.parent || ok != tc.ok {
			t.Errorf("%q.Parent() = %q, %v", tc.f, p, ok)
		}
	}
	if got := Folder("a/b/c").Segments(); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("Segments = %q", got)
	}
}

func TestParseSlugInvalid(t *testing.T) {
	for _, s := range []string{"", "a--b", "-a", "a-", "a/b", "A", "a-share"} {
		if f, err := ParseSlug(s); err == nil {
			t.Errorf("ParseSlug(%q) = %q, want error", s, f)
		}
	}
}

// FuzzParse checks Parse's invariants: accepted names round-trip, never escape
// (no '.', '..', absolute or empty segments), stay inside a Layout, and the
// container slug is injective (ParseSlug inverts it).
func FuzzParse(f *testing.F) {
	for _, s := range []string{"main", "main/research", "main/research/w1", "a_b/c", "a/b_c", "..", "/etc", "main/../x", "Main", "a-b", "share", "main\x00", "main/", "x\\y"} {
		f.Add(s)
	}
	l := Layout{DataDir: "/srv/arizuko"}
	f.Fuzz(func(t *testing.T, name string) {
		folder, err := Parse(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidFolder) {
				t.Fatalf("error %v does not wrap ErrInvalidFolder", err)
			}
			return
		}
		if string(folder) != name {
			t.Fatalf("round trip %q -> %q", name, folder)
		}
		if len(name) > MaxFolderLen || folder.Depth() >= MaxSegments {
			t.Fatalf("limits exceeded: %q", name)
		}
		for _, s := range folder.Segments() {
			if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "-\\\x00") || s != strings.ToLower(s) {
				t.Fatalf("bad segment %q accepted in %q", s, name)
			}
		}
		slug := folder.ContainerSlug()
		back, err := ParseSlug(slug)
		if err != nil || back != folder {
			t.Fatalf("slug %q of %q does not invert: %q, %v", slug, name, back, err)
		}
		if strings.Count(slug, "-") != folder.Depth() {
			t.Fatalf("slug %q has extra separators", slug)
		}
		d, err := l.Paths(folder)
		if err != nil {
			t.Fatalf("Paths(%q): %v", name, err)
		}
		for _, p := range []string{d.Group, d.Share, d.Session, d.IPC, d.IPCInput, d.SidecarSockets, d.Media, d.Logs} {
			if err := l.Within(p); err != nil {
				t.Fatalf("path escapes: %v", err)
			}
		}
		if p, ok := folder.Parent(); ok && !p.IsAncestorOf(folder) {
			t.Fatalf("parent %q is not an ancestor of %q", p, folder)
		}
	})
}
