// Package arizukod_test holds the checks of the module as a whole.
package arizukod_test

import (
	"os/exec"
	"testing"
)

// TestGoModTidy fails when `go mod tidy` would change go.mod or go.sum: a dependency
// added without tidying, one no longer used, or a direct one marked indirect. With the
// module cache warm (the suite's build just filled it) it needs no network.
func TestGoModTidy(t *testing.T) {
	out, err := exec.Command("go", "mod", "tidy", "-diff").CombinedOutput()
	if err != nil {
		t.Fatalf("go mod tidy would change go.mod or go.sum (run go mod tidy): %v\n%s", err, out)
	}
}
