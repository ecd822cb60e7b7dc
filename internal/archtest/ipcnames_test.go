package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// contractNames are the names of where an agent finds its turn's sockets, which package
// contract owns: no other package's code spells them (its tests may, to check them as the
// agent sees them).
var contractNames = []string{"/var/run/pub/arizuko", "router.sock", "model.sock", "egress.sock"}

// TestIPCNamesInContract: no string literal outside package contract and tests holds the IPC
// directory of the container or a socket's name.
func TestIPCNamesInContract(t *testing.T) {
	root := moduleRoot(t)
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "contract" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, name := range contractNames {
				if strings.Contains(v, name) {
					found = append(found, fset.Position(lit.Pos()).String()[len(root)+1:]+": "+lit.Value)
					break
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: use the names of package contract (IPCDir, RouterSocket, ModelSocket, EgressSocket)", f)
	}
}
