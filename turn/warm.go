package turn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/agentdir"
	"github.com/arizuko/arizukod/ipc"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/scheduler"
)

// Warm agents (runtime/runner's warm.go): a folder's next agent started ahead, with the
// prepare line of the turn it will serve. Here: which folders may have one (no sidecars:
// Claude Code connects every MCP server at its start, and a sidecar is a program of the
// group's that would then run before its turn, with what it reaches; such a folder keeps
// the created, unstarted prepared container), what else it is keyed by (homeKey: the home
// arizukod seeds, which Claude Code reads at its start), and the MCP server it connects to
// at its start, held (it refuses every tools/call) until the turn that takes it binds it.

// warmable says whether a turn of plan may run in a warm agent.
func warmable(plan Plan) bool { return len(plan.Config.Sidecars) == 0 }

// homeKey is a digest of what arizukod seeds for the agent and Claude Code reads at its
// start: the operator's copy (settings, skills, commands, agents, the home's startup files,
// the project's .claude and .mcp.json: groupfolder.Layout.ClaudeDir) and the MCP servers of
// the session's .claude.json. A warm agent prepared with another is not used.
func homeKey(layout groupfolder.Layout, f groupfolder.Folder, dirs groupfolder.Dirs) (string, error) {
	h := sha256.New()
	// The operator's copy is the daemon's, never mounted writable: plain reads. Another
	// turn of f may be completing it meanwhile (runner's protect): its files in flight are
	// not content, and a name gone before it is read was one of them.
	err := filepath.WalkDir(dirs.Claude, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if agentdir.IsTemp(d.Name()) {
			return nil
		}
		rel, _ := filepath.Rel(dirs.Claude, p)
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%v\x00%d\x00", rel, info.Mode(), info.Size())
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("the operator's copy of %s: %w", f, err)
	}
	// .claude.json is the agent's ground (and Claude Code rewrites it): only its MCP
	// servers, which arizukod reduces to its own before every turn, count.
	sess, err := layout.OpenSession(f)
	if err != nil {
		return "", err
	}
	defer sess.Close()
	if b, err := sess.ReadFile(".claude.json", 16<<20); err == nil {
		var top struct {
			MCPServers json.RawMessage `json:"mcpServers"`
		}
		if json.Unmarshal(b, &top) == nil {
			h.Write(top.MCPServers)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// held is the MCP server a folder's warm agents connect to before their turn.
type held struct {
	srv  *ipc.Server
	refs int
}

// Warm is what the warm agents of the folders hold: the MCP servers held for them, and the
// last sender of each folder. Its zero value is ready; one is shared by the Services of
// every reload of a daemon.
type Warm struct {
	mu      sync.Mutex
	held    map[groupfolder.Folder]*held
	senders map[groupfolder.Folder]string
}

// hold starts (or shares) f's held MCP server on its router.sock; release stops it once
// no warm agent of f waits for it and no turn took it.
func (s *Services) hold(ctx context.Context, layout groupfolder.Layout, f groupfolder.Folder, dirs groupfolder.Dirs) (func(), error) {
	w := s.Warm
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.held[f]
	if h == nil {
		log := s.logger().With(logging.FieldFolder, string(f))
		srv, err := ipc.Start(ctx, ipc.ServerConfig{
			Folder: string(f), SocketPath: filepath.Join(dirs.IPC, contract.RouterSocket),
			OpenGroup: func() (*agentdir.Dir, error) { return layout.OpenGroup(f) },
			Store:     s.Store, Logger: log, Held: true,
			NextRun: func(kind, expr string, now time.Time) (int64, error) {
				return scheduler.NextRun(kind, expr, now, s.location())
			},
		})
		if err != nil {
			return nil, err
		}
		h = &held{srv: srv}
		if w.held == nil {
			w.held = map[groupfolder.Folder]*held{}
		}
		w.held[f] = h
	}
	h.refs++
	return sync.OnceFunc(func() {
		w.mu.Lock()
		stop := false
		if w.held[f] == h {
			if h.refs--; h.refs == 0 {
				delete(w.held, f)
				stop = true
			}
		}
		w.mu.Unlock()
		if stop {
			h.srv.Stop()
		}
	}), nil
}

// takeHeld hands a turn of f the held MCP server, if there is one: the turn binds it.
func (w *Warm) takeHeld(f groupfolder.Folder) *ipc.Server {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.held[f]
	if h == nil {
		return nil
	}
	delete(w.held, f)
	return h.srv
}

// noteSender remembers the sender of f's last turn: a warm agent is prepared with the
// system prompt of a turn from them (their user memory).
func (w *Warm) noteSender(f groupfolder.Folder, sender string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.senders == nil {
		w.senders = map[groupfolder.Folder]string{}
	}
	w.senders[f] = sender
}

func (w *Warm) lastSender(f groupfolder.Folder) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.senders[f]
}
