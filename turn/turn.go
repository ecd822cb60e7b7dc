// Package turn builds what one turn of a group needs before its container starts: the
// group's container config, the validated mount table, the system prompt from memory, the
// seeded ~/.claude and the grants. The daemon's queue, `arizukod run --local`, `arizukod
// mounts` and `arizukod prompt` all use it, so they agree on what a turn gets.
//
// It reads the store (groups, sessions, grants) and the group's files; it writes only the
// group's session directory. It must not start containers or touch the queue.
package turn

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/memory"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/session"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/store"
)

// Errors callers branch on.
var (
	// ErrRejectedMount fails a turn closed: a requested mount was refused.
	ErrRejectedMount = errors.New("additional mount rejected")
	// ErrBadContainerConfig says the group's stored container config is unusable.
	ErrBadContainerConfig = errors.New("bad container config")
)

// ContainerConfig is a group's container settings, stored as JSON with the group (seed 003).
type ContainerConfig struct {
	AdditionalMounts []mountsec.MountRequest `json:"additional_mounts,omitempty"`
	// Timeout is the run timeout in milliseconds; 0 keeps the daemon's.
	Timeout int64   `json:"timeout,omitempty"`
	Network string  `json:"network,omitempty"`
	Memory  string  `json:"memory,omitempty"`
	CPUs    float64 `json:"cpus,omitempty"`
	Pids    int64   `json:"pids,omitempty"`
	// Sidecars are the group's MCP sidecars, started around each of its turns.
	Sidecars []sidecar.Config `json:"sidecars,omitempty"`
	// Model is the group's own model policy; nil uses the daemon's credential, any model
	// and no budget.
	Model *ModelPolicy `json:"model,omitempty"`
	// Egress lists the HOST:PORTs the group's agent may reach through the egress proxy.
	Egress []string `json:"egress,omitempty"`
}

// ModelPolicy is what a group's turns may do through the model gateway.
type ModelPolicy struct {
	// Credential names the group's own credential in the credentials directory.
	Credential string `json:"credential,omitempty"`
	// Models, when not empty, are the only models its agent may ask for.
	Models []string `json:"models,omitempty"`
	// TokensPerDay bounds input, output and cache-write tokens over the calendar day.
	TokensPerDay int64 `json:"tokens_per_day,omitempty"`
	// RequestsPerTurn bounds the model requests of one turn.
	RequestsPerTurn int64 `json:"requests_per_turn,omitempty"`
}

// ConfigError is a mistake in a container config. It matches ErrBadContainerConfig
// (errors.Is); Field names the key it is about ("network", "sidecars", "model.models";
// "" for the whole document), for an answer that names it.
type ConfigError struct {
	Field string
	Err   error
}

func (e *ConfigError) Error() string { return ErrBadContainerConfig.Error() + ": " + e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Is reports whether target is ErrBadContainerConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrBadContainerConfig }

func badField(field, format string, args ...any) error {
	return &ConfigError{Field: field, Err: fmt.Errorf(format, args...)}
}

// ParseContainerConfig decodes and checks a container config; unknown fields are
// errors. networks are the named networks the operator allowed
// (limits.allowed_networks): the network, and each sidecar's, must pass
// config.CheckNetwork with them. The returned config's Network is as CheckNetwork
// names it ("" is "none").
func ParseContainerConfig(raw []byte, networks []string) (ContainerConfig, error) {
	var c ContainerConfig
	if len(bytes.TrimSpace(raw)) == 0 {
		return c, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, badField("", "%v", err)
	}
	switch {
	case c.Timeout < 0:
		return c, badField("timeout", "timeout: must not be negative")
	case c.CPUs < 0 || c.CPUs > 1024:
		return c, badField("cpus", "cpus: %v is out of range", c.CPUs)
	case c.Pids < 0:
		return c, badField("pids", "pids: must not be negative")
	}
	if c.Memory != "" {
		if _, err := config.ParseMemory(c.Memory); err != nil {
			return c, badField("memory", "memory: %v", err)
		}
	}
	if c.Network != "" {
		network, err := config.CheckNetwork(c.Network, networks)
		if err != nil {
			return c, &ConfigError{Field: "network", Err: err}
		}
		c.Network = network
	}
	if err := sidecar.Validate(c.Sidecars, networks); err != nil {
		return c, &ConfigError{Field: "sidecars", Err: err}
	}
	if err := gateway.CheckEgress(c.Egress); err != nil {
		return c, &ConfigError{Field: "egress", Err: err}
	}
	if m := c.Model; m != nil {
		switch {
		case m.TokensPerDay < 0:
			return c, badField("model.tokens_per_day", "model.tokens_per_day: must not be negative")
		case m.RequestsPerTurn < 0:
			return c, badField("model.requests_per_turn", "model.requests_per_turn: must not be negative")
		}
		if m.Credential != "" {
			if err := gateway.CheckCredentialName(m.Credential); err != nil {
				return c, badField("model.credential", "model.%v", err)
			}
		}
		for i, name := range m.Models {
			if name == "" || len(name) > 128 {
				return c, badField("model.models", "model.models[%d]: a model name of 1 to 128 characters", i)
			}
		}
	}
	return c, nil
}

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
	Networks    []string
	DiaryMax    int
	EpisodesMax int
	// SettingsEnv is written into settings.json's env.
	SettingsEnv map[string]string
	Now         func() time.Time
	Logger      *slog.Logger
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
}

// Plan is a group's container config with its mounts judged.
type Plan struct {
	Config   ContainerConfig
	Mounts   []mountsec.Mount
	Rejected []mountsec.Rejection
}

// Plan reads f's container config and validates its additional mounts.
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
		}
	}
	if len(p.Config.AdditionalMounts) > 0 {
		p.Mounts, p.Rejected = mountsec.ValidateAll(b.Allowlist, p.Config.AdditionalMounts, f.Depth() == 0)
	}
	return p, nil
}

// Build prepares the turn: plan, prompt, session, grants. A rejected mount is an error
// (ErrRejectedMount) naming the mount and the rule: the turn fails closed.
func (b *Builder) Build(ctx context.Context, req Request) (runner.Turn, error) {
	f := req.Folder
	plan, err := b.Plan(ctx, f)
	if err != nil {
		return runner.Turn{}, err
	}
	if len(plan.Rejected) > 0 {
		r := plan.Rejected[0]
		return runner.Turn{}, fmt.Errorf("%w (%d of %d refused): %v", ErrRejectedMount, len(plan.Rejected), len(plan.Config.AdditionalMounts), r.Err)
	}
	limits, err := b.limits(plan.Config)
	if err != nil {
		return runner.Turn{}, err
	}
	var extra []engine.Mount
	for _, m := range plan.Mounts {
		if err := mountsec.Recheck(m); err != nil {
			return runner.Turn{}, fmt.Errorf("%w: %v", ErrRejectedMount, err)
		}
		extra = append(extra, engine.Mount{Source: m.HostPath, Target: m.ContainerPath, ReadOnly: m.ReadOnly})
	}
	dirs, err := b.Layout.Ensure(f, os.Getuid(), os.Getgid())
	if err != nil {
		return runner.Turn{}, err
	}
	prompt, err := b.Prompt(ctx, f, req.SenderJID)
	if err != nil {
		return runner.Turn{}, err
	}
	sessionID := req.SessionID
	if sessionID == "" && !req.Isolated && b.Store != nil {
		if sessionID, err = b.Store.GetSession(ctx, string(f)); err != nil {
			return runner.Turn{}, err
		}
	}
	grants, err := b.grants(ctx, f)
	if err != nil {
		return runner.Turn{}, err
	}
	err = session.Seed(ctx, dirs.Session, session.Options{
		Folder: string(f), Env: b.SettingsEnv, Skills: b.Skills, Sidecars: sidecar.Names(plan.Config.Sidecars),
		Owner: &session.Owner{UID: os.Getuid(), GID: os.Getgid()}, Logger: b.Logger,
	})
	if err != nil {
		return runner.Turn{}, fmt.Errorf("seed session of %s: %w", f, err)
	}
	timeout := req.Timeout
	if timeout <= 0 && plan.Config.Timeout > 0 {
		timeout = time.Duration(plan.Config.Timeout) * time.Millisecond
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
		Limits:      limits,
		ExtraMounts: extra,
		Timeout:     timeout,
	}, nil
}

// Prompt is the system prompt a turn of f from sender gets.
func (b *Builder) Prompt(ctx context.Context, f groupfolder.Folder, sender string) (string, error) {
	dir, err := b.Layout.GroupDir(f)
	if err != nil {
		return "", err
	}
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	return memory.Assemble(ctx, dir, memory.Options{
		Now: now(), Location: b.Location, Sender: sender,
		DiaryMax: b.DiaryMax, EpisodesMax: b.EpisodesMax, Logger: b.Logger,
	})
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
		m, err := config.ParseMemory(c.Memory)
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
	return l, nil
}
