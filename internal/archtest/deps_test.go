package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A rule says that the packages its rooms name may not import what its patterns match.
// A pattern is a package of the module ("store"), a tree of them ("runtime/..."), every
// other package of the module ("*"), or any other import path ("net/http",
// "github.com/mark3labs/mcp-go/...").
type rule struct {
	line     int
	rooms    []string
	patterns []string
}

// pkg is one package of the module as go list sees it, with its imports relative to the
// module for its own packages.
type pkg struct {
	path    string
	imports []string
}

// TestImports: no package imports what ARCHITECTURE.md's table says it may not, and every
// package of the module is a room of its table of rooms.
func TestImports(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseRules(doc)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := listPackages(t)
	for _, e := range check(rules, pkgs) {
		t.Error(e)
	}
	rooms := roomsNamed(doc)
	for _, p := range pkgs {
		if !rooms[p.path] {
			t.Errorf("package %s is not named in ARCHITECTURE.md's table of rooms: add a row for it (`%s/`)", p.path, p.path)
		}
	}
	t.Logf("%d packages, %d rules", len(pkgs), len(rules))
}

// TestCheckNamesTheEdge: a forbidden import fails naming the importer, the import and
// the line of the rule; a rule naming a package that does not exist fails too.
func TestCheckNamesTheEdge(t *testing.T) {
	doc := []byte("## What a room may not import\n\n| package | may not import |\n|---|---|\n" +
		"| `api` | `runtime/...`, `net/http` |\n| `store` | `*` |\n| `nosuch` | `api` |\n")
	rules, err := parseRules(doc)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := []pkg{
		{path: "api", imports: []string{"store", "runtime/engine", "fmt"}},
		{path: "store", imports: []string{"database/sql", "logging"}},
		{path: "logging"},
		{path: "runtime/engine"},
	}
	got := check(rules, pkgs)
	want := []string{
		"api imports runtime/engine: ARCHITECTURE.md line 5 says api may not import runtime/...",
		"store imports logging: ARCHITECTURE.md line 6 says store may not import * (any other package of the module but internal/agentdir and internal/atomicfile)",
		"ARCHITECTURE.md line 7 names nosuch, which is no package of the module",
	}
	if !slices.Equal(got, want) {
		t.Errorf("check = %q\nwant %q", got, want)
	}
}

var backticked = regexp.MustCompile("`([^`]+)`")

// parseRules reads the table under the heading "What a room may not import".
func parseRules(doc []byte) ([]rule, error) {
	var rules []rule
	in := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "#"):
			in = strings.Contains(line, "may not import")
		case in && strings.HasPrefix(line, "|") && !strings.HasPrefix(line, "|---") && !strings.HasPrefix(line, "| package"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if len(cells) < 2 {
				return nil, fmt.Errorf("ARCHITECTURE.md line %d: want | package | may not import |", n)
			}
			r := rule{line: n, rooms: names(cells[0]), patterns: names(cells[1])}
			if len(r.rooms) == 0 || len(r.patterns) == 0 {
				return nil, fmt.Errorf("ARCHITECTURE.md line %d: a row names its packages and patterns in backticks", n)
			}
			for i, room := range r.rooms {
				r.rooms[i] = strings.TrimSuffix(room, "/")
			}
			rules = append(rules, r)
		}
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("ARCHITECTURE.md has no table under a heading \"What a room may not import\"")
	}
	return rules, sc.Err()
}

func names(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// check returns every forbidden import, and every rule naming a package that does not exist.
func check(rules []rule, pkgs []pkg) []string {
	var errs []string
	byPath := map[string]pkg{}
	for _, p := range pkgs {
		byPath[p.path] = p
	}
	for _, r := range rules {
		for _, room := range r.rooms {
			p, ok := byPath[room]
			if !ok {
				errs = append(errs, fmt.Sprintf("ARCHITECTURE.md line %d names %s, which is no package of the module", r.line, room))
				continue
			}
			for _, imp := range p.imports {
				for _, pat := range r.patterns {
					if matches(pat, imp, room, byPath) {
						what := pat
						if pat == "*" {
							what = "* (any other package of the module but internal/agentdir and internal/atomicfile)"
						}
						errs = append(errs, fmt.Sprintf("%s imports %s: ARCHITECTURE.md line %d says %s may not import %s", room, imp, r.line, room, what))
					}
				}
			}
		}
	}
	return errs
}

// mechanisms are the module's leaf packages every room may use: they import nothing of the
// module and own one mechanism each, so `*` does not forbid them.
var mechanisms = map[string]bool{"internal/agentdir": true, "internal/atomicfile": true}

func matches(pattern, imp, self string, module map[string]pkg) bool {
	switch {
	case pattern == "*":
		_, own := module[imp]
		return own && imp != self && !mechanisms[imp]
	case strings.HasSuffix(pattern, "/..."):
		base := strings.TrimSuffix(pattern, "/...")
		return imp == base || strings.HasPrefix(imp, base+"/")
	}
	return imp == pattern
}

// roomsNamed are the packages the table of rooms names, each as `path/` or `path`.
func roomsNamed(doc []byte) map[string]bool {
	rooms := map[string]bool{}
	in := false
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			in = strings.TrimSpace(line) == "## The rooms"
		case in && strings.HasPrefix(line, "|"):
			first := strings.Split(strings.Trim(line, "|"), "|")[0]
			for _, n := range names(first) {
				rooms[strings.TrimSuffix(n, "/")] = true
			}
		}
	}
	return rooms
}

// listPackages asks go list for the module's packages and their imports (tests' imports
// not included: a test may use what its package may not).
func listPackages(t *testing.T) []pkg {
	t.Helper()
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Module", "./...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type listed struct {
		ImportPath string
		Imports    []string
		Module     struct{ Path string }
	}
	var all []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		all = append(all, p)
	}
	var pkgs []pkg
	for _, p := range all {
		prefix := p.Module.Path + "/"
		q := pkg{path: strings.TrimPrefix(p.ImportPath, prefix)}
		for _, imp := range p.Imports {
			q.imports = append(q.imports, strings.TrimPrefix(imp, prefix))
		}
		pkgs = append(pkgs, q)
	}
	return pkgs
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
