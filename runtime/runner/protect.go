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
// with .mcp.json); the shell of its Bash tool runs the shell's startup files of the home;
// git runs what the user's configuration and the group folder's repository name. An agent that
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
	maxGitConfig  = 1 << 20
)

// protectedPaths are the binds of every turn; the group folder's git hooks are added when
// it is a repository (protectedGitHooks).
var protectedPaths = []protectedPath{
	{source: "home/.claude/settings.json", target: "/root/.claude/settings.json", initial: emptySettings},
	{source: "home/.claude/settings.local.json", target: "/root/.claude/settings.local.json", initial: emptySettings},
	{source: "home/.claude/skills", target: "/root/.claude/skills", dir: true},
	{source: "home/.claude/commands", target: "/root/.claude/commands", dir: true},
	{source: "home/.claude/agents", target: "/root/.claude/agents", dir: true},
	// The shell Claude Code's Bash tool snapshots reads these, and the git it runs (at start
	// too) reads the user's configuration: a line there runs in every later turn.
	{source: "home/.bashrc", target: "/root/.bashrc"},
	{source: "home/.bash_profile", target: "/root/.bash_profile"},
	{source: "home/.bash_login", target: "/root/.bash_login"},
	{source: "home/.profile", target: "/root/.profile"},
	{source: "home/.bash_logout", target: "/root/.bash_logout"},
	{source: "home/.gitconfig", target: "/root/.gitconfig"},
	{source: "home/.config/git", target: "/root/.config/git", dir: true},
	{source: "workspace/.claude/settings.json", target: "/workspace/.claude/settings.json", initial: emptySettings},
	{source: "workspace/.claude/settings.local.json", target: "/workspace/.claude/settings.local.json", initial: emptySettings},
	{source: "workspace/.claude/skills", target: "/workspace/.claude/skills", dir: true},
	{source: "workspace/.claude/commands", target: "/workspace/.claude/commands", dir: true},
	{source: "workspace/.claude/agents", target: "/workspace/.claude/agents", dir: true},
	{source: "workspace/.mcp.json", target: "/workspace/.mcp.json", initial: "{\"mcpServers\": {}}\n"},
}

// The group folder's repository: its hooks are an empty directory of the operator's copy,
// its configuration a copy of its own without any key that names a program (gitConfigKeys).
var (
	protectedGitHooks  = protectedPath{source: "git-hooks", target: gitHooksDir, dir: true}
	protectedGitConfig = protectedPath{source: "git-config", target: "/workspace/.git/config"}
)

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
		return append(protectedPaths[:len(protectedPaths):len(protectedPaths)], protectedGitHooks, protectedGitConfig)
	}
	return protectedPaths
}

// protect makes the operator's copy of f complete (placeholders where it has nothing) and
// every mountpoint of it in f's session home and group folder a plain file or directory,
// empty: a link, a file of the wrong type, or content the agent left there is removed and
// logged with its path. It reports whether the group folder is a git repository (a .git
// directory), whose hooks and configuration are then protected too (protectGit).
func (r *Runner) protect(f groupfolder.Folder, d groupfolder.Dirs) (gitRepo bool, err error) {
	group, err := r.cfg.Layout.OpenGroup(f)
	if err != nil {
		return false, err
	}
	defer group.Close()
	conf, err := agentdir.Open(d.Claude)
	if err != nil {
		return false, fmt.Errorf("the operator's copy: %w", err)
	}
	defer conf.Close()
	if gitRepo, err = r.protectGit(group, conf); err != nil {
		return false, fmt.Errorf("the group's git repository: %w", err)
	}
	session, err := r.cfg.Layout.OpenSession(f)
	if err != nil {
		return false, err
	}
	defer session.Close()
	for _, p := range protectedList(gitRepo) {
		if p == protectedGitConfig {
			continue
		}
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

// protectGit reports whether the group folder is a git repository (.git is a directory:
// anything else there, a link or a "gitdir:" file naming a directory of the agent's
// choosing, is removed and logged) and, when it is, removes from its configuration every
// key that could make git run a program (logged), and writes that configuration to the
// operator's copy, which is bound read-only over it. A repository without a configuration
// file gets an empty one.
func (r *Runner) protectGit(group, conf *agentdir.Dir) (bool, error) {
	st, err := group.Lstat(".git")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case !st.IsDir():
		if err := group.Remove(".git"); err != nil {
			return false, err
		}
		r.log.Warn("removed a foreign .git that is not a directory: git would have used the repository it names", "path", group.Name()+"/.git", "mode", st.Mode().String())
		return false, nil
	}
	text, err := group.ReadFile(".git/config", maxGitConfig)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if err := r.mountpoint(group, ".git/config", false); err != nil {
			return false, err
		}
		text = nil
	}
	clean, removed := sanitizeGitConfig(string(text))
	if len(removed) > 0 {
		if err := group.WriteFile(".git/config", []byte(clean), 0o644, nil); err != nil {
			return false, err
		}
		r.log.Warn("removed git configuration keys that could run a program", "path", group.Name()+"/.git/config", "keys", strings.Join(removed, ","))
	}
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := group.CreateFile(".git/config", nil, 0o644, nil); err != nil && !errors.Is(err, fs.ErrExist) {
			return false, err
		}
	}
	old, err := conf.ReadFile(protectedGitConfig.source, maxGitConfig)
	if err == nil && string(old) == clean {
		return true, nil
	}
	return true, conf.WriteFile(protectedGitConfig.source, []byte(clean), 0o644, nil)
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

// gitConfigKeys are the keys of a git configuration kept when it is copied for a turn:
// what a repository needs to work, none of which names a program. Every other key (hooks
// path, fsmonitor, pager, editor, ssh command, filters, diff and merge drivers, aliases,
// credential helpers, includes, extensions.worktreeConfig) can make git run code.
var gitConfigKeys = map[string]bool{
	"core.repositoryformatversion": true, "core.filemode": true, "core.bare": true,
	"core.logallrefupdates": true, "core.ignorecase": true, "core.precomposeunicode": true,
	"core.symlinks": true, "core.autocrlf": true, "core.eol": true,
	"remote.*.url": true, "remote.*.pushurl": true, "remote.*.fetch": true, "remote.*.push": true,
	"remote.*.tagopt": true, "remote.*.prune": true, "remote.*.mirror": true,
	"branch.*.remote": true, "branch.*.merge": true, "branch.*.rebase": true, "branch.*.pushremote": true,
	"user.name": true, "user.email": true, "init.defaultbranch": true,
	"extensions.objectformat": true, "extensions.refstorage": true,
	"pull.rebase": true, "pull.ff": true, "push.default": true, "push.autosetupremote": true,
	"fetch.prune": true, "gc.auto": true,
}

// sanitizeGitConfig returns the git configuration text with every key gitConfigKeys does
// not allow removed, and the keys removed. Section headers and comments are kept; a value
// continued on the next line (a trailing backslash) goes with its key.
func sanitizeGitConfig(text string) (string, []string) {
	var out, removed []string
	section, drop := "", false
	lines := strings.SplitAfter(text, "\n")
	for _, line := range lines {
		if line == "" {
			continue
		}
		trimmed := strings.TrimSpace(line)
		cont := drop
		drop = false
		switch {
		case cont:
			drop = strings.HasSuffix(trimmed, "\\")
			continue
		case trimmed == "" || trimmed[0] == '#' || trimmed[0] == ';':
		case trimmed[0] == '[':
			section = gitSection(trimmed)
			if rest := trimmed[strings.IndexByte(trimmed, ']')+1:]; strings.TrimSpace(rest) != "" && !strings.HasPrefix(strings.TrimSpace(rest), "#") && !strings.HasPrefix(strings.TrimSpace(rest), ";") {
				removed = append(removed, section+" "+strings.TrimSpace(rest))
				line = trimmed[:strings.IndexByte(trimmed, ']')+1] + "\n"
			}
		default:
			key, _, _ := strings.Cut(trimmed, "=")
			key = section + "." + strings.ToLower(strings.TrimSpace(key))
			if !gitConfigKeys[key] {
				removed = append(removed, key)
				drop = strings.HasSuffix(trimmed, "\\")
				continue
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, ""), removed
}

// gitSection is the section of a header line in gitConfigKeys' form: the section's name
// in lower case, a subsection as "*" ([remote "origin"] and [remote.origin] are remote.*).
func gitSection(header string) string {
	end := strings.IndexByte(header, ']')
	if end < 0 {
		return "?"
	}
	name := strings.TrimSpace(header[1:end])
	if i := strings.IndexAny(name, " \t\""); i >= 0 {
		return strings.ToLower(name[:i]) + ".*"
	}
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return strings.ToLower(name[:i]) + ".*"
	}
	return strings.ToLower(name)
}
