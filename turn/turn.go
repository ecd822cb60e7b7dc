// Package turn is one turn of a group from start to end (Builder.Run): what it needs
// before its container starts (the group's container config, read once; the validated
// mount table; its directories, made once; the system prompt from memory; the seeded
// ~/.claude; the grants), the services that live exactly as long as the container
// (Services: the group's sidecars, its MCP server, model gateway and egress proxy), and the
// container itself, which a Runner runs. The daemon's queue and `arizukod run --local` both
// run turns through it, and `arizukod mounts`, `prompt` and `quadlet` read its plan, so
// they all agree on what a turn gets.
//
// It reads the store (groups, sessions, grants) and the group's files and writes the
// group's session directory; its services record usage, egress and outbox rows through
// the store. It must not touch the queue or an engine: the runner and the sidecar manager
// it is handed do.
package turn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/ipc/policy"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/memory"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/project"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/session"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/tracing"
)

// Errors callers branch on.
var (
	// ErrRejectedMount fails a turn closed: a requested mount was refused.
	ErrRejectedMount = errors.New("additional mount rejected")
	// ErrBadContainerConfig says the group's stored container config is unusable.
	ErrBadContainerConfig = errors.New("bad container config")
)

// Store is what the builder reads.
type Store interface {
	GetGroup(ctx context.Context, folder string) (*store.Group, error)
	GetSession(ctx context.Context, folder string) (string, error)
	GetGrants(ctx context.Context, folder string) ([]string, error)
}

// Builder builds turns. Its fields are set once by the caller.
type Builder struct {
	Layout groupfolder.Layout
	Store  Store
	// Allowlist validates additional mounts; nil refuses them all, saying AllowlistErr.
	Allowlist    *mountsec.Allowlist
	AllowlistErr error
	// Skills is the bundled skills tree seeded into each session; nil seeds none.
	Skills   fs.FS
	Location *time.Location
	// Limits are the daemon's defaults; a group's container config overrides them.
	Limits engine.Limits
	// Networks are the named networks a group may name (limits.allowed_networks).
	Networks []string
	// Runtimes are the OCI runtimes a group may name (limits.allowed_runtimes).
	Runtimes    []string
	DiaryMax    int
	EpisodesMax int
	// SettingsEnv is written into settings.json's env, over session.ClaudeEnv.
	SettingsEnv map[string]string
	Now         func() time.Time
	Logger      *slog.Logger
	// Services are started around each turn Run runs; nil starts none.
	Services *Services
	// Projects gives a group with a project its repository at /workspace/project and takes
	// its branch back after each turn; nil gives none.
	Projects *project.Manager
	// Tracer gets the trace of each turn Run runs; nil traces none.
	Tracer *tracing.Tracer
}

// Request is one turn to build.
type Request struct {
	RunID     string
	Folder    groupfolder.Folder
	TaskID    string
	Messages  []contract.Message
	SessionID string // empty continues the folder's stored session
	SenderJID string
	ChatJID   string // the chat the turn answers; empty: the last message's that has one
	Timeout   time.Duration
	// Isolated turns (scheduled tasks) start a fresh session.
	Isolated bool
	// Recorded says the run is a row of the store: its outbox rows, model usage and
	// egress are recorded against it.
	Recorded bool
	// Queued and Picked, when set, are when the run was queued and when the queue started
	// it: its trace shows the wait.
	Queued, Picked time.Time
	// Adopt, when set, adopts a running container instead of creating one.
	Adopt *Adoption
	// Wake is called with a folder after an MCP tool put a message into its inbox; nil
	// when nothing waits for inbox messages.
	Wake func(folder string)
}

// Plan is a group's container config with its mounts judged, and the model policy its
// turns run under.
type Plan struct {
	Config   ContainerConfig
	Mounts   []mountsec.Mount
	Rejected []mountsec.Rejection
	Model    EffectiveModel
}

// Plan reads f's container config and validates its additional mounts, and reads the
// model policies of f's ancestors, which bind f too.
func (b *Builder) Plan(ctx context.Context, f groupfolder.Folder) (Plan, error) {
	var p Plan
	if b.Store != nil {
		g, err := b.Store.GetGroup(ctx, string(f))
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return p, err
		default:
			if p.Config, err = ParseContainerConfig(g.ContainerConfig, b.Networks); err != nil {
				return p, fmt.Errorf("group %s: %w", f, err)
			}
			if err = p.Config.CheckRuntime(b.Runtimes); err != nil {
				return p, fmt.Errorf("group %s: %w", f, err)
			}
		}
		if p.Model, err = b.effectiveModel(ctx, f, p.Config.Model); err != nil {
			return p, err
		}
	}
	if len(p.Config.AdditionalMounts) > 0 {
		p.Mounts, p.Rejected = mountsec.ValidateAll(b.Allowlist, p.Config.AdditionalMounts, f.Depth() == 0)
	}
	return p, nil
}

// effectiveModel is the model policy of f, whose own is own: its ancestors' policies
// and its own together.
func (b *Builder) effectiveModel(ctx context.Context, f groupfolder.Folder, own *ModelPolicy) (EffectiveModel, error) {
	path, policies := []groupfolder.Folder{f}, []*ModelPolicy{own}
	for a, ok := f.Parent(); ok; a, ok = a.Parent() {
		g, err := b.Store.GetGroup(ctx, string(a))
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return EffectiveModel{}, err
		}
		p, err := parseModelPolicy(g.ContainerConfig)
		if err != nil {
			return EffectiveModel{}, fmt.Errorf("group %s, an ancestor of %s: %w", a, f, err)
		}
		path, policies = slices.Insert(path, 0, a), slices.Insert(policies, 0, p)
	}
	m, err := effectiveModel(path, policies)
	if err != nil {
		return m, fmt.Errorf("group %s: %w", f, err)
	}
	return m, nil
}

// Build prepares the turn without starting anything: plan, directories, prompt, session,
// grants. A rejected mount is an error (ErrRejectedMount) naming the mount and the rule:
// the turn fails closed.
func (b *Builder) Build(ctx context.Context, req Request) (runner.Turn, error) {
	t, _, _, err := b.build(ctx, req)
	return t, err
}

// build is Build, with the plan it read and the directories it made, for the services.
func (b *Builder) build(ctx context.Context, req Request) (runner.Turn, Plan, groupfolder.Dirs, error) {
	f := req.Folder
	var dirs groupfolder.Dirs
	plan, err := b.Plan(ctx, f)
	if err != nil {
		return runner.Turn{}, plan, dirs, err
	}
	if len(plan.Rejected) > 0 {
		r := plan.Rejected[0]
		return runner.Turn{}, plan, dirs, fmt.Errorf("%w (%d of %d refused): %v", ErrRejectedMount, len(plan.Rejected), len(plan.Config.AdditionalMounts), r.Err)
	}
	limits, extra, err := b.containerLimits(plan)
	if err != nil {
		return runner.Turn{}, plan, dirs, err
	}
	if dirs, err = b.Layout.Ensure(f, os.Getuid(), os.Getgid()); err != nil {
		return runner.Turn{}, plan, dirs, err
	}
	var projectMounts []engine.Mount
	if b.Projects != nil {
		if projectMounts, err = b.Projects.Mounts(ctx, f); err != nil {
			return runner.Turn{}, plan, dirs, err
		}
	}
	prompt, err := b.prompt(ctx, f, req.SenderJID, b.turnLog(req))
	if err != nil {
		return runner.Turn{}, plan, dirs, err
	}
	sessionID := req.SessionID
	if sessionID == "" && !req.Isolated && b.Store != nil {
		if sessionID, err = b.Store.GetSession(ctx, string(f)); err != nil {
			return runner.Turn{}, plan, dirs, err
		}
	}
	grants, err := b.grants(ctx, f)
	if err != nil {
		return runner.Turn{}, plan, dirs, err
	}
	env := session.ClaudeEnv(string(f))
	maps.Copy(env, b.SettingsEnv)
	err = session.Seed(ctx, dirs.Session, session.Options{
		Folder: string(f), Env: env, Skills: b.Skills, Sidecars: sidecar.Names(plan.Config.Sidecars),
		Owner: &session.Owner{UID: os.Getuid(), GID: os.Getgid()}, Logger: b.turnLog(req), ConfigDir: dirs.Claude,
	})
	if err != nil {
		return runner.Turn{}, plan, dirs, fmt.Errorf("seed session of %s: %w", f, err)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = plan.timeout()
	}
	return runner.Turn{
		RunID:  req.RunID,
		Folder: f,
		TaskID: req.TaskID,
		Input: contract.Input{
			SessionID:    sessionID,
			Messages:     req.Messages,
			SystemPrompt: prompt,
			Grants:       grants,
			SenderJID:    req.SenderJID,
			ChatJID:      cmp.Or(req.ChatJID, contract.ReplyChat(req.Messages)),
		},
		Limits:        limits,
		ProjectMounts: projectMounts,
		ExtraMounts:   extra,
		Timeout:       timeout,
	}, plan, dirs, nil
}

// timeout is the group's own run timeout; 0 leaves it to the runner.
func (p Plan) timeout() time.Duration {
	return time.Duration(p.Config.Timeout) * time.Millisecond
}

// turnLog is the builder's logger with the journal fields of req's turn, which every line
// of a turn carries.
func (b *Builder) turnLog(req Request) *slog.Logger {
	log := b.Logger
	if log == nil {
		log = slog.Default()
	}
	return log.With(logging.FieldRunID, req.RunID, logging.FieldFolder, string(req.Folder))
}

// containerLimits are the limits and the additional mounts (each checked again on disk)
// of a turn with plan.
func (b *Builder) containerLimits(plan Plan) (engine.Limits, []engine.Mount, error) {
	limits, err := b.limits(plan.Config)
	if err != nil {
		return limits, nil, err
	}
	var extra []engine.Mount
	for _, m := range plan.Mounts {
		if err := mountsec.Recheck(m); err != nil {
			return limits, nil, fmt.Errorf("%w: %v", ErrRejectedMount, err)
		}
		extra = append(extra, engine.Mount{Source: m.HostPath, Target: m.ContainerPath, ReadOnly: m.ReadOnly})
	}
	return limits, extra, nil
}

// Prompt is the system prompt a turn of f from sender gets: the group's memory
// (memory.AssembleDir), then, with a store (the daemon, `run --local`), the shared global
// folder (globalSection) and its grants in words (grantsSection).
func (b *Builder) Prompt(ctx context.Context, f groupfolder.Folder, sender string) (string, error) {
	return b.prompt(ctx, f, sender, b.Logger)
}

// prompt is Prompt, logging to log (a turn's lines carry its run).
func (b *Builder) prompt(ctx context.Context, f groupfolder.Folder, sender string, log *slog.Logger) (string, error) {
	dir, err := b.Layout.OpenGroup(f)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	mem, err := memory.AssembleDir(ctx, dir, memory.Options{
		Now: now(), Location: b.Location, Sender: sender,
		DiaryMax: b.DiaryMax, EpisodesMax: b.EpisodesMax, Logger: log,
	})
	if err != nil || b.Store == nil {
		return mem, err
	}
	grants, err := b.grants(ctx, f)
	if err != nil {
		return "", err
	}
	proj, err := b.projectSection(ctx, f)
	if err != nil {
		return "", err
	}
	return mem + globalSection(f) + proj + grantsSection(f, grants), nil
}

// projectSection says, for a group with a project, where its checkout is and where its
// commits go; "" for a group without one.
func (b *Builder) projectSection(ctx context.Context, f groupfolder.Folder) (string, error) {
	if b.Projects == nil {
		return "", nil
	}
	info, err := b.Projects.Get(ctx, string(f))
	if errors.Is(err, project.ErrNoProject) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return memory.Section("project", []string{"path", project.Target, "branch", info.Branch},
		fmt.Sprintf("%s is a checkout of the operator's git repository, on your group's branch %s; the repository's other branches, as they were when your turn began, are origin/<branch>. Work and commit there with git; "+
			"when your turn ends, your commits on %s reach the operator's repository, who merges them. "+
			"Other branches, the repository's config and hooks are not yours: what you change of them stays in your checkout.\n",
			project.Target, info.Branch, info.Branch)), nil
}

// globalSection says that /workspace/global exists (seed 003's groups/global): the root
// groups write it, every group reads it.
func globalSection(f groupfolder.Folder) string {
	if f.Depth() == 0 {
		return memory.Section("global", []string{"path", "/workspace/global", "access", "read-write"},
			"/workspace/global is the knowledge every group of this host shares. Your group is a root group: you keep it; every other group reads what you write there, read-only.\n")
	}
	return memory.Section("global", []string{"path", "/workspace/global", "access", "read-only"},
		"/workspace/global is the knowledge every group of this host shares, kept by the root groups. Read it when it helps; you cannot write it.\n")
}

// grantsSection is the <grants> block of the prompt: what the group's tier and grant
// rules let its agent do with arizuko's tools, in words (policy.Words), as the MCP server
// decides it: no rules stored is none allowed, rules that do not parse refuse every call.
func grantsSection(f groupfolder.Folder, list []string) string {
	var text string
	rules, err := policy.ParseRules(list)
	switch {
	case len(list) == 0:
		text = policy.Words(string(f), policy.Rules{})
	case err != nil:
		text = fmt.Sprintf("The grant rules of %s do not parse, so every call of your arizuko tools is refused: %v\n", f, err)
	default:
		text = policy.Words(string(f), rules)
	}
	return memory.Section("grants", []string{"folder", string(f)}, text)
}

func (b *Builder) grants(ctx context.Context, f groupfolder.Folder) ([]string, error) {
	if b.Store == nil {
		return []string{"*"}, nil
	}
	g, err := b.Store.GetGrants(ctx, string(f))
	if errors.Is(err, store.ErrNotFound) {
		return []string{"*"}, nil
	}
	return g, err
}

func (b *Builder) limits(c ContainerConfig) (engine.Limits, error) {
	l := b.Limits
	if c.Memory != "" {
		m, err := engine.ParseMemory(c.Memory)
		if err != nil {
			return l, badField("memory", "memory: %v", err)
		}
		l.MemoryBytes = m
	}
	if c.CPUs > 0 {
		l.NanoCPUs = int64(c.CPUs * 1e9)
	}
	if c.Pids > 0 {
		l.PidsLimit = c.Pids
	}
	if c.Network != "" {
		l.Network = c.Network
	}
	if c.Runtime != "" {
		l.Runtime = c.Runtime
	}
	return l, nil
}
