package groupfolder

import (
	"path/filepath"
	"strings"

	"github.com/arizuko/arizukod/internal/agentdir"
)

// The directories an agent can write, opened as agentdir.Dir: the daemon's top-level
// directory (groups, sessions, ipc) is opened by path, everything below it through its
// descriptor without following a link, so an agent that swapped a directory of its own
// (or an ancestor's agent, which can write a child's group folder) for a symlink makes
// the open fail instead of leading the daemon elsewhere. The caller closes the Dir.

// OpenGroup opens f's group directory, groups/<folder>.
func (l Layout) OpenGroup(f Folder) (*agentdir.Dir, error) {
	return l.openBelow("groups", strings.Join(f.Segments(), "/"))
}

// OpenSession opens f's session directory (the agent's ~/.claude home), sessions/<slug>.
func (l Layout) OpenSession(f Folder) (*agentdir.Dir, error) {
	return l.openBelow("sessions", f.ContainerSlug())
}

// OpenIPC opens f's IPC directory, ipc/<slug>, which the agent sees at
// /var/run/pub/arizuko: its input/ and sidecars/ are reached through it.
func (l Layout) OpenIPC(f Folder) (*agentdir.Dir, error) {
	return l.openBelow("ipc", f.ContainerSlug())
}

func (l Layout) openBelow(top, rel string) (*agentdir.Dir, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	d, err := agentdir.Open(filepath.Join(l.DataDir, top))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Dir(rel)
}
