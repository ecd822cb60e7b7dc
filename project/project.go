package project

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/agentdir"
	"github.com/arizuko/arizukod/internal/atomicfile"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/store"
)

// Where a turn sees its project.
const (
	// Target is the group's working tree, read-write; its .git is the group's repository.
	Target = "/workspace/project"
	// ObjectsTarget is the operator's repository's objects directory, read-only, which the
	// group's repository borrows through its alternates.
	ObjectsTarget = "/var/lib/arizuko/project-objects"
)

// Errors callers branch on.
var (
	ErrNoGroup       = errors.New("no such group")
	ErrNoProject     = errors.New("the group has no project")
	ErrNotRepository = errors.New("not a git repository")
	// ErrBadRepository: the path is refused (the allowlist, no commit, borrowed objects).
	ErrBadRepository = errors.New("repository refused")
	ErrBranchTaken   = errors.New("the branch exists and is not the group's")
	ErrDirty         = errors.New("the group's worktree has uncommitted changes")
	ErrLocked        = errors.New("locked by a git process")
	// ErrBusy: a turn of the group is running, in the repository Set or Clear would change.
	ErrBusy = errors.New("a turn of the group is running")
	// ErrUntrusted: the group's .git holds what the daemon's git must not read (a link,
	// a special file, a commondir or .git of its own); nothing is imported from it.
	ErrUntrusted = errors.New("the group's git directory is not one the daemon reads")
)

// maxGitEntries bounds the entries of a group's .git the daemon walks before it reads it.
const maxGitEntries = 200_000

// Store is what the manager reads and writes.
type Store interface {
	GetGroup(ctx context.Context, folder string) (*store.Group, error)
	SetProject(ctx context.Context, folder, repo, branch string) error
	GetProject(ctx context.Context, folder string) (store.Project, error)
	ClearProject(ctx context.Context, folder string) error
	BranchOwner(ctx context.Context, repo, branch string) (string, error)
	RunningRuns(ctx context.Context, folder string) ([]string, error)
}

// Manager gives groups their projects. Its fields are set once.
type Manager struct {
	// Dir holds the groups' repositories, <data>/projects; the daemon's own.
	Dir   string
	Store Store
	// Allowlist admits the repositories (as a read-only mount); nil admits none.
	Allowlist *mountsec.Allowlist
	Logger    *slog.Logger
}

// Info is a group's project as the operator sees it.
type Info struct {
	Folder string
	Repo   string
	Branch string
	Target string
	// Created says Set made the branch (rather than finding the group's own).
	Created bool
}

// Branch is the branch of f's commits: arizuko/<folder>.
func Branch(f groupfolder.Folder) string { return "arizuko/" + string(f) }

// repo is a repository the operator named, judged.
type repo struct {
	path   string // real path: the work tree's top level, or the bare repository
	common string // its git common directory
	format string // object format: sha1, sha256
}

// paths are where f's repository lives: base/tree is the working tree (agent ground),
// tree/.git its repository; base/config and base/alternates are the daemon's files the
// container sees over the agent's.
type paths struct {
	base, tree, gitDir, config, alternates string
}

func (m *Manager) paths(f groupfolder.Folder) paths {
	base := filepath.Join(m.Dir, f.ContainerSlug())
	tree := filepath.Join(base, "tree")
	return paths{base: base, tree: tree, gitDir: filepath.Join(tree, ".git"),
		config: filepath.Join(base, "config"), alternates: filepath.Join(base, "alternates")}
}

func (m *Manager) log() *slog.Logger {
	if m.Logger == nil {
		return slog.Default()
	}
	return m.Logger
}

// open judges path: admitted by the allowlist (as a read-only mount, for the agent only
// reads it), the top of a git repository whose common directory is inside it, with a
// commit at HEAD, its objects its own.
func (m *Manager) open(ctx context.Context, path string) (repo, error) {
	mt, err := m.Allowlist.Validate(mountsec.MountRequest{HostPath: path, ContainerPath: "project"}, false)
	if err != nil {
		return repo{}, fmt.Errorf("path: %w: %w", ErrBadRepository, err)
	}
	real := mt.HostPath
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return repo{}, fmt.Errorf("path %s: %w: not a directory", real, ErrNotRepository)
	}
	ceiling := "GIT_CEILING_DIRECTORIES=" + filepath.Dir(real)
	out, err := git(ctx, real, []string{ceiling}, "rev-parse", "--path-format=absolute", "--is-bare-repository", "--is-inside-git-dir", "--git-common-dir")
	if err != nil {
		return repo{}, fmt.Errorf("path %s: %w (%v)", real, ErrNotRepository, err)
	}
	lines := strings.Split(out, "\n")
	if len(lines) != 3 {
		return repo{}, fmt.Errorf("path %s: %w: git rev-parse said %q", real, ErrNotRepository, out)
	}
	r := repo{path: real, common: filepath.Clean(lines[2])}
	switch {
	case lines[0] == "true":
		if r.common != real {
			return repo{}, fmt.Errorf("path %s: %w: name the repository itself (%s)", real, ErrNotRepository, r.common)
		}
	case lines[1] == "true":
		return repo{}, fmt.Errorf("path %s: %w: this is inside a .git directory; name the work tree above it", real, ErrNotRepository)
	default:
		top, err := git(ctx, real, []string{ceiling}, "rev-parse", "--show-toplevel")
		if err != nil || filepath.Clean(top) != real {
			return repo{}, fmt.Errorf("path %s: %w: not the top of its work tree (%s)", real, ErrNotRepository, top)
		}
		if rel, err := filepath.Rel(real, r.common); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return repo{}, fmt.Errorf("path %s: %w: a linked worktree of %s; name that repository", real, ErrNotRepository, r.common)
		}
	}
	if _, err := os.Lstat(filepath.Join(r.common, "objects", "info", "alternates")); err == nil {
		return repo{}, fmt.Errorf("path %s: %w: its objects are borrowed from another repository (objects/info/alternates), which a turn could not see", real, ErrBadRepository)
	}
	if r.format, err = git(ctx, real, []string{ceiling}, "rev-parse", "--show-object-format"); err != nil {
		return repo{}, err
	}
	return r, nil
}

// git runs git on the operator's repository r, by its common directory.
func (r repo) git(ctx context.Context, args ...string) (string, error) {
	return git(ctx, "", nil, append([]string{"--git-dir=" + r.common}, args...)...)
}

// tip is the commit branch points at in r, or "" when r has no such branch.
func (r repo) tip(ctx context.Context, branch string) (string, error) {
	out, err := r.git(ctx, "rev-parse", "--verify", "-q", "refs/heads/"+branch+"^{commit}")
	var ge *gitError
	if errors.As(err, &ge) && strings.TrimSpace(ge.stderr) == "" {
		return "", nil
	}
	return out, err
}

// head is the commit r's HEAD names.
func (r repo) head(ctx context.Context) (string, error) {
	out, err := r.git(ctx, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	if err != nil || out == "" {
		return "", fmt.Errorf("path %s: %w: HEAD names no commit to branch from; commit something first", r.path, ErrBadRepository)
	}
	return out, nil
}

// locked says whether a git process holds branch's lock in r.
func (r repo) locked(branch string) error {
	lock := filepath.Join(r.common, "refs", "heads", filepath.FromSlash(branch)+".lock")
	if _, err := os.Lstat(lock); err == nil {
		return fmt.Errorf("branch %s of %s: %w (%s exists; end that git process, or remove the file if none runs)", branch, r.path, ErrLocked, lock)
	}
	return nil
}

// Get is f's project, or ErrNoProject.
func (m *Manager) Get(ctx context.Context, folder string) (Info, error) {
	f, err := groupfolder.Parse(folder)
	if err != nil {
		return Info{}, err
	}
	p, err := m.Store.GetProject(ctx, folder)
	if errors.Is(err, store.ErrNotFound) {
		return Info{}, fmt.Errorf("group %s: %w", f, ErrNoProject)
	}
	if err != nil {
		return Info{}, err
	}
	return Info{Folder: folder, Repo: p.Repo, Branch: Branch(f), Target: Target}, nil
}

// Set gives folder's group the repository at path: it makes the branch arizuko/<folder>
// at the repository's HEAD unless the group has it already, and the group's own
// repository its turns work in. A branch of that name that arizukod did not make for the
// folder is ErrBranchTaken; a lock on it ErrLocked. Replacing a project takes the old
// one's commits into its repository first, and is ErrDirty while its worktree holds
// uncommitted changes. Bad input changes nothing.
func (m *Manager) Set(ctx context.Context, folder, path string) (Info, error) {
	f, err := groupfolder.Parse(folder)
	if err != nil {
		return Info{}, err
	}
	if _, err := m.Store.GetGroup(ctx, folder); errors.Is(err, store.ErrNotFound) {
		return Info{}, fmt.Errorf("group %s: %w; register it first (arizukod groups add %s)", f, ErrNoGroup, f)
	} else if err != nil {
		return Info{}, err
	}
	if err := m.idle(ctx, f); err != nil {
		return Info{}, err
	}
	r, err := m.open(ctx, path)
	if err != nil {
		return Info{}, err
	}
	branch := Branch(f)
	if err := r.locked(branch); err != nil {
		return Info{}, err
	}
	tip, err := r.tip(ctx, branch)
	if err != nil {
		return Info{}, err
	}
	if tip != "" {
		owner, err := m.Store.BranchOwner(ctx, r.path, branch)
		if errors.Is(err, store.ErrNotFound) || (err == nil && owner != folder) {
			return Info{}, fmt.Errorf("branch %s of %s: %w; arizukod did not make it for %s: rename or delete it (git branch -m %s NEW)", branch, r.path, ErrBranchTaken, f, branch)
		}
		if err != nil {
			return Info{}, err
		}
	}
	old, err := m.Store.GetProject(ctx, folder)
	switching := err == nil && old.Repo != r.path
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Info{}, err
	}
	info := Info{Folder: folder, Repo: r.path, Branch: branch, Target: Target}
	if tip == "" {
		head, err := r.head(ctx)
		if err != nil {
			return Info{}, err
		}
		if _, err := r.git(ctx, "update-ref", "-m", "arizukod: branch of group "+folder, "refs/heads/"+branch, head, ""); err != nil {
			switch msg := err.Error(); {
			case strings.Contains(msg, "exists; cannot create"):
				return Info{}, fmt.Errorf("branch %s of %s: %w; a group and a group below it cannot both have a branch in one repository (git keeps a branch as a file, arizuko/<folder> as a directory of its children's)", branch, r.path, err)
			case strings.Contains(msg, ".lock"):
				return Info{}, fmt.Errorf("branch %s of %s: %w: %v", branch, r.path, ErrLocked, err)
			}
			return Info{}, fmt.Errorf("branch %s of %s: %w", branch, r.path, err)
		}
		info.Created = true
	}
	// undo takes back the branch Set made, when what follows fails.
	undo := func(err error) error {
		if info.Created {
			if _, derr := r.git(ctx, "update-ref", "-d", "refs/heads/"+branch); derr != nil {
				err = errors.Join(err, derr)
			}
		}
		return err
	}
	if switching {
		if err := m.retire(ctx, f, old.Repo, false); err != nil {
			return Info{}, undo(fmt.Errorf("replace the project of %s: %w", f, err))
		}
	}
	created := ""
	if info.Created {
		created = branch
	}
	if err := m.Store.SetProject(ctx, folder, r.path, created); err != nil {
		return Info{}, undo(err)
	}
	if _, err := m.ensure(ctx, f, r); err != nil {
		return info, fmt.Errorf("project of %s is set, but its repository could not be made (the next turn tries again): %w", f, err)
	}
	return info, nil
}

// Clear takes folder's project away: the group's commits are taken into the repository,
// then its own repository is removed. Uncommitted changes are ErrDirty and a git lock of
// the agent's ErrLocked, unless discard. The branch stays, for the operator to merge.
func (m *Manager) Clear(ctx context.Context, folder string, discard bool) (Info, error) {
	f, err := groupfolder.Parse(folder)
	if err != nil {
		return Info{}, err
	}
	p, err := m.Store.GetProject(ctx, folder)
	if errors.Is(err, store.ErrNotFound) {
		return Info{}, fmt.Errorf("group %s: %w", f, ErrNoProject)
	}
	if err != nil {
		return Info{}, err
	}
	if err := m.idle(ctx, f); err != nil {
		return Info{}, err
	}
	if err := m.retire(ctx, f, p.Repo, discard); err != nil {
		return Info{}, err
	}
	if err := m.Store.ClearProject(ctx, folder); err != nil {
		return Info{}, err
	}
	return Info{Folder: folder, Repo: p.Repo, Branch: Branch(f), Target: Target}, nil
}

// idle is ErrBusy while a turn of f runs: its container has the repository mounted.
func (m *Manager) idle(ctx context.Context, f groupfolder.Folder) error {
	ids, err := m.Store.RunningRuns(ctx, string(f))
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		return fmt.Errorf("group %s: %w (%s); try again once it ends", f, ErrBusy, strings.Join(ids, ", "))
	}
	return nil
}

// retire takes f's commits into the repository at repoPath, checks that its worktree
// holds nothing uncommitted, and removes the group's repository; discard skips the
// checks.
func (m *Manager) retire(ctx context.Context, f groupfolder.Folder, repoPath string, discard bool) error {
	p := m.paths(f)
	if _, err := os.Lstat(p.base); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if !discard {
		if err := m.checkRetire(ctx, f, p, repoPath); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(p.base); err != nil {
		return fmt.Errorf("remove the repository of %s: %w", f, err)
	}
	return nil
}

func (m *Manager) checkRetire(ctx context.Context, f groupfolder.Folder, p paths, repoPath string) error {
	if _, err := os.Lstat(p.gitDir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	r, err := m.open(ctx, repoPath)
	if err != nil {
		return err
	}
	locks, err := checkGitDir(f, p, r)
	if err != nil {
		return err
	}
	if len(locks) > 0 {
		return fmt.Errorf("the worktree of %s is %w: %s (clear with discard to drop it)", f, ErrLocked, strings.Join(locks, ", "))
	}
	if err := m.importTree(ctx, f, r); err != nil {
		return fmt.Errorf("%w (clear with discard to drop the group's commits)", err)
	}
	out, err := git(ctx, "", nil, "--git-dir="+p.gitDir, "--work-tree="+p.tree, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return err
	}
	if out != "" {
		lines := strings.Split(out, "\n")
		if len(lines) > 5 {
			lines = append(lines[:5], fmt.Sprintf("and %d more", len(lines)-5))
		}
		return fmt.Errorf("%w in %s: %s (have the agent commit them, or clear with discard to drop them)", ErrDirty, f, strings.Join(lines, "; "))
	}
	return nil
}

// Mounts makes f's repository ready for a turn and returns the mounts that show it; a
// group without a project gets none. The repository is judged again (the allowlist may
// have changed): an error fails the turn closed.
func (m *Manager) Mounts(ctx context.Context, f groupfolder.Folder) ([]engine.Mount, error) {
	pr, err := m.Store.GetProject(ctx, string(f))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r, err := m.open(ctx, pr.Repo)
	if err != nil {
		return nil, fmt.Errorf("project of %s: %w", f, err)
	}
	p, err := m.ensure(ctx, f, r)
	if errors.Is(err, ErrUntrusted) {
		return nil, fmt.Errorf("project of %s: %w (`arizukod groups project clear %s --discard` and `set` again start it afresh from its branch)", f, err, f)
	}
	if err != nil {
		return nil, fmt.Errorf("project of %s: %w", f, err)
	}
	return []engine.Mount{
		{Source: p.tree, Target: Target, Origin: "project"},
		{Source: p.config, Target: Target + "/.git/config", ReadOnly: true, Origin: "project"},
		{Source: p.alternates, Target: Target + "/.git/objects/info/alternates", ReadOnly: true, Origin: "project"},
		{Source: filepath.Join(r.common, "objects"), Target: ObjectsTarget, ReadOnly: true, Origin: "project"},
	}, nil
}

// Import takes the commits of f's last turn into its project's repository: exactly its
// branch, fast-forward only. A group without a project has nothing to import.
func (m *Manager) Import(ctx context.Context, f groupfolder.Folder) error {
	pr, err := m.Store.GetProject(ctx, string(f))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	r, err := m.open(ctx, pr.Repo)
	if err != nil {
		return fmt.Errorf("project of %s: %w", f, err)
	}
	return m.importTree(ctx, f, r)
}

func (m *Manager) importTree(ctx context.Context, f groupfolder.Folder, r repo) error {
	p := m.paths(f)
	if _, err := os.Lstat(p.tree); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := os.Lstat(p.gitDir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("import the branch of %s: %w: its checkout has no .git (the agent moved or removed it); nothing is imported, and the next turn starts from the branch", f, ErrUntrusted)
	}
	if _, err := checkGitDir(f, p, r); err != nil {
		return fmt.Errorf("import the branch of %s: %w", f, err)
	}
	branch := Branch(f)
	ref := "refs/heads/" + branch
	if err := r.locked(branch); err != nil {
		return err
	}
	_, err := git(ctx, "", nil, "-c", "fetch.fsckObjects=true", "-c", "transfer.fsckObjects=true",
		"--git-dir="+r.common, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-maintenance",
		"--no-recurse-submodules", p.gitDir, ref+":"+ref)
	if err != nil {
		return fmt.Errorf("import the branch %s of %s into %s: %w", branch, f, r.path, err)
	}
	m.log().Debug("project branch imported", "folder", string(f), "repo", r.path, "branch", branch)
	return nil
}

// ensure makes f's repository when it has none (its branch at the repository's, or at
// HEAD when the operator deleted it) and writes the daemon's files.
func (m *Manager) ensure(ctx context.Context, f groupfolder.Folder, r repo) (paths, error) {
	p := m.paths(f)
	if err := os.MkdirAll(p.base, 0o700); err != nil {
		return p, err
	}
	if err := writeChanged(p.config, configText(f, r)); err != nil {
		return p, err
	}
	if err := writeChanged(p.alternates, ObjectsTarget+"\n"); err != nil {
		return p, err
	}
	if err := os.Mkdir(p.tree, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return p, err
	}
	d, err := agentdir.Open(p.tree)
	if err != nil {
		return p, err
	}
	defer d.Close()
	if _, err := d.Lstat(".git"); err == nil {
		err = writeHostFiles(d, f, r)
	} else if errors.Is(err, fs.ErrNotExist) {
		err = m.create(ctx, f, r, p, d)
	}
	if err != nil {
		return p, err
	}
	return p, writeOrigin(ctx, d, f, r)
}

// maxOriginRefs bounds the repository's branches shown to a group.
const maxOriginRefs = 1000

// writeOrigin shows the repository's branches in f's repository as they are now, as
// refs/remotes/origin/<branch> (its own branch is its local one): the agent can diff against
// or rebase on origin/main. They are the agent's to change; nothing takes them back.
func writeOrigin(ctx context.Context, d *agentdir.Dir, f groupfolder.Folder, r repo) error {
	out, err := r.git(ctx, "for-each-ref", "--count="+fmt.Sprint(maxOriginRefs), "--format=%(objectname) %(refname)", "refs/heads/")
	if err != nil {
		return err
	}
	g, err := d.Dir(".git")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	defer g.Close()
	for _, dir := range []string{"refs", "refs/remotes", "refs/remotes/origin"} {
		if err := g.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %v", ErrUntrusted, err)
		}
	}
	if err := g.Clear("refs/remotes/origin"); err != nil {
		return fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	for _, line := range strings.Split(out, "\n") {
		hash, ref, ok := strings.Cut(line, " ")
		name := strings.TrimPrefix(ref, "refs/heads/")
		if !ok || name == Branch(f) {
			continue
		}
		rel := "refs/remotes/origin/" + name
		for i := len("refs/remotes/origin/"); i < len(rel); i++ {
			if rel[i] == '/' {
				if err := g.Mkdir(rel[:i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
					return fmt.Errorf("%w: %v", ErrUntrusted, err)
				}
			}
		}
		if err := g.WriteFile(rel, []byte(hash+"\n"), 0o644, nil); err != nil {
			return err
		}
	}
	return nil
}

// writeChanged writes the daemon's file at path unless it holds text already: a file kept
// keeps its inode, so a container prepared ahead of the turn still matches its spec.
func writeChanged(path, text string) error {
	if b, err := os.ReadFile(path); err == nil && string(b) == text {
		return nil
	}
	return atomicfile.Write(path, []byte(text), 0o644)
}

// create makes f's repository in the empty p.tree and checks its branch out.
func (m *Manager) create(ctx context.Context, f groupfolder.Folder, r repo, p paths, d *agentdir.Dir) error {
	branch := Branch(f)
	tip, err := r.tip(ctx, branch)
	if err == nil && tip == "" {
		tip, err = r.head(ctx)
	}
	if err != nil {
		return err
	}
	if _, err := git(ctx, "", nil, "init", "--quiet", "--template=", "--object-format="+r.format, "--initial-branch="+branch, p.tree); err != nil {
		return err
	}
	if err := writeHostFiles(d, f, r); err != nil {
		return err
	}
	g := []string{"--git-dir=" + p.gitDir, "--work-tree=" + p.tree}
	if _, err := git(ctx, "", nil, append(g, "update-ref", "-m", "arizukod: from "+r.path, "refs/heads/"+branch, tip)...); err != nil {
		return err
	}
	if _, err := git(ctx, "", nil, append(g, "reset", "--quiet", "--hard", tip)...); err != nil {
		return err
	}
	m.log().Info("project repository made", "folder", string(f), "repo", r.path, "branch", branch, "at", tip)
	return nil
}

// configText is the config of f's repository: no hooks path, no fsmonitor, no filter; the
// commits are the group's.
func configText(f groupfolder.Folder, r repo) string {
	version, ext := "0", ""
	if r.format != "" && r.format != "sha1" {
		version, ext = "1", "[extensions]\n\tobjectformat = "+r.format+"\n"
	}
	return "[core]\n\trepositoryformatversion = " + version + "\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n" +
		ext + "[user]\n\tname = arizuko " + string(f) + "\n\temail = " + f.ContainerSlug() + "@arizuko.invalid\n"
}

// writeHostFiles writes the daemon's config into f's .git, and the alternates the host's
// git reads (the container sees the daemon's own files over both).
func writeHostFiles(d *agentdir.Dir, f groupfolder.Folder, r repo) error {
	g, err := d.Dir(".git")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	defer g.Close()
	if err := writeChangedIn(g, "config", configText(f, r)); err != nil {
		return err
	}
	for _, dir := range []string{"objects", "objects/info"} {
		if err := g.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %v", ErrUntrusted, err)
		}
	}
	return writeChangedIn(g, "objects/info/alternates", filepath.Join(r.common, "objects")+"\n")
}

// writeChangedIn writes rel in g unless it holds text already. The container's read-only
// binds of the daemon's files are attached to these files: replacing one that is right
// would leave a container made before (one prepared ahead of its turn) bound to the file
// replaced, and the agent free to write the new one.
func writeChangedIn(g *agentdir.Dir, rel, text string) error {
	if b, err := g.ReadFile(rel, int64(len(text))+1); err == nil && string(b) == text {
		return nil
	}
	return g.WriteFile(rel, []byte(text), 0o644, nil)
}

// checkGitDir makes f's .git one the daemon's git may read, once no agent runs: no link,
// no special file, no commondir, gitdir or .git of its own, and the daemon's config and
// alternates. It returns the lock files it found.
func checkGitDir(f groupfolder.Folder, p paths, r repo) ([]string, error) {
	d, err := agentdir.Open(p.tree)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	defer d.Close()
	g, err := d.Dir(".git")
	if err != nil {
		return nil, fmt.Errorf("%w: .git: %v", ErrUntrusted, err)
	}
	defer g.Close()
	for _, name := range []string{"commondir", "gitdir", ".git"} {
		if _, err := g.Lstat(name); err == nil {
			return nil, fmt.Errorf("%w: it holds %s", ErrUntrusted, name)
		}
	}
	var locks []string
	n := 0
	var walk func(rel string) error
	walk = func(rel string) error {
		entries, err := g.ReadDir(rel)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if n++; n > maxGitEntries {
				return fmt.Errorf("%w: more than %d entries", ErrUntrusted, maxGitEntries)
			}
			name := e.Name()
			if rel != "." {
				name = rel + "/" + name
			}
			switch t := e.Type(); {
			case t.IsDir():
				if err := walk(name); err != nil {
					return err
				}
			case t.IsRegular():
				if strings.HasSuffix(name, ".lock") {
					locks = append(locks, ".git/"+name)
				}
			default:
				return fmt.Errorf("%w: .git/%s is a %s", ErrUntrusted, name, t.Type())
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return nil, err
	}
	return locks, writeHostFiles(d, f, r)
}
