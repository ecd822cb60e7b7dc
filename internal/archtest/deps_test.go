package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A rule says that the packages its rooms name may not reach what its patterns match,
// directly or through other packages, unless one of its exceptions matches it too; and may
// not import what its direct patterns match themselves (they may reach it through another
// room). A pattern is a package of the module ("store"), a tree of them ("runtime/...": of
// the module's packages only, when the module has such a tree), every other package of the
// module ("*"), or any other import path ("net/http", "github.com/mark3labs/mcp-go/...").
type rule struct {
	line       int
	rooms      []string
	patterns   []string
	exceptions []string
	direct     []string
}

// graph is the import graph of the module's packages and of everything they reach (the
// standard library and other modules too): each package with its direct imports, the
// module's own packages named relative to the module. Tests' imports are not in it: a
// test may use what its package may not.
type graph struct {
	module  []string            // the module's packages, in go list's order
	imports map[string][]string // every package's direct imports
}

// reach returns every package p reaches through its imports, each with the chain of
// imports from p that reaches it first (shortest), p itself not included.
func (g graph) reach(p string) map[string][]string {
	via := map[string][]string{p: {p}}
	queue := []string{p}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, imp := range g.imports[cur] {
			if _, seen := via[imp]; seen {
				continue
			}
			via[imp] = append(slices.Clip(via[cur]), imp)
			queue = append(queue, imp)
		}
	}
	delete(via, p)
	return via
}

// TestImports: no package reaches, directly or through other packages, what
// ARCHITECTURE.md's table says it may not; every package of the module has a row in that
// table and is a room of its table of rooms.
func TestImports(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseRules(doc)
	if err != nil {
		t.Fatal(err)
	}
	g := listPackages(t)
	for _, e := range check(rules, g) {
		t.Error(e)
	}
	rooms := roomsNamed(doc)
	for _, p := range g.module {
		if !rooms[p] {
			t.Errorf("package %s is not named in ARCHITECTURE.md's table of rooms: add a row for it (`%s/`)", p, p)
		}
	}
	t.Logf("%d packages, %d rules", len(g.module), len(rules))
}

// TestCheckNamesTheEdge: a forbidden package fails naming the room, the chain of imports
// that reaches it and the line of the rule, whether it is imported directly or through
// other packages; a rule naming a package that does not exist fails, and so does a
// package of the module that no row names.
func TestCheckNamesTheEdge(t *testing.T) {
	doc := []byte("## What a room may not import\n\n| package | may not import | may not import directly |\n|---|---|---|\n" +
		"| `api` | `runtime/...`, `net/http` | |\n| `store`, `logging`, `runtime/engine`, `runtime/runner` | `*` | |\n| `nosuch` | `api` | |\n" +
		"| `delivery` | `runtime/...`, `queue` but `runtime/engine` | `store` |\n")
	rules, err := parseRules(doc)
	if err != nil {
		t.Fatal(err)
	}
	g := graph{
		module: []string{"api", "store", "logging", "runtime/engine", "runtime/runner", "delivery", "queue", "nowhere"},
		imports: map[string][]string{
			"api":      {"store", "runtime/engine", "fmt", "runtime"},
			"store":    {"database/sql", "logging"},
			"delivery": {"api", "runtime/engine", "store"},
			"queue":    {"runtime/runner"},
			"api/x":    {"queue"},
		},
	}
	// delivery reaches the runner only through api -> queue once api imports what
	// reaches the queue: an import check of delivery's own imports never sees it.
	g.imports["api"] = append(g.imports["api"], "api/x")
	got := check(rules, g)
	want := []string{
		"api reaches runtime/engine (api -> runtime/engine): ARCHITECTURE.md line 5 says api may not import runtime/...",
		"api reaches runtime/runner (api -> api/x -> queue -> runtime/runner): ARCHITECTURE.md line 5 says api may not import runtime/...",
		"store reaches logging (store -> logging): ARCHITECTURE.md line 6 says store may not import * (any other package of the module but internal/agentdir and internal/atomicfile)",
		"ARCHITECTURE.md line 7 names nosuch, which is no package of the module",
		"delivery reaches queue (delivery -> api -> api/x -> queue): ARCHITECTURE.md line 8 says delivery may not import queue",
		"delivery reaches runtime/runner (delivery -> api -> api/x -> queue -> runtime/runner): ARCHITECTURE.md line 8 says delivery may not import runtime/...",
		"delivery imports store: ARCHITECTURE.md line 8 says delivery may not import store directly",
		"package queue has no row in ARCHITECTURE.md's table of what a room may not import: add one",
		"package nowhere has no row in ARCHITECTURE.md's table of what a room may not import: add one",
	}
	if !slices.Equal(got, want) {
		t.Errorf("check =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
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
			if len(cells) != 3 {
				return nil, fmt.Errorf("ARCHITECTURE.md line %d: want | package | may not import | may not import directly |", n)
			}
			forbidden, except, _ := strings.Cut(cells[1], " but ")
			r := rule{line: n, rooms: names(cells[0]), patterns: names(forbidden), exceptions: names(except), direct: names(cells[2])}
			if len(r.rooms) == 0 || len(r.patterns)+len(r.direct) == 0 {
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

// check returns every package a room reaches that its rule forbids, every rule naming a
// package that does not exist, and every package of the module no rule names.
func check(rules []rule, g graph) []string {
	var errs []string
	module := map[string]bool{}
	for _, p := range g.module {
		module[p] = true
	}
	ruled := map[string]bool{}
	for _, r := range rules {
		for _, room := range r.rooms {
			ruled[room] = true
			if !module[room] {
				errs = append(errs, fmt.Sprintf("ARCHITECTURE.md line %d names %s, which is no package of the module", r.line, room))
				continue
			}
			reached := g.reach(room)
			for _, dep := range slices.Sorted(maps.Keys(reached)) {
				if slices.ContainsFunc(r.exceptions, func(e string) bool { return matches(e, dep, room, module) }) {
					continue
				}
				for _, pat := range r.patterns {
					if !matches(pat, dep, room, module) {
						continue
					}
					what := pat
					if pat == "*" {
						what = "* (any other package of the module but internal/agentdir and internal/atomicfile)"
					}
					errs = append(errs, fmt.Sprintf("%s reaches %s (%s): ARCHITECTURE.md line %d says %s may not import %s",
						room, dep, strings.Join(reached[dep], " -> "), r.line, room, what))
				}
			}
			for _, imp := range g.imports[room] {
				for _, pat := range r.direct {
					if matches(pat, imp, room, module) {
						errs = append(errs, fmt.Sprintf("%s imports %s: ARCHITECTURE.md line %d says %s may not import %s directly", room, imp, r.line, room, pat))
					}
				}
			}
		}
	}
	for _, p := range g.module {
		if !ruled[p] {
			errs = append(errs, fmt.Sprintf("package %s has no row in ARCHITECTURE.md's table of what a room may not import: add one", p))
		}
	}
	return errs
}

// mechanisms are the module's leaf packages every room may use: they import nothing of the
// module and own one mechanism each, so `*` does not forbid them.
var mechanisms = map[string]bool{"internal/agentdir": true, "internal/atomicfile": true}

func matches(pattern, imp, self string, module map[string]bool) bool {
	switch {
	case pattern == "*":
		return module[imp] && imp != self && !mechanisms[imp]
	case strings.HasSuffix(pattern, "/..."):
		base := strings.TrimSuffix(pattern, "/...")
		in := func(p string) bool { return p == base || strings.HasPrefix(p, base+"/") }
		if slices.ContainsFunc(slices.Collect(maps.Keys(module)), in) && !module[imp] {
			return false // the module's tree, not the standard library's runtime
		}
		return in(imp)
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

// listPackages asks go list for the import graph of the module's packages and of all
// they reach (tests' imports not included: a test may use what its package may not).
func listPackages(t *testing.T) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps", "-json=ImportPath,Imports,Module", "./...")
	cmd.Dir = moduleRoot(t)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type listed struct {
		ImportPath string
		Imports    []string
		Module     struct {
			Path string
			Main bool
		}
	}
	g := graph{imports: map[string][]string{}}
	var prefix string
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
	for _, p := range all {
		if p.Module.Main {
			prefix = p.Module.Path + "/"
		}
	}
	rel := func(path string) string { return strings.TrimPrefix(path, prefix) }
	for _, p := range all {
		var imps []string
		for _, imp := range p.Imports {
			imps = append(imps, rel(imp))
		}
		g.imports[rel(p.ImportPath)] = imps
		if p.Module.Main {
			g.module = append(g.module, rel(p.ImportPath))
		}
	}
	return g
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
