package session

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/arizuko/arizukod/internal/agentdir"
)

const claudeJSONPath = ".claude.json"

// ConfigHome is the directory of the operator's copy (Options.ConfigDir) that mirrors the
// session home: its .claude/settings.json and .claude/skills/ are the ones the agent runs with.
const ConfigHome = "home"

// ErrInvalidOptions is wrapped when Seed is called without what it needs.
var ErrInvalidOptions = errors.New("invalid session options")

// Options say what to seed.
type Options struct {
	Folder   string            // group folder; keys the stable userID of .claude.json
	Env      map[string]string // env vars arizukod sets in settings.json
	Sidecars []string          // names of the turn's MCP sidecars
	Skills   fs.FS             // the bundled skills tree (container/skills/), e.g. os.DirFS of its install path; nil seeds none
	// ConfigDir is the operator's copy of the code-running configuration
	// (groupfolder.Layout.ClaudeDir): settings.json and the skills are seeded in its
	// home/.claude/, which the runner binds read-only over the session's. Empty seeds
	// them in the session directory itself.
	ConfigDir string
	Owner     *Owner       // owner of what Seed creates (the container's user); nil keeps the daemon's
	Logger    *slog.Logger // nil discards logs
}

// Seed prepares the session directory sessionDir (data/sessions/<folder>/,
// which must exist; groupfolder creates it) before a turn: it merges
// .claude/settings.json, creates .claude.json if missing and seeds or
// migrates .claude/skills/. It is safe to call before every turn; the
// package documentation says what each file gets.
func Seed(ctx context.Context, sessionDir string, opt Options) error {
	if opt.Folder == "" {
		return fmt.Errorf("%w: Folder is empty", ErrInvalidOptions)
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	root, err := agentdir.Open(sessionDir)
	if err != nil {
		return fmt.Errorf("session: open session directory: %w", err)
	}
	defer root.Close()
	t := tree{root: root, owner: opt.Owner}
	conf := t
	if opt.ConfigDir != "" {
		home, err := openHome(opt.ConfigDir)
		if err != nil {
			return err
		}
		defer home.Close()
		conf = tree{root: home}
	}
	if err := conf.writeSettings(opt.Env, opt.Sidecars); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.ensureClaudeJSON(opt.Folder, opt.Sidecars, log); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if opt.Skills == nil {
		// No bundled skills on this host: nothing to seed or migrate.
		return nil
	}
	return conf.seedSkills(ctx, opt.Skills, log)
}

// openHome opens (making it when missing) the home/ of the operator's copy configDir.
func openHome(configDir string) (*agentdir.Dir, error) {
	root, err := agentdir.Open(configDir)
	if err != nil {
		return nil, fmt.Errorf("session: open the operator's copy: %w", err)
	}
	defer root.Close()
	if err := (tree{root: root}).mkdirAll(ConfigHome); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	home, err := root.Dir(ConfigHome)
	if err != nil {
		return nil, fmt.Errorf("session: open the operator's copy: %w", err)
	}
	return home, nil
}

// UserID is the userID of a folder's .claude.json: the hex SHA-256 of
// "arizuko:" + folder, stable across turns and re-seeding.
func UserID(folder string) string {
	sum := sha256.Sum256([]byte("arizuko:" + folder))
	return hex.EncodeToString(sum[:])
}

type claudeProject struct {
	HasTrustDialogAccepted bool `json:"hasTrustDialogAccepted"`
}

// claudeJSON is what a new .claude.json holds: enough for Claude Code to skip
// its first-run onboarding and the trust dialog of /workspace.
type claudeJSON struct {
	HasCompletedOnboarding bool                     `json:"hasCompletedOnboarding"`
	Projects               map[string]claudeProject `json:"projects"`
	UserID                 string                   `json:"userID"`
}

func (t tree) ensureClaudeJSON(folder string, sidecars []string, log *slog.Logger) error {
	data, err := json.MarshalIndent(claudeJSON{
		HasCompletedOnboarding: true,
		Projects:               map[string]claudeProject{"/workspace": {HasTrustDialogAccepted: true}},
		UserID:                 UserID(folder),
	}, "", "  ")
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	created, err := t.createIfMissing(claudeJSONPath, append(data, '\n'), secretMode)
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	if created {
		log.Info("session: created .claude.json", "path", t.path(claudeJSONPath))
	}
	return t.mergeClaudeJSON(sidecars, log)
}

// mergeClaudeJSON sets the MCP servers in .claude.json, where Claude Code reads them. A
// file that is not a JSON object is Claude Code's or the operator's business: it is left
// alone, with a warning, and the turn runs without arizuko's tools rather than not at all.
func (t tree) mergeClaudeJSON(sidecars []string, log *slog.Logger) error {
	existing, st, err := t.readRegular(claudeJSONPath)
	if err != nil {
		log.Warn("session: .claude.json unreadable: the agent gets no MCP servers", "path", t.path(claudeJSONPath), "err", err)
		return nil
	}
	merged, removed, err := MergeClaudeJSON(existing, sidecars)
	if errors.Is(err, ErrCorruptSettings) {
		log.Warn("session: .claude.json is not a JSON object: the agent gets no MCP servers", "path", t.path(claudeJSONPath), "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("session: %s: %w", t.path(claudeJSONPath), err)
	}
	if bytes.Equal(merged, existing) {
		return nil
	}
	if err := t.writeAtomic(claudeJSONPath, merged, st.Mode().Perm()); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	for _, r := range removed {
		log.Warn("session: refused an MCP entry the agent planted in .claude.json: removed", "path", t.path(claudeJSONPath), "entry", r)
	}
	return nil
}
