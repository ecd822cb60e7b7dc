package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
)

// TestRootlessProject is the packaged service's deployment (arizukod as an unprivileged
// user on its rootless Podman, where the container's root is that user) with a project: the
// example agent's hostile attempts fail, its own commit lands on arizuko/main in the
// user's repository, seen by the user's git.
func TestRootlessProject(t *testing.T) {
	d := newRootlessDaemon(t, "http://127.0.0.1:9")
	d.write("env", "")
	code, err := os.MkdirTemp(d.u.HomeDir, "arizuko-code-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(code) })
	os.Chown(code, d.uid, d.gid)
	repo := filepath.Join(code, "app")
	asUser := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("runuser", append([]string{"-u", d.e.User, "--", "git", "-C", repo}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + d.u.HomeDir, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=op",
			"GIT_AUTHOR_EMAIL=op@example.com", "GIT_COMMITTER_NAME=op", "GIT_COMMITTER_EMAIL=op@example.com"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(repo, d.uid, d.gid)
	asUser("init", "-q", "-b", "main")
	asUser("commit", "-q", "--allow-empty", "-m", "first")
	mainBefore := asUser("rev-parse", "main")
	d.write("none.json", fmt.Sprintf(`{"allowedRoots": [{"path": %q, "allowReadWrite": false}]}`, code))
	_, stop := d.serve(d.unlimited(d.conf))
	defer stop()

	var info apiwire.Project
	if err := d.c.Do(d.ctx, http.MethodPut, "/v1/groups/main/project", apiwire.ProjectRequest{Path: repo}, &info); err != nil || info.Branch != "arizuko/main" {
		t.Fatalf("set: %+v %v", info, err)
	}
	marker := filepath.Join(code, "hook-ran")
	r, err := d.c.CreateRun(d.ctx, apiwire.CreateRunRequest{Folder: "main", Messages: []contract.Message{{Content: "project " + marker}}})
	if err != nil {
		t.Fatal(err)
	}
	var run apiwire.Run
	for {
		if err := d.c.Do(d.ctx, http.MethodGet, "/v1/runs/"+r.ID+"?wait=30s", nil, &run); err != nil {
			t.Fatal(err)
		}
		if run.State != "running" && run.State != "queued" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var got map[string]string
	if run.Status != "ok" || json.Unmarshal([]byte(run.Result), &got) != nil {
		t.Fatalf("turn: %s %s %q %q", run.State, run.Status, run.Result, run.Error)
	}
	t.Logf("from inside: %v", got)
	for _, attempt := range []string{"write config", "rename over config", "write alternates", "write repository objects", "remove repository objects"} {
		if got[attempt] == "ok" {
			t.Errorf("%s: succeeded inside the container", attempt)
		}
	}
	if tip := asUser("rev-parse", "arizuko/main"); got["commit"] != "ok" || tip != got["hash"] {
		t.Fatalf("arizuko/main at %s, want the agent's commit (%v)", tip, got)
	}
	if after := asUser("rev-parse", "main"); after != mainBefore {
		t.Errorf("main moved to %s", after)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a hook of the agent ran on the host")
	}
	asUser("fsck", "--no-progress")
}
