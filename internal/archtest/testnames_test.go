package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// unitUses are the helpers of the real-part packages that a unit test may call: whether
// the suite is required whole, the daemon's binary (built, never started against an
// engine), and the readers of the hardening a rendering carries (pure parsers).
var unitUses = map[string]bool{
	"enginetest.Required":         true,
	"enginetest.ArgvHardening":    true,
	"enginetest.QuadletHardening": true,
	"daemontest.Binary":           true,
	"daemontest.RemoveBinary":     true,
}

// realPartEnv matches the variables through which the test host names its parts.
var realPartEnv = regexp.MustCompile(`^(ARIZUKO_TEST_[A-Z0-9_]+|QUADLET_GENERATOR)$`)

// TestRealPartTestsSayItInTheirName: a test file that reaches a real part of the test host
// (an engine through internal/enginetest or internal/daemontest, an ARIZUKO_TEST_* address,
// the real Quadlet generator) is named *_e2e_test.go, so that the name tells the unit suite
// (`go test ./...`, no service) from the real-part suite (make test, CI).
func TestRealPartTestsSayItInTheirName(t *testing.T) {
	root := moduleRoot(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "_e2e_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for _, use := range realPartUses(t, path) {
			t.Errorf("%s uses %s, a real part of the test host: move the test into a file named *_e2e_test.go", rel, use)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// realPartUses lists what the test file at path reaches of the test host.
func realPartUses(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]string{} // local name -> enginetest or daemontest
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		base := filepath.Base(p)
		if p != "github.com/arizuko/arizukod/internal/"+base || base != "enginetest" && base != "daemontest" {
			continue
		}
		name := base
		if imp.Name != nil {
			name = imp.Name.Name
		}
		pkgs[name] = base
	}
	var uses []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && pkgs[x.Name] != "" {
				if use := pkgs[x.Name] + "." + n.Sel.Name; !unitUses[use] {
					uses = append(uses, use)
				}
			}
		case *ast.BasicLit:
			if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && realPartEnv.MatchString(s) {
				uses = append(uses, strconv.Quote(s))
			}
		}
		return true
	})
	slices.Sort(uses)
	return slices.Compact(uses)
}
