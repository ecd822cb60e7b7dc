package runner

import (
	"fmt"
	"os"
	"strings"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/runtime/engine"
)

// MountOptions are the daemon-wide sources of a turn's mount table; empty ones are left out.
type MountOptions struct {
	SkillsDir string
	WebDir    string
	EnvFile   string
	// EgressCA is the certificate of the egress proxy's CA (never its key).
	EgressCA string
	GitRepo  bool // the group folder is a git repository: its hooks and config are bound read-only too
}

// NewMountOptions are the mount options of a data directory: the skills and web
// directories given, and the filtered env file and the egress CA's certificate when the
// layout has them.
func NewMountOptions(l groupfolder.Layout, skillsDir, webDir string) MountOptions {
	o := MountOptions{SkillsDir: skillsDir, WebDir: webDir}
	o.EnvFile = regularFile(l.EnvFile())
	o.EgressCA = regularFile(l.EgressCAFile())
	return o
}

// regularFile is path when it names a regular file, else "".
func regularFile(path string, err error) string {
	if err != nil {
		return ""
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		return path
	}
	return ""
}

// ExtraMounts are a group's validated additional mounts as mounts of its turns.
func ExtraMounts(ms []mountsec.Mount) []engine.Mount {
	var extra []engine.Mount
	for _, m := range ms {
		extra = append(extra, engine.Mount{Source: m.HostPath, Target: m.ContainerPath, ReadOnly: m.ReadOnly})
	}
	return extra
}

// MountTable is the mount table of a turn of f, in the order the engine gets it: the seed's
// table, then the group's project (package project: its working tree at
// /workspace/project and what is bound into it), then the additional mounts (already
// validated). Parents come before the mounts
// nested in them. media/ and, for a world's own turns, share/ live inside the group
// directory already: mounting them again would only add a window for a symlink swap.
// groups/global is every group's /workspace/global, written only by the root groups.
// After the session and IPC mounts come the read-only binds of the operator's copy of the
// code-running configuration (protect.go).
func MountTable(f groupfolder.Folder, d groupfolder.Dirs, o MountOptions, project, extra []engine.Mount) []engine.Mount {
	m := []engine.Mount{{Source: d.Group, Target: "/workspace", Origin: "group"}}
	if f.Depth() > 0 {
		m = append(m, engine.Mount{Source: d.Share, Target: "/workspace/share", Origin: "share"})
	}
	m = append(m, engine.Mount{Source: d.Global, Target: "/workspace/global", ReadOnly: f.Depth() > 0, Origin: "global"})
	m = append(m, engine.Mount{Source: d.Session, Target: "/root", Origin: "session"}, engine.Mount{Source: d.IPC, Target: contract.IPCDir, Origin: "ipc"})
	m = append(m, protectedMounts(d, o.GitRepo)...)
	if o.SkillsDir != "" {
		m = append(m, engine.Mount{Source: o.SkillsDir, Target: "/skills", ReadOnly: true, Origin: "skills"})
	}
	if o.WebDir != "" {
		m = append(m, engine.Mount{Source: o.WebDir, Target: "/workspace/web", ReadOnly: true, Origin: "web"})
	}
	if o.EnvFile != "" {
		m = append(m, engine.Mount{Source: o.EnvFile, Target: "/workspace/env-dir/env", ReadOnly: true, Origin: "env"})
	}
	if o.EgressCA != "" {
		m = append(m, engine.Mount{Source: o.EgressCA, Target: contract.EgressCAFile, ReadOnly: true, Origin: "egress-ca"})
	}
	for _, p := range project {
		p.Origin = "project"
		m = append(m, p)
	}
	for _, e := range extra {
		e.Origin = "extra"
		m = append(m, e)
	}
	return m
}

// Where a project's mounts may go: its working tree and what is bound into it, and the
// repository's objects.
const (
	projectDir     = "/workspace/project"
	projectObjects = "/var/lib/arizuko/project-objects"
)

// Mounts is MountTable for a turn of this runner, with every source checked.
func (r *Runner) Mounts(f groupfolder.Folder, d groupfolder.Dirs, project, extra []engine.Mount) ([]engine.Mount, error) {
	o := NewMountOptions(r.cfg.Layout, r.cfg.SkillsDir, r.cfg.WebDir)
	for _, p := range project {
		if p.Target != projectDir && !strings.HasPrefix(p.Target, projectDir+"/") && p.Target != projectObjects {
			return nil, fmt.Errorf("project mount %s: target %q is not %s or below it, nor %s", p.Source, p.Target, projectDir, projectObjects)
		}
	}
	for _, e := range extra {
		if !strings.HasPrefix(e.Target, "/workspace/extra/") {
			return nil, fmt.Errorf("additional mount %s: target %q is not under /workspace/extra", e.Source, e.Target)
		}
	}
	var err error
	if o.GitRepo, err = r.protect(f, d); err != nil {
		return nil, fmt.Errorf("protect the configuration of %s: %w", f, err)
	}
	m := MountTable(f, d, o, project, extra)
	for _, x := range m {
		if _, err := os.Stat(x.Source); err != nil {
			return nil, fmt.Errorf("mount %s -> %s: source unusable: %w", x.Source, x.Target, err)
		}
	}
	return m, nil
}
