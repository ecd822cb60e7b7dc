package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/agentdir"
	"github.com/arizuko/arizukod/runtime/engine"
)

// What runs next is the operator's. Claude Code runs code named in files of the agent's
// own trees: hooks, the status line, helpers and MCP servers in settings.json and
// settings.local.json, skills, slash commands and subagents, at user level (~/.claude, the
// session home) and at project level (its working directory /workspace, the group folder,
// with .mcp.json); git runs the hooks of the group folder's repository. An agent that
// could write any of them would plant code its next turn, or the operator's git, runs.
// Each of them is a read-only bind of the operator's copy (groupfolder.Layout.ClaudeDir,
// the daemon's, never mounted writable) over its place in the agent's tree: writing it
// fails (EROFS), and so does replacing it, since a mountpoint cannot be renamed or
// unlinked (EBUSY). What the agent leaves under a mountpoint between turns is covered by
// the next bind, and removed (logged) before it. The sources are the daemon's, so a link
// the agent plants at a mountpoint can only move the bind inside the container (the
// engine resolves the target within the container's root), never make the engine bind a
// host path of the agent's choosing. Claude Code's own state (~/.claude.json,
// ~/.claude/projects, todos, CLAUDE.md memory) stays writable; .claude.json's MCP entries
// are refused by the session's seeding instead (session.MergeClaudeJSON).

// protectedPath is one bind of the operator's copy over a place of the agent's tree.
type protectedPath struct {
	source  string // relative to the operator's copy (groupfolder.Dirs.Claude)
	target  string // in the container
	dir     bool
	initial string // a new file's content in the operator's copy
}

const (
	emptySettings = "{}\n"
	gitHooksDir   = "/workspace/.git/hooks"
)

// protectedPaths are the binds of every turn; the group folder's git hooks are added when
// it is a repository (protectedGitHooks).
var protectedPaths = []protectedPath{
	{source: "home/.claude/settings.json", target: "/root/.claude/settings.json", initial: emptySettings},
	{source: "home/.claude/settings.local.json", target: "/root/.claude/settings.local.json", initial: emptySettings},
	{source: "home/.claude/skills", target: "/root/.claude/skills", dir: true},
	{source: "home/.claude/commands", target: "/root/.claude/commands", dir: true},
	{source: "home/.claude/agents", target: "/root/.claude/agents", dir: true},
	{source: "workspace/.claude/settings.json", target: "/workspace/.claude/settings.json", initial: emptySettings},
	{source: "workspace/.claude/settings.local.json", target: "/workspace/.claude/settings.local.json", initial: emptySettings},
	{source: "workspace/.claude/skills", target: "/workspace/.claude/skills", dir: true},
	{source: "workspace/.claude/commands", target: "/workspace/.claude/commands", dir: true},
	{source: "workspace/.claude/agents", target: "/workspace/.claude/agents", dir: true},
	{source: "workspace/.mcp.json", target: "/workspace/.mcp.json", initial: "{\"mcpServers\": {}}\n"},
}

var protectedGitHooks = protectedPath{source: "git-hooks", target: gitHooksDir, dir: true}

// protectedMounts are the read-only binds of the operator's copy of d, the git hooks'
// with gitRepo.
func protectedMounts(d groupfolder.Dirs, gitRepo bool) []engine.Mount {
	var m []engine.Mount
	for _, p := range protectedList(gitRepo) {
		m = append(m, engine.Mount{Source: d.Claude + "/" + p.source, Target: p.target, ReadOnly: true, Origin: "operator"})
	}
	return m
}

func protectedList(gitRepo bool) []protectedPath {
	if gitRepo {
		return append(protectedPaths[:len(protectedPaths):len(protectedPaths)], protectedGitHooks)
	}
	return protectedPaths
}

// protect makes the operator's copy of f complete (placeholders where it has nothing) and
// every mountpoint of it in f's session home and group folder a plain file or directory,
// empty: a link, a file of the wrong type, or content the agent left there is removed and
// logged with its path. It reports whether the group folder is a git repository (a .git
// directory), whose hooks are then protected too.
func (r *Runner) protect(f groupfolder.Folder, d groupfolder.Dirs) (gitRepo bool, err error) {
	group, err := r.cfg.Layout.OpenGroup(f)
	if err != nil {
		return false, err
	}
	defer group.Close()
	st, err := group.Lstat(".git")
	gitRepo = err == nil && st.IsDir()
	conf, err := agentdir.Open(d.Claude)
	if err != nil {
		return false, fmt.Errorf("the operator's copy: %w", err)
	}
	defer conf.Close()
	session, err := r.cfg.Layout.OpenSession(f)
	if err != nil {
		return false, err
	}
	defer session.Close()
	for _, p := range protectedList(gitRepo) {
		if err := ensureSource(conf, p); err != nil {
			return false, fmt.Errorf("the operator's copy: %w", err)
		}
		tree, rel := group, strings.TrimPrefix(p.target, "/workspace/")
		if after, ok := strings.CutPrefix(p.target, "/root/"); ok {
			tree, rel = session, after
		}
		if err := r.mountpoint(tree, rel, p.dir); err != nil {
			return false, fmt.Errorf("mountpoint %s: %w", p.target, err)
		}
	}
	return gitRepo, nil
}

// ensureSource creates p in the operator's copy when missing: an empty directory, or a
// file with p.initial.
func ensureSource(conf *agentdir.Dir, p protectedPath) error {
	if err := mkdirs(conf, path.Dir(p.source)); err != nil {
		return err
	}
	if p.dir {
		if err := conf.Mkdir(p.source, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return nil
	}
	_, err := conf.CreateFile(p.source, []byte(p.initial), 0o644, nil)
	return err
}

// mountpoint makes rel in tree (the agent's) an empty directory or file for a bind: every
// parent a directory, nothing of the agent's left under the bind.
func (r *Runner) mountpoint(tree *agentdir.Dir, rel string, dir bool) error {
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		last := i == len(parts)-1
		st, err := tree.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case !last && st.IsDir(), last && dir && st.IsDir():
			if !last {
				continue
			}
			entries, err := tree.ReadDir(p)
			if err != nil {
				return err
			}
			if len(entries) == 0 {
				return nil
			}
			if err := tree.Clear(p); err != nil {
				return err
			}
			r.log.Warn("removed what the agent left where the operator's copy is bound read-only", "path", tree.Name()+"/"+p, "entries", len(entries))
			return nil
		case last && !dir && st.Mode().IsRegular():
			if st.Size() == 0 {
				return nil
			}
			if err := tree.WriteFile(p, nil, 0o644, nil); err != nil {
				return err
			}
			r.log.Warn("emptied what the agent wrote where the operator's copy is bound read-only", "path", tree.Name()+"/"+p, "bytes", st.Size())
			return nil
		default:
			if st.IsDir() {
				if err := tree.Clear(p); err != nil {
					return err
				}
			}
			if err := tree.Remove(p); err != nil {
				return err
			}
			r.log.Warn("removed a foreign entry in the way of a read-only bind of the operator's copy", "path", tree.Name()+"/"+p, "mode", st.Mode().String())
		}
		switch {
		case !last || dir:
			if err := tree.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		default:
			if _, err := tree.CreateFile(p, nil, 0o644, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// mkdirs creates the missing directories of rel in d.
func mkdirs(d *agentdir.Dir, rel string) error {
	if rel == "." {
		return nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		if err := d.Mkdir(strings.Join(parts[:i+1], "/"), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}
