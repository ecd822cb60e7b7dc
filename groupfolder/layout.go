package groupfolder

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/arizuko/arizukod/contract"
)

// ErrOutsideDataDir is wrapped when a path is not inside the data directory.
var ErrOutsideDataDir = errors.New("path outside the data directory")

// ErrBadDataDir is wrapped when Layout.DataDir is not an absolute, clean path.
var ErrBadDataDir = errors.New("invalid data directory")

// Layout maps folders to directories under DataDir (absolute and clean; use
// NewLayout to get one checked). DataDir itself may be a symlink chosen by the
// operator; nothing below it may be.
type Layout struct {
	DataDir string
}

// NewLayout checks dataDir (absolute, clean, not "/", no NUL) and returns a Layout.
func NewLayout(dataDir string) (Layout, error) {
	l := Layout{DataDir: dataDir}
	return l, l.check()
}

func (l Layout) check() error {
	d := l.DataDir
	switch {
	case d == "":
		return fmt.Errorf("%w: empty", ErrBadDataDir)
	case strings.IndexByte(d, 0) >= 0:
		return fmt.Errorf("%w %q: contains a NUL byte", ErrBadDataDir, d)
	case !filepath.IsAbs(d):
		return fmt.Errorf("%w %q: not an absolute path", ErrBadDataDir, d)
	case filepath.Clean(d) != d:
		return fmt.Errorf("%w %q: not clean, want %q", ErrBadDataDir, d, filepath.Clean(d))
	case d == "/":
		return fmt.Errorf("%w %q: the filesystem root cannot be the data directory", ErrBadDataDir, d)
	}
	return nil
}

// Within returns nil when path is DataDir itself or lexically inside it
// (whole components: /data2 is not inside /data). path must be absolute and
// clean; ".." components and NUL bytes are refused rather than interpreted.
func (l Layout) Within(path string) error {
	if err := l.check(); err != nil {
		return err
	}
	switch {
	case strings.IndexByte(path, 0) >= 0:
		return fmt.Errorf("%w: %q contains a NUL byte", ErrOutsideDataDir, path)
	case !filepath.IsAbs(path) || filepath.Clean(path) != path:
		return fmt.Errorf("%w: %q is not an absolute clean path", ErrOutsideDataDir, path)
	case path == l.DataDir:
		return nil
	case !strings.HasPrefix(path, l.DataDir+"/"):
		return fmt.Errorf("%w: %q is not under %q", ErrOutsideDataDir, path, l.DataDir)
	}
	return nil
}

// build joins parts under DataDir and proves the result stays inside it.
func (l Layout) build(parts ...string) (string, error) {
	p := filepath.Join(append([]string{l.DataDir}, parts...)...)
	if err := l.Within(p); err != nil {
		return "", err
	}
	return p, nil
}

func (l Layout) buildFor(f Folder, parts ...string) (string, error) {
	if err := f.Validate(); err != nil {
		return "", err
	}
	return l.build(parts...)
}

// GroupDir is DataDir/groups/<folder>: the group's working directory (/workspace).
func (l Layout) GroupDir(f Folder) (string, error) {
	return l.buildFor(f, "groups", string(f))
}

// ShareDir is DataDir/groups/<world>/share: state shared by every group of the world.
func (l Layout) ShareDir(f Folder) (string, error) {
	return l.buildFor(f, "groups", string(f.World()), "share")
}

// GlobalDir is DataDir/groups/global: the knowledge every group of the host shares
// (seed 003), mounted at /workspace/global, read-write for the root groups, which own it,
// and read-only for every other group. "global" is a reserved segment, so no group's
// directory is this one.
func (l Layout) GlobalDir() (string, error) {
	return l.build("groups", "global")
}

// SessionDir is DataDir/sessions/<slug>: the agent's session state (/root). Sessions
// are flat, named by the folder's slug (main/research -> main-research), so that a
// parent's session directory never contains a child's: a parent's agent cannot edit the
// settings.json a child's agent will run with.
func (l Layout) SessionDir(f Folder) (string, error) {
	return l.buildFor(f, "sessions", f.ContainerSlug())
}

// ClaudeDir is DataDir/claude/<slug>: the operator's copy of the Claude Code
// configuration that runs code (settings, skills, commands, agents, MCP entries) for f's
// turns. It is the daemon's, never mounted writable: its files are bound read-only over
// their places in the session home and the group folder, so an agent cannot plant code
// that its next turn would run.
func (l Layout) ClaudeDir(f Folder) (string, error) {
	return l.buildFor(f, "claude", f.ContainerSlug())
}

// IPCDir is DataDir/ipc/<slug>: the group's MCP sockets. Flat like the sessions, so that a
// parent's container, which has its own IPC directory mounted, never sees a child's
// router.sock or input/ and cannot act as the child.
func (l Layout) IPCDir(f Folder) (string, error) {
	return l.buildFor(f, "ipc", f.ContainerSlug())
}

// IPCInputDir is IPCDir/input.
func (l Layout) IPCInputDir(f Folder) (string, error) {
	return l.buildFor(f, "ipc", f.ContainerSlug(), contract.InputDir)
}

// SidecarSocketDir is IPCDir/sidecars.
func (l Layout) SidecarSocketDir(f Folder) (string, error) {
	return l.buildFor(f, "ipc", f.ContainerSlug(), contract.SidecarDir)
}

// MediaDir is GroupDir/media.
func (l Layout) MediaDir(f Folder) (string, error) {
	return l.buildFor(f, "groups", string(f), "media")
}

// LogsDir is GroupDir/logs.
func (l Layout) LogsDir(f Folder) (string, error) {
	return l.buildFor(f, "groups", string(f), "logs")
}

// ProjectsDir is DataDir/projects: the groups' own git repositories of their projects
// (package project), one per folder slug.
func (l Layout) ProjectsDir() (string, error) { return l.build("projects") }

// EnvDir is DataDir/env, holding the filtered env file.
func (l Layout) EnvDir() (string, error) { return l.build("env") }

// EnvFile is DataDir/env/env, mounted read-only at /workspace/env-dir/env.
func (l Layout) EnvFile() (string, error) { return l.build("env", "env") }

// EgressCAName is the file of DataDir/env holding the egress proxy's CA certificate,
// mounted read-only at contract.EgressCAFile.
const EgressCAName = "egress-ca.pem"

// EgressCAFile is DataDir/env/egress-ca.pem.
func (l Layout) EgressCAFile() (string, error) { return l.build("env", EgressCAName) }

// EgressCAKeyPath is DataDir/egress-ca.key, the egress proxy's CA key and certificate.
// It is never mounted.
func (l Layout) EgressCAKeyPath() (string, error) { return l.build("egress-ca.key") }

// RelayCAKeyPath is DataDir/relay-ca.key, the key and certificate of the CA of the
// Kubernetes relay (noderelay), which signs the central's and the nodes' certificates. It
// is never mounted, and never leaves the central.
func (l Layout) RelayCAKeyPath() (string, error) { return l.build("relay-ca.key") }

// TokenSecretPath is DataDir/model-token.key, the secret the per-turn model tokens are
// derived from. It is never mounted.
func (l Layout) TokenSecretPath() (string, error) { return l.build("model-token.key") }

// StorePath is DataDir/arizukod.db.
func (l Layout) StorePath() (string, error) { return l.build("arizukod.db") }

// Dirs are the absolute directories of one folder.
type Dirs struct {
	Group          string // DataDir/groups/<folder>
	Share          string // DataDir/groups/<world>/share
	Global         string // DataDir/groups/global
	Session        string // DataDir/sessions/<slug>
	Claude         string // DataDir/claude/<slug>
	IPC            string // DataDir/ipc/<slug>
	IPCInput       string // DataDir/ipc/<slug>/input
	SidecarSockets string // DataDir/ipc/<slug>/sidecars
	Media          string // DataDir/groups/<folder>/media
	Logs           string // DataDir/groups/<folder>/logs
}

// Paths returns all of f's directories without touching the filesystem.
func (l Layout) Paths(f Folder) (Dirs, error) {
	var d Dirs
	for _, e := range []struct {
		dst *string
		fn  func(Folder) (string, error)
	}{
		{&d.Group, l.GroupDir},
		{&d.Share, l.ShareDir},
		{&d.Global, func(Folder) (string, error) { return l.GlobalDir() }},
		{&d.Session, l.SessionDir},
		{&d.Claude, l.ClaudeDir},
		{&d.IPC, l.IPCDir},
		{&d.IPCInput, l.IPCInputDir},
		{&d.SidecarSockets, l.SidecarSocketDir},
		{&d.Media, l.MediaDir},
		{&d.Logs, l.LogsDir},
	} {
		p, err := e.fn(f)
		if err != nil {
			return Dirs{}, err
		}
		*e.dst = p
	}
	return d, nil
}
