package archtest

import (
	"os/exec"
	"testing"
)

// TestGoModTidy fails when `go mod tidy` would change go.mod or go.sum: a dependency
// added without tidying, one no longer used, or a direct one marked indirect. With the
// module cache warm (the suite's build just filled it) it needs no network.
func TestGoModTidy(t *testing.T) {
	cmd := exec.Command("go", "mod", "tidy", "-diff")
	cmd.Dir = moduleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy would change go.mod or go.sum (run go mod tidy): %v\n%s", err, out)
	}
}
