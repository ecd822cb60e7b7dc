package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
)

// projectGit runs the operator's git on the host.
func projectGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=op", "GIT_AUTHOR_EMAIL=op@example.com", "GIT_COMMITTER_NAME=op", "GIT_COMMITTER_EMAIL=op@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestClaudeProject: the operator gives a group a repository with the CLI; the real
// Claude Code, driven by the scripted model, commits in /workspace/project with its Bash
// tool and the container's git; once the turn is over the operator's git sees the commit on
// arizuko/<folder>, and main where it was.
func TestClaudeProject(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) { testClaudeProject(t, e) })
	}
}

func testClaudeProject(t *testing.T, e enginetest.Engine) {
	fake := fakemodel.Start()
	defer fake.Close()
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		if res, ok := firstToolResult(r); ok {
			return fakemodel.Reply{Text: "committed " + strings.TrimSpace(res)}
		}
		// Only a request that offers Bash gets the tool call (Claude Code's side requests offer no tools).
		if strings.HasSuffix(r.LastUserText(), "please commit") && slices.Contains(r.ToolNames(), "Bash") {
			return fakemodel.Reply{ToolUse: &fakemodel.ToolUse{Name: "Bash", Input: map[string]any{
				"command": "cd /workspace/project && git status --short && echo 'from claude' > claude.txt && git add claude.txt && " +
					"git commit -q -m 'claude was here' && git rev-parse HEAD",
				"description": "commit a file"}}}
		}
		return fakemodel.Reply{Text: "echo: " + r.LastUserText()}
	}
	d := daemontest.New(t, daemontest.Config{Engine: e, Claude: true, RunTimeout: "3m",
		EnvFile: "ANTHROPIC_API_KEY=sk-ant-test-" + daemontest.RandHex(16) + "\n",
		TOML:    fmt.Sprintf("[model]\nupstream = %q\n", fake.URL)})
	// Not below d.Dir: the allowlist's own directory is protected.
	code := filepath.Join(enginetest.DataDir(t), "code")
	repo := filepath.Join(code, "app")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	projectGit(t, repo, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(repo, "README"), []byte("hello\n"), 0o644)
	projectGit(t, repo, "add", "README")
	projectGit(t, repo, "commit", "-q", "-m", "first")
	mainBefore := projectGit(t, repo, "rev-parse", "main")
	allow := fmt.Sprintf(`{"allowedRoots": [{"path": %q, "allowReadWrite": false}]}`, code)
	if err := os.WriteFile(filepath.Join(d.Dir, "mount-allowlist.json"), []byte(allow), 0o600); err != nil {
		t.Fatal(err)
	}
	d.Start(t)
	d.AddGroup(t, "main")

	out, err := exec.Command(d.Bin, "groups", "project", "set", "main", repo, "--socket", d.Socket, "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("groups project set: %v\n%s", err, out)
	}
	var info apiwire.Project
	if err := json.Unmarshal(out, &info); err != nil || info.Branch != "arizuko/main" || !info.Created || info.Repo != repo {
		t.Fatalf("groups project set --json: %s (%v)", out, err)
	}
	// Bad input through the CLI: a clear error, nothing changed.
	if out, err := exec.Command(d.Bin, "groups", "project", "set", "main", "/srv", "--socket", d.Socket).CombinedOutput(); err == nil || !strings.Contains(string(out), "repository refused") {
		t.Errorf("groups project set main /etc: %v\n%s", err, out)
	}

	r, err := d.Client.CreateRun(context.Background(), apiwire.CreateRunRequest{Folder: "main",
		Messages: []contract.Message{{Role: "user", Content: "please commit"}}})
	if err != nil {
		t.Fatal(err)
	}
	run := d.Wait(t, r.ID, 3*time.Minute)
	if run.Status != "ok" || !strings.HasPrefix(run.Result, "committed ") {
		t.Fatalf("turn: %s %s %q %q", run.State, run.Status, run.Result, run.Error)
	}
	hash := run.Result[strings.LastIndex(run.Result, "\n")+1:]
	hash = strings.TrimPrefix(hash, "committed ")
	tip := projectGit(t, repo, "rev-parse", "arizuko/main")
	if tip != hash {
		t.Fatalf("arizuko/main at %s, want Claude's commit %s (result %q)", tip, hash, run.Result)
	}
	if subject := projectGit(t, repo, "log", "-1", "--format=%s", "arizuko/main"); subject != "claude was here" {
		t.Errorf("git log arizuko/main: %q", subject)
	}
	if got := projectGit(t, repo, "show", "arizuko/main:claude.txt"); got != "from claude" {
		t.Errorf("claude.txt on the branch: %q", got)
	}
	if got := projectGit(t, repo, "rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved to %s", got)
	}
	projectGit(t, repo, "merge", "-q", "--ff-only", "arizuko/main")

	out, err = exec.Command(d.Bin, "groups", "project", "clear", "main", "--socket", d.Socket).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "no longer works on") {
		t.Fatalf("groups project clear: %v\n%s", err, out)
	}
}

// firstToolResult is the content of the first tool_result in r's messages: Claude Code may
// send a system message after it, which fakemodel's ToolResult (the last message only)
// does not look past.
func firstToolResult(r fakemodel.Request) (string, bool) {
	msgs, _ := r.Body["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		blocks, _ := mm["content"].([]any)
		for _, b := range blocks {
			if bm, _ := b.(map[string]any); bm["type"] == "tool_result" {
				c, _ := bm["content"].(string)
				return c, true
			}
		}
	}
	return "", false
}
