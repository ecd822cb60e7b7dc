package project

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/store"
)

// fixture is a real store, a real allowlist with one read-only root, and real
// repositories under it.
type fixture struct {
	m     *Manager
	st    *store.Store
	root  string // the allowed root
	repo  string // a repository with one commit on main
	other string // outside the allowlist
}

func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=op", "GIT_AUTHOR_EMAIL=op@example.com", "GIT_COMMITTER_NAME=op", "GIT_COMMITTER_EMAIL=op@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

func newRepo(t testing.TB, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "add", "README")
	run(t, dir, "commit", "-q", "-m", "first")
	return dir
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{root: filepath.Join(base, "code"), other: filepath.Join(base, "elsewhere")}
	fx.repo = newRepo(t, filepath.Join(fx.root, "app"))
	newRepo(t, fx.other)
	allow, err := mountsec.ParseAllowlist([]byte(fmt.Sprintf(`{"allowedRoots": [{"path": %q, "allowReadWrite": false}], "blockedPatterns": []}`, fx.root)),
		"test-allowlist.json", mountsec.Options{Home: base, Protected: []string{filepath.Join(base, "data")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if fx.st, err = store.Open(ctx, filepath.Join(base, "store.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.st.Close() })
	for _, g := range []store.Group{{Folder: "main"}, {Folder: "main/research", Parent: "main"}, {Folder: "other"}} {
		if _, err := fx.st.CreateGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	fx.m = &Manager{Dir: filepath.Join(base, "data", "projects"), Store: fx.st, Allowlist: allow, Logger: slog.New(slog.DiscardHandler)}
	return fx
}

// state is what a bad input must leave as it was: the repository's refs and the store's row.
func (fx *fixture) state(t *testing.T, folder string) string {
	t.Helper()
	refs := run(t, fx.repo, "for-each-ref", "--format=%(refname) %(objectname)")
	if second := filepath.Join(fx.root, "second"); fileExists(second) {
		refs += "\n" + run(t, second, "for-each-ref", "--format=%(refname) %(objectname)")
	}
	p, err := fx.st.GetProject(context.Background(), folder)
	entries, _ := os.ReadDir(fx.m.Dir)
	return fmt.Sprintf("%s\nproject %q %v\ndirs %d", refs, p.Repo, err, len(entries))
}

func TestSetBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		folder string
		path   func(fx *fixture) string
		setup  func(t *testing.T, fx *fixture)
		want   error
		rule   mountsec.Rule
		says   string
	}{
		{name: "no such group", folder: "nobody", path: func(fx *fixture) string { return fx.repo }, want: ErrNoGroup, says: "register it first"},
		{name: "bad folder", folder: "Main", path: func(fx *fixture) string { return fx.repo }, want: groupfolder.ErrInvalidFolder},
		{name: "outside the allowlist", folder: "main", path: func(fx *fixture) string { return fx.other }, want: mountsec.ErrMountRejected, rule: mountsec.RuleOutsideRoots},
		{name: "missing path", folder: "main", path: func(fx *fixture) string { return filepath.Join(fx.root, "nope") }, want: mountsec.ErrMountRejected, rule: mountsec.RuleHostPathMissing},
		{name: "relative path", folder: "main", path: func(*fixture) string { return "code/app" }, want: mountsec.ErrMountRejected, rule: mountsec.RuleNotAbsolute},
		{name: "not a repository", folder: "main", path: func(fx *fixture) string { return fx.root }, want: ErrNotRepository, setup: func(t *testing.T, fx *fixture) {}},
		{name: "a directory inside a repository", folder: "main", path: func(fx *fixture) string { return filepath.Join(fx.repo, "sub") },
			setup: func(t *testing.T, fx *fixture) { os.Mkdir(filepath.Join(fx.repo, "sub"), 0o755) }, want: ErrNotRepository},
		{name: "the .git directory", folder: "main", path: func(fx *fixture) string { return filepath.Join(fx.repo, ".git") }, want: ErrNotRepository, says: "work tree above it"},
		{name: "a linked worktree", folder: "main", path: func(fx *fixture) string { return filepath.Join(fx.root, "wt") },
			setup: func(t *testing.T, fx *fixture) {
				run(t, fx.repo, "worktree", "add", "-q", "-b", "wt", filepath.Join(fx.root, "wt"))
			}, want: ErrNotRepository, says: "linked worktree"},
		{name: "an empty repository", folder: "main", path: func(fx *fixture) string { return filepath.Join(fx.root, "empty") },
			setup: func(t *testing.T, fx *fixture) {
				os.Mkdir(filepath.Join(fx.root, "empty"), 0o755)
				run(t, filepath.Join(fx.root, "empty"), "init", "-q")
			}, want: ErrBadRepository, says: "no commit"},
		{name: "a branch that is not the group's", folder: "main/research", path: func(fx *fixture) string { return fx.repo },
			setup: func(t *testing.T, fx *fixture) { run(t, fx.repo, "branch", "arizuko/main/research") }, want: ErrBranchTaken},
		{name: "another group's branch", folder: "other", path: func(fx *fixture) string { return fx.repo },
			setup: func(t *testing.T, fx *fixture) {
				if err := fx.st.SetProject(context.Background(), "main", fx.repo, "arizuko/other"); err != nil {
					t.Fatal(err)
				}
				run(t, fx.repo, "branch", "arizuko/other")
				if err := fx.st.ClearProject(context.Background(), "main"); err != nil {
					t.Fatal(err)
				}
			}, want: ErrBranchTaken},
		{name: "a locked branch", folder: "main", path: func(fx *fixture) string { return fx.repo },
			setup: func(t *testing.T, fx *fixture) {
				os.MkdirAll(filepath.Join(fx.repo, ".git/refs/heads/arizuko"), 0o755)
				os.WriteFile(filepath.Join(fx.repo, ".git/refs/heads/arizuko/main.lock"), nil, 0o644)
			}, want: ErrLocked},
		{name: "a branch below the group's", folder: "main", path: func(fx *fixture) string { return fx.repo },
			setup: func(t *testing.T, fx *fixture) {
				if _, err := fx.m.Set(context.Background(), "main/research", fx.repo); err != nil {
					t.Fatal(err)
				}
			}, says: "cannot both have a branch"},
		{name: "replacing a project with uncommitted work", folder: "other", path: func(fx *fixture) string { return filepath.Join(fx.root, "second") },
			setup: func(t *testing.T, fx *fixture) {
				newRepo(t, filepath.Join(fx.root, "second"))
				if _, err := fx.m.Set(context.Background(), "other", fx.repo); err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(fx.m.paths("other").tree, "draft"), []byte("wip"), 0o644)
			}, want: ErrDirty},
		{name: "borrowed objects", folder: "main", path: func(fx *fixture) string { return filepath.Join(fx.root, "shared") },
			setup: func(t *testing.T, fx *fixture) { run(t, fx.root, "clone", "-q", "--shared", fx.repo, "shared") }, want: ErrBadRepository, says: "borrowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			if tc.setup != nil {
				tc.setup(t, fx)
			}
			before := fx.state(t, tc.folder)
			_, err := fx.m.Set(context.Background(), tc.folder, tc.path(fx))
			if err == nil {
				t.Fatal("Set succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if tc.rule != "" && ruleOf(err) != tc.rule {
				t.Errorf("rule = %q, want %q (%v)", ruleOf(err), tc.rule, err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want it to say %q", err, tc.says)
			}
			if after := fx.state(t, tc.folder); after != before {
				t.Errorf("a refused Set changed something:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// commitInTree commits a file in f's working tree as the agent would (on the host here;
// the end-to-end tests do it in a container).
func commitInTree(t *testing.T, fx *fixture, f groupfolder.Folder, name string) string {
	t.Helper()
	p := fx.m.paths(f)
	if err := os.WriteFile(filepath.Join(p.tree, name), []byte(name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, p.tree, "add", name)
	run(t, p.tree, "commit", "-q", "-m", "add "+name)
	return run(t, p.tree, "rev-parse", "HEAD")
}

func TestSetImportClear(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	info, err := fx.m.Set(ctx, "main/research", fx.repo)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Created || info.Branch != "arizuko/main/research" || info.Repo != fx.repo {
		t.Fatalf("info = %+v", info)
	}
	if again, err := fx.m.Set(ctx, "main/research", fx.repo); err != nil || again.Created {
		t.Fatalf("setting it again: %+v, %v", again, err)
	}
	mounts, err := fx.m.Mounts(ctx, "main/research")
	if err != nil || len(mounts) != 4 {
		t.Fatalf("mounts = %v, %v", mounts, err)
	}
	if none, err := fx.m.Mounts(ctx, "other"); err != nil || none != nil {
		t.Fatalf("a group without a project got %v, %v", none, err)
	}
	inodes := func() string {
		var out []string
		p := fx.m.paths("main/research")
		for _, f := range []string{p.config, p.alternates, filepath.Join(p.gitDir, "config"), filepath.Join(p.gitDir, "objects/info/alternates")} {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(fi.Sys().(*syscall.Stat_t).Ino))
		}
		return strings.Join(out, " ")
	}
	before := inodes()
	// The repository's other branches are origin/<branch> in the group's checkout.
	run(t, fx.repo, "branch", "feature/x")
	if _, err := fx.m.Mounts(ctx, "main/research"); err != nil {
		t.Fatal(err)
	}
	p0 := fx.m.paths("main/research")
	if got, want := run(t, p0.tree, "rev-parse", "origin/main", "origin/feature/x"), run(t, fx.repo, "rev-parse", "main", "feature/x"); got != want {
		t.Errorf("origin refs %q, want %q", got, want)
	}
	head := commitInTree(t, fx, "main/research", "notes.txt")
	if err := fx.m.Import(ctx, "main/research"); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.m.Mounts(ctx, "main/research"); err != nil {
		t.Fatal(err)
	}
	// A container made before (prepared ahead) has its read-only binds on these files:
	// the daemon must not replace them when they are right.
	if after := inodes(); after != before {
		t.Errorf("the daemon's files were replaced though unchanged: inodes %s, then %s", before, after)
	}
	if got := run(t, fx.repo, "rev-parse", "arizuko/main/research"); got != head {
		t.Fatalf("branch at %s, want %s", got, head)
	}
	if got := run(t, fx.repo, "rev-parse", "main"); got == head {
		t.Fatal("main moved")
	}

	// Dirty: clear refuses, and changes nothing.
	p := fx.m.paths("main/research")
	if err := os.WriteFile(filepath.Join(p.tree, "draft.txt"), []byte("wip\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.m.Clear(ctx, "main/research", false); !errors.Is(err, ErrDirty) || !strings.Contains(err.Error(), "draft.txt") {
		t.Fatalf("clear of a dirty worktree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(p.tree, "draft.txt")); err != nil {
		t.Fatalf("a refused clear lost the draft: %v", err)
	}
	// Locked: an agent's git lock is refused too.
	if err := os.WriteFile(filepath.Join(p.gitDir, "index.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.m.Clear(ctx, "main/research", false); !errors.Is(err, ErrLocked) {
		t.Fatalf("clear of a locked worktree: %v", err)
	}
	os.Remove(filepath.Join(p.gitDir, "index.lock"))
	os.Remove(filepath.Join(p.tree, "draft.txt"))
	second := commitInTree(t, fx, "main/research", "more.txt")
	if _, err := fx.m.Clear(ctx, "main/research", false); err != nil {
		t.Fatal(err)
	}
	if got := run(t, fx.repo, "rev-parse", "arizuko/main/research"); got != second {
		t.Fatalf("clear did not take the last commit: branch at %s, want %s", got, second)
	}
	if _, err := os.Stat(p.base); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the group's repository is still there: %v", err)
	}
	if _, err := fx.m.Clear(ctx, "main/research", false); !errors.Is(err, ErrNoProject) {
		t.Fatalf("clear without a project: %v", err)
	}
	// Given the repository again, the group continues its own branch.
	if info, err := fx.m.Set(ctx, "main/research", fx.repo); err != nil || info.Created {
		t.Fatalf("set again: %+v %v", info, err)
	}
	if got := run(t, p.tree, "rev-parse", "HEAD"); got != second {
		t.Fatalf("the new worktree is at %s, want %s", got, second)
	}
}

func TestImportRefusesUntrustedGitDir(t *testing.T) {
	for name, plant := range map[string]func(g string) error{
		"symlink":   func(g string) error { return os.Symlink("/etc/passwd", filepath.Join(g, "refs/heads/evil")) },
		"commondir": func(g string) error { return os.WriteFile(filepath.Join(g, "commondir"), []byte("/tmp\n"), 0o644) },
		"nested":    func(g string) error { return os.Mkdir(filepath.Join(g, ".git"), 0o755) },
		"fifo":      func(g string) error { return exec.Command("mkfifo", filepath.Join(g, "objects/fifo")).Run() },
		"removed":   func(g string) error { return os.Rename(g, g+"-elsewhere") },
	} {
		t.Run(name, func(t *testing.T) {
			fx := newFixture(t)
			ctx := context.Background()
			if _, err := fx.m.Set(ctx, "main", fx.repo); err != nil {
				t.Fatal(err)
			}
			before := run(t, fx.repo, "rev-parse", "arizuko/main")
			commitInTree(t, fx, "main", "x.txt")
			if err := plant(fx.m.paths("main").gitDir); err != nil {
				t.Fatal(err)
			}
			if err := fx.m.Import(ctx, "main"); !errors.Is(err, ErrUntrusted) {
				t.Fatalf("import: %v", err)
			}
			if got := run(t, fx.repo, "rev-parse", "arizuko/main"); got != before {
				t.Fatal("the branch moved")
			}
		})
	}
}

func TestImportRewritesConfigAndAlternates(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	if _, err := fx.m.Set(ctx, "main", fx.repo); err != nil {
		t.Fatal(err)
	}
	commitInTree(t, fx, "main", "y.txt")
	g := fx.m.paths("main").gitDir
	marker := filepath.Join(t.TempDir(), "ran")
	os.WriteFile(filepath.Join(g, "config"), []byte("[core]\n\tfsmonitor = touch "+marker+"\n\thooksPath = hooks\n[uploadpack]\n\tpackObjectsHook = touch "+marker+"\n"), 0o644)
	os.MkdirAll(filepath.Join(g, "hooks"), 0o755)
	os.WriteFile(filepath.Join(g, "hooks/pre-upload"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755)
	if err := fx.m.Import(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the agent's config or hook ran on the host")
	}
	if got, _ := os.ReadFile(filepath.Join(g, "config")); strings.Contains(string(got), "fsmonitor") {
		t.Fatalf("config not rewritten: %s", got)
	}
}

// TestMountsRefuseLinkedGitDir: a .git the agent swapped for a link fails the next turn
// closed, saying how to start afresh; clearing with discard and setting again does.
func TestMountsRefuseLinkedGitDir(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	if _, err := fx.m.Set(ctx, "main", fx.repo); err != nil {
		t.Fatal(err)
	}
	p := fx.m.paths("main")
	if err := os.Rename(p.gitDir, p.gitDir+"-moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(fx.repo, ".git"), p.gitDir); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.m.Mounts(ctx, "main"); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "--discard") {
		t.Fatalf("mounts of a linked .git: %v", err)
	}
	if _, err := fx.m.Clear(ctx, "main", false); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("clear of a linked .git: %v", err)
	}
	if _, err := fx.m.Clear(ctx, "main", true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(fx.repo, ".git", "config")); err != nil {
		t.Fatalf("clearing removed what the link pointed to: %v", err)
	}
	if _, err := fx.m.Set(ctx, "main", fx.repo); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.m.Mounts(ctx, "main"); err != nil {
		t.Fatal(err)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// ruleOf is the rule of the mount rejection in err's chain, or "".
func ruleOf(err error) mountsec.Rule {
	var re *mountsec.RejectError
	if errors.As(err, &re) {
		return re.Rule
	}
	return ""
}
