package runner

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/runtime/engine"
)

// ContainerName is arizuko-<folder>-<unix_ms>, or arizuko-<folder>-task-<id>-<unix_ms> for
// a task. The time makes each run's name its own: a finished turn's container is removed
// after its result, so the next run of the same task may start while it is still there.
func ContainerName(f groupfolder.Folder, taskID string, now time.Time) string {
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	if taskID != "" {
		return "arizuko-" + f.ContainerSlug() + "-task-" + taskID + "-" + ms
	}
	return "arizuko-" + f.ContainerSlug() + "-" + ms
}

// QueryTimeout is what the agent gets as ARIZUKO_QUERY_TIMEOUT_MS: the run timeout less the
// 30 s it needs to deliver a summary before the hard kill.
func QueryTimeout(timeout time.Duration) time.Duration {
	if timeout > 2*softGap {
		return timeout - softGap
	}
	return timeout * 3 / 4
}

// AgentOptions are what an agent container's spec takes from the daemon rather than from
// the turn.
type AgentOptions struct {
	Image    string
	Instance string          // the value of engine.LabelInstance
	Rlimits  []engine.Rlimit // nil is engine.DefaultRlimits()
	User     string          // "uid:gid"; "" keeps the image's user
}

// agentTmpfs is the /tmp of an agent container: the only writable path besides its mounts.
var agentTmpfs = engine.Tmpfs{Target: "/tmp", Options: "rw,nosuid,nodev,size=256m,mode=1777"}

// AgentSpec is the one spec of an agent container: what the runner asks the engine to
// create for t, and what `arizukod quadlet` writes as a unit. name is the container's,
// mounts the turn's table (MountTable), timeout the run's. The turn's limits fall back to
// engine.DefaultLimits field by field; t.Env cannot replace the variables set here. The
// run reaches the agent on stdin (contract.Input.RunID), not in the spec, so that a
// container prepared ahead of its run has the same spec.
func AgentSpec(t Turn, name string, mounts []engine.Mount, timeout time.Duration, o AgentOptions) engine.Spec {
	l := t.Limits.Or(engine.DefaultLimits())
	rlimits := o.Rlimits
	if rlimits == nil {
		rlimits = engine.DefaultRlimits()
	}
	s := engine.Spec{
		Name:  name,
		Image: o.Image,
		Labels: map[string]string{
			engine.LabelInstance: o.Instance,
			engine.LabelFolder:   string(t.Folder),
			engine.LabelRole:     "agent",
		},
		Env: []string{
			"HOME=/root",
			"ARIZUKO_FOLDER=" + string(t.Folder),
			"ARIZUKO_QUERY_TIMEOUT_MS=" + strconv.FormatInt(QueryTimeout(timeout).Milliseconds(), 10),
		},
		Mounts:      mounts,
		Tmpfs:       []engine.Tmpfs{agentTmpfs},
		Network:     l.Network,
		MemoryBytes: l.MemoryBytes,
		NanoCPUs:    l.NanoCPUs,
		PidsLimit:   l.PidsLimit,
		Runtime:     l.Runtime,
		Rlimits:     rlimits,
		User:        o.User,
		WorkingDir:  "/workspace",
		Stdin:       true,
		LogMaxBytes: logMaxBytes,
		Timeout:     timeout,
	}
	if t.RunID != "" {
		s.Labels[engine.LabelRun] = t.RunID
	}
	for _, kv := range t.Env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(s.Env, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			s.Env = append(s.Env, kv)
		}
	}
	return s
}

// spec is AgentSpec with this runner's options. On a rootful engine the container runs
// as the daemon's uid:gid, which would otherwise write the agent's files as root; rootless
// Podman already maps the container's root to the daemon's user.
func (r *Runner) spec(t Turn, name string, mounts []engine.Mount, timeout time.Duration) engine.Spec {
	o := AgentOptions{Image: r.cfg.Image, Instance: r.cfg.Instance, Rlimits: r.cfg.Rlimits}
	if !r.info().Rootless {
		o.User = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	}
	return AgentSpec(t, name, mounts, timeout, o)
}

// timeout is the run timeout of t: its own, else the runner's.
func (r *Runner) timeout(t Turn) time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return r.cfg.Timeout
}
