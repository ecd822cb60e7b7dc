package turn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/project"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// hostGit runs the operator's git on the host.
func hostGit(t testing.TB, dir string, args ...string) string {
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

// projectFixture is a data dir, a store with groups, an allowlist with one read-only root,
// and a repository under it with one commit on main.
type projectFixture struct {
	layout  groupfolder.Layout
	st      *store.Store
	builder *turn.Builder
	repo    string
}

func newProjectFixture(t *testing.T, groups ...string) *projectFixture {
	t.Helper()
	base := enginetest.DataDir(t)
	dataDir := filepath.Join(base, "data")
	fx := &projectFixture{repo: filepath.Join(base, "code", "app")}
	if err := os.MkdirAll(fx.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	hostGit(t, fx.repo, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(fx.repo, "README"), []byte("hello\n"), 0o644)
	hostGit(t, fx.repo, "add", "README")
	hostGit(t, fx.repo, "commit", "-q", "-m", "first")
	allow, err := mountsec.ParseAllowlist([]byte(fmt.Sprintf(`{"allowedRoots": [{"path": %q, "allowReadWrite": false}]}`, filepath.Join(base, "code"))),
		"allowlist", mountsec.Options{Protected: []string{dataDir}})
	if err != nil {
		t.Fatal(err)
	}
	if fx.layout, err = groupfolder.NewLayout(dataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if fx.st, err = store.Open(context.Background(), filepath.Join(dataDir, "arizukod.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.st.Close() })
	for _, g := range groups {
		f, _ := groupfolder.Parse(g)
		parent, _ := f.Parent()
		if _, err := fx.st.UpsertGroup(context.Background(), store.Group{Folder: g, Parent: string(parent)}); err != nil {
			t.Fatal(err)
		}
	}
	projects, _ := fx.layout.ProjectsDir()
	fx.builder = &turn.Builder{Layout: fx.layout, Store: fx.st, Allowlist: allow,
		Projects: &project.Manager{Dir: projects, Store: fx.st, Allowlist: allow, Logger: slog.New(slog.DiscardHandler)}}
	return fx
}

// TestProjectHostileAgent: the example agent, inside a real container of each rootful
// engine, tries to change the repository's config, hooks, objects and other branches
// (all fail or stay in its own repository) and commits on its own branch, which the host's
// git then sees on arizuko/<folder>. A group without a project has no /workspace/project.
func TestProjectHostileAgent(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			eng, info := e.Open(t)
			image := enginetest.EnsureAgentImage(t, e, eng)
			fx := newProjectFixture(t, "main", "main/research", "plain")
			ctx := context.Background()
			for _, g := range []string{"main/research", "main"} {
				if _, err := fx.builder.Projects.Set(ctx, g, fx.repo); err != nil && g == "main/research" {
					t.Fatal(err)
				}
			}
			// arizuko/main and arizuko/main/research cannot both be branches (git's refs are
			// files and directories): the second is refused, naming the conflict.
			if _, err := fx.builder.Projects.Set(ctx, "main", fx.repo); err == nil || !strings.Contains(err.Error(), "arizuko/main") {
				t.Fatalf("a branch that collides with another group's: %v", err)
			}
			hostGit(t, fx.repo, "branch", "arizuko/other")
			configBefore, _ := os.ReadFile(filepath.Join(fx.repo, ".git", "config"))
			refsBefore := hostGit(t, fx.repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/main", "refs/heads/arizuko/other")
			tipBefore := hostGit(t, fx.repo, "rev-parse", "arizuko/main/research")
			marker := filepath.Join(t.TempDir(), "hook-ran")

			r, err := runner.New(runner.Config{Engine: eng, Info: info, Layout: fx.layout, Image: image, Instance: "project-" + filepath.Base(filepath.Dir(fx.repo)), Timeout: time.Minute, StopGrace: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			res, err := fx.builder.Run(ctx, turn.Request{RunID: "p1", Folder: "main/research", Messages: []contract.Message{{Content: "project " + marker}}}, r, turn.Watch{})
			if err != nil || res.Output.Status != contract.StatusOK {
				t.Fatalf("run: %v %+v", err, res)
			}
			var got map[string]string
			if err := json.Unmarshal([]byte(res.Output.Result), &got); err != nil {
				t.Fatal(err)
			}
			for _, attempt := range []string{"write config", "rename over config", "write alternates", "write repository objects", "remove repository objects"} {
				if got[attempt] == "ok" {
					t.Errorf("%s: succeeded inside the container", attempt)
				}
			}
			if got["commit"] != "ok" {
				t.Fatalf("the agent's own commit failed: %v", got)
			}
			t.Logf("from inside: %v", got)

			if tip := hostGit(t, fx.repo, "rev-parse", "arizuko/main/research"); tip != got["hash"] {
				t.Fatalf("arizuko/main/research at %s, want the agent's commit %s", tip, got["hash"])
			}
			if parent := hostGit(t, fx.repo, "rev-parse", "arizuko/main/research^"); parent != tipBefore {
				t.Errorf("the agent's commit has parent %s, want %s", parent, tipBefore)
			}
			if log := hostGit(t, fx.repo, "log", "--format=%s", "arizuko/main/research"); !strings.HasPrefix(log, "add from-agent.txt") {
				t.Errorf("git log arizuko/main/research: %q", log)
			}
			if after := hostGit(t, fx.repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/main", "refs/heads/arizuko/other"); after != refsBefore {
				t.Errorf("other branches moved:\nbefore %s\nafter  %s", refsBefore, after)
			}
			if after, _ := os.ReadFile(filepath.Join(fx.repo, ".git", "config")); string(after) != string(configBefore) {
				t.Errorf("the repository's config changed:\n%s", after)
			}
			if _, err := os.Stat(filepath.Join(fx.repo, ".git", "objects", "planted")); err == nil {
				t.Error("a file was planted in the repository's objects")
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("a hook of the agent ran on the host")
			}
			hostGit(t, fx.repo, "fsck", "--no-progress")

			// On Podman the group's next container is prepared ahead with its project
			// mounted, and its turn uses it: the agent commits again on top of its first.
			if _, ok := eng.(engine.Preparer); ok {
				testProjectPrepared(t, fx, eng, info, image, marker, got["hash"])
			}

			// The agent moves its .git away and puts one of its own in its place: the host's git
			// reads nothing of it but the daemon's config, runs none of its commands, and the
			// repository stays as it was.
			refsBefore = hostGit(t, fx.repo, "for-each-ref", "--format=%(refname) %(objectname)")
			res, err = fx.builder.Run(ctx, turn.Request{RunID: "p4", Folder: "main/research", Messages: []contract.Message{{Content: "projectswap " + marker}}}, r, turn.Watch{})
			if err != nil || res.Output.Status != contract.StatusOK || res.Output.Result != "swapped" {
				t.Fatalf("swap: %v %+v", err, res.Output)
			}
			if after := hostGit(t, fx.repo, "for-each-ref", "--format=%(refname) %(objectname)"); after != refsBefore {
				t.Errorf("refs changed after the swap:\nbefore %s\nafter  %s", refsBefore, after)
			}
			if after, _ := os.ReadFile(filepath.Join(fx.repo, ".git", "config")); string(after) != string(configBefore) {
				t.Errorf("the repository's config changed:\n%s", after)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("a command of the agent's .git ran on the host")
			}

			// A group without a project has no worktree.
			res, err = fx.builder.Run(ctx, turn.Request{RunID: "p2", Folder: "plain", Messages: []contract.Message{{Content: "read project/README"}}}, r, turn.Watch{})
			if err != nil || res.Output.Status != contract.StatusError || !strings.Contains(res.Output.Error, "no such file") {
				t.Fatalf("a group without a project read /workspace/project/README: %v %+v", err, res.Output)
			}
		})
	}
}

func testProjectPrepared(t *testing.T, fx *projectFixture, eng engine.Engine, info engine.Info, image, marker, parent string) {
	ctx := context.Background()
	r, err := runner.New(runner.Config{Engine: eng, Info: info, Layout: fx.layout, Image: image, Instance: "projectp-" + filepath.Base(filepath.Dir(fx.repo)), Timeout: time.Minute, StopGrace: time.Second, Prepared: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	wctx, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); r.WatchImages(wctx) }()
	defer func() { stop(); <-watched }()
	var name string
	for deadline := time.Now().Add(30 * time.Second); name == "" && time.Now().Before(deadline); {
		if err := fx.builder.Prepare(ctx, "main/research", r); err != nil {
			t.Fatal(err)
		}
		if name = r.Prepared()["main/research"]; name == "" {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if name == "" {
		t.Fatal("no container was prepared for main/research")
	}
	var used string
	res, err := fx.builder.Run(ctx, turn.Request{RunID: "p3", Folder: "main/research", Messages: []contract.Message{{Content: "project " + marker}}}, r,
		turn.Watch{OnCreated: func(n, _ string) { used = n }})
	if err != nil || res.Output.Status != contract.StatusOK {
		t.Fatalf("run: %v %+v", err, res)
	}
	if used != name {
		t.Errorf("the turn ran in %s, not the container prepared for it (%s)", used, name)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(res.Output.Result), &got); err != nil || got["commit"] != "ok" {
		t.Fatalf("second commit: %v %v", got, err)
	}
	for _, attempt := range []string{"write config", "rename over config", "write alternates", "write repository objects", "remove repository objects"} {
		if got[attempt] == "ok" {
			t.Errorf("%s: succeeded inside the prepared container", attempt)
		}
	}
	if tip := hostGit(t, fx.repo, "rev-parse", "arizuko/main/research"); tip != got["hash"] {
		t.Fatalf("arizuko/main/research at %s, want %s", tip, got["hash"])
	}
	if p := hostGit(t, fx.repo, "rev-parse", "arizuko/main/research^"); p != parent {
		t.Errorf("the second commit's parent is %s, want the first %s", p, parent)
	}
}

// TestProjectPrompt: the system prompt of a group with a project names its checkout and
// branch; a group without one hears nothing of it.
func TestProjectPrompt(t *testing.T) {
	fx := newProjectFixture(t, "main", "plain")
	ctx := context.Background()
	if _, err := fx.builder.Projects.Set(ctx, "main", fx.repo); err != nil {
		t.Fatal(err)
	}
	for _, f := range []groupfolder.Folder{"main", "plain"} {
		if _, err := fx.layout.Ensure(f, os.Getuid(), os.Getgid()); err != nil {
			t.Fatal(err)
		}
	}
	p, err := fx.builder.Prompt(ctx, "main", "")
	if err != nil || !strings.Contains(p, `<project path="/workspace/project" branch="arizuko/main">`) {
		t.Errorf("prompt of main (%v):\n%s", err, p)
	}
	if p, err := fx.builder.Prompt(ctx, "plain", ""); err != nil || strings.Contains(p, "<project") {
		t.Errorf("prompt of plain (%v):\n%s", err, p)
	}
}
