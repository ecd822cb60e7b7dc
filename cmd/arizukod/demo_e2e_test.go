package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/runtime/engine"
)

// TestDemo runs the README's Quickstart, hack/demo.sh, on a fresh copy of the clone (its
// tracked files as they are in the work tree, so nothing it builds lands in the work tree),
// with the test host's Podman 4 answering (CONTAINER_HOST, as the README says) and the
// demo's directory and agent image tag the test's own: it builds bin/, imports the agent
// and prints the turn's reply. Run again with `sandbox`, it reuses the image it imported
// and prints what the agent sees of its confinement.
func TestDemo(t *testing.T) {
	e := daemontest.Podman4(t)
	eng, _ := e.Open(t)
	dir := t.TempDir()
	clone := filepath.Join(dir, "clone")
	copyTracked(t, filepath.Join("..", ".."), clone)
	image := "localhost/arizuko-demo-test:" + daemontest.RandHex(6)
	t.Cleanup(func() { eng.(engine.ImageRemover).RemoveImage(context.Background(), image) })
	demo := func(args ...string) (string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{"hack/demo.sh"}, args...)...)
		cmd.Dir = clone
		cmd.Env = append(daemontestEnv(), "ARIZUKO_MODE=user", "XDG_RUNTIME_DIR="+filepath.Join(dir, "run"),
			"XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_DATA_HOME="+filepath.Join(dir, "data"),
			"CONTAINER_HOST="+e.URI, "ARIZUKO_DEMO_DIR="+filepath.Join(dir, "demo"), "ARIZUKO_DEMO_IMAGE="+image)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("hack/demo.sh %s: %v\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		t.Logf("hack/demo.sh %s: %s", strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond))
		return stdout.String(), stderr.String()
	}
	out, errOut := demo()
	if !strings.Contains(out, `"result": "Hello from a fresh, locked-down container!"`) || !strings.Contains(errOut, "importing the example agent as "+image) {
		t.Errorf("the demo's turn:\n--- stdout\n%s--- stderr\n%s", out, errOut)
	}
	out, errOut = demo("sandbox")
	if !strings.Contains(out, `\"noNewPrivs\"`) || !strings.Contains(errOut, image+" is already this bin/agent") {
		t.Errorf("the demo's sandbox report, with the image reused:\n--- stdout\n%s--- stderr\n%s", out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "demo", "data", "groups", "main", "logs")); err != nil {
		t.Errorf("the turn's log is not where the README says: %v", err)
	}
}

// copyTracked copies the files git tracks in repo, as they are in its work tree, to dst.
func copyTracked(t *testing.T, repo, dst string) {
	t.Helper()
	list, err := exec.Command("git", "-C", repo, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files in %s (the test copies the clone's tracked files): %v", repo, err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		src := filepath.Join(repo, name)
		fi, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		} else if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}
