package ipc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/agentdir"
	"github.com/arizuko/arizukod/ipc/policy"
	"github.com/arizuko/arizukod/store"
)

// Limits of the server.
const (
	// MaxMessageBytes bounds one JSON-RPC message (one line); a longer line
	// ends the connection.
	MaxMessageBytes = 4 << 20
	// MaxConns bounds the connections served at once; more are closed at once.
	MaxConns = 32
	// SocketMode is the socket file's mode. The socket lives in the
	// group's IPC directory, which is 0700 and owned by the daemon's user,
	// and the only client is the agent, which runs as that user (a rootful
	// engine runs the container as the daemon's uid:gid; rootless Podman
	// maps the container's root to it). Connecting needs write permission on
	// the socket, so the owner's rw is all anyone needs; group or other bits
	// would only matter if the directory were opened up, and then they would
	// hand the group's identity to strangers.
	SocketMode = 0o600
	// maxSocketPath is the longest path a unix socket can be bound to
	// (sun_path holds 108 bytes with the terminating NUL).
	maxSocketPath = 107
	callTimeout   = 30 * time.Second
	writeTimeout  = 10 * time.Second
)

// ErrConfig is wrapped by the errors Start returns for a bad ServerConfig.
var ErrConfig = errors.New("ipc: bad server config")

// Store is what the server needs of the store: exactly the methods its
// tools call. *store.Store implements it.
type Store interface {
	GetGrants(ctx context.Context, folder string) ([]string, error)
	AppendOutbox(ctx context.Context, it store.OutboxItem) (*store.OutboxItem, error)
	ClearSession(ctx context.Context, folder string) error
	AppendInbox(ctx context.Context, folder string, msgs ...store.InboxMessage) ([]int64, error)
	GetGroup(ctx context.Context, folder string) (*store.Group, error)
	ListGroups(ctx context.Context) ([]store.Group, error)
	CreateGroup(ctx context.Context, g store.Group) (*store.Group, error)
	CreateTask(ctx context.Context, t store.Task) (*store.Task, error)
	GetTask(ctx context.Context, id string) (*store.Task, error)
	ListTasks(ctx context.Context, f store.TaskFilter) ([]store.Task, error)
	UpdateTask(ctx context.Context, id string, p store.TaskPatch) (*store.Task, error)
	ListRoutes(ctx context.Context) ([]store.Route, error)
	GetRoute(ctx context.Context, id int64) (*store.Route, error)
	AddRoute(ctx context.Context, r store.Route) (*store.Route, error)
	DeleteRoute(ctx context.Context, id int64) error
	ReplaceOwnedRoutes(ctx context.Context, owner string, routes []store.Route) ([]store.Route, error)
}

// NextRunFunc computes when a task fires next, in unix milliseconds, from
// its kind ("cron", "interval" or "once") and expression (a 5-field cron
// expression, a number of milliseconds, an RFC 3339 time) as the store keeps
// them. An expression it cannot read is an error, which the tool reports to
// the agent. The scheduler provides it.
type NextRunFunc func(kind, expr string, now time.Time) (int64, error)

// ServerConfig is one turn's MCP server.
type ServerConfig struct {
	// Folder is the group the socket is for, and the caller's only
	// identity: nothing a client says about itself is trusted.
	Folder string
	// SocketPath is where to listen: <data>/ipc/<folder>/router.sock, in
	// a directory that exists. A stale socket there is removed.
	SocketPath string
	// OpenGroup opens the group's directory on the host (mounted at
	// /workspace), the agent's ground, through its parents' descriptors
	// (groupfolder.Layout.OpenGroup); send_document looks its files up there.
	// Nil disables send_document's file check, so it always fails.
	OpenGroup func() (*agentdir.Dir, error)
	// ReplyTo is the chat this turn answers; send_reply without chat_jid
	// goes there (and grant rules see it as the chat_jid). Empty when the
	// turn answers no chat: send_reply must then name one.
	ReplyTo string
	Store   Store
	// RunID is the run the outbox rows are recorded for; empty for none.
	RunID string
	// Wake is called with a folder after a message was put into its inbox,
	// so that the daemon's queue makes a turn for it. It runs inside the
	// tool call and must not block. May be nil.
	Wake func(folder string)
	// OnTool, when set, hears each tool call when it is over, with its outcome ("ok", or
	// what refused or failed it): a turn's trace. It must not block.
	OnTool func(tool, outcome string, start, end time.Time)
	// Held starts the server for a warm agent before its turn (runtime/runner's warm.go):
	// it answers initialize and tools/list, which Claude Code asks at its start, and
	// refuses every tools/call until Bind gives it its turn. ReplyTo, RunID, Wake and OnTool
	// are then Bind's.
	Held    bool
	Logger  *slog.Logger     // the turn's, with its journal fields (logging.Field*); nil: slog.Default()
	Now     func() time.Time // nil: time.Now
	NextRun NextRunFunc
}

// Server is one group's MCP server on its unix socket, from Start to Stop.
type Server struct {
	cfg    ServerConfig
	folder string
	tier   int
	store  Store
	log    *slog.Logger
	now    func() time.Time
	mcp    *server.MCPServer
	ln     *agentdir.Socket

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	stopping bool
	stopOnce sync.Once
	stopErr  error

	sessions atomic.Int64
	bound    atomic.Bool // a turn is bound: tools/call is served
	warned   sync.Map    // warnings logged once: text -> struct{}
}

// Start validates cfg, removes a stale socket file at cfg.SocketPath and
// serves MCP on a new socket there until Stop. Each accepted connection
// speaks newline-delimited JSON-RPC 2.0, the MCP stdio framing that
// `socat STDIO UNIX-CONNECT:<socket>` relays. The server outlives ctx (only
// its values are kept): Stop ends it.
func Start(ctx context.Context, cfg ServerConfig) (*Server, error) {
	f, err := groupfolder.Parse(cfg.Folder)
	if err != nil {
		return nil, fmt.Errorf("%w: folder: %w", ErrConfig, err)
	}
	switch {
	case cfg.SocketPath == "":
		return nil, fmt.Errorf("%w: socket path: empty", ErrConfig)
	case !filepath.IsAbs(cfg.SocketPath):
		return nil, fmt.Errorf("%w: socket path %q: not absolute", ErrConfig, cfg.SocketPath)
	case len(cfg.SocketPath) > maxSocketPath:
		return nil, fmt.Errorf("%w: socket path %q: %d bytes, a unix socket path holds at most %d", ErrConfig, cfg.SocketPath, len(cfg.SocketPath), maxSocketPath)
	case cfg.Store == nil:
		return nil, fmt.Errorf("%w: store: nil", ErrConfig)
	case cfg.NextRun == nil:
		return nil, fmt.Errorf("%w: next run: nil", ErrConfig)
	}
	s := &Server{cfg: cfg, folder: string(f), tier: policy.FolderTier(string(f)), store: cfg.Store, log: cfg.Logger, now: cfg.Now,
		conns: make(map[net.Conn]struct{})}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.mcp = server.NewMCPServer("arizukod", "1",
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithToolFilter(s.filterListing),
		server.WithInstructions("Tools of arizukod for the group "+s.folder+": messaging, delegation, groups, scheduled tasks and routes. What you may call depends on the group's tier and grant rules; a refused call says why."),
	)
	s.bound.Store(!cfg.Held)
	for _, name := range policy.Tools() {
		spec := specs[name]
		s.mcp.AddTool(spec.mcpTool(), s.handler(spec))
	}
	if s.ln, err = listen(cfg.SocketPath); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.wg.Add(1)
	go s.accept()
	s.log.Info("ipc: serving MCP", "socket", cfg.SocketPath, "tier", s.tier)
	return s, nil
}

// listen binds the socket at path, in the group's IPC directory (the agent's ground),
// through the directory's descriptor: what was there (a stale socket, a file, a symlink)
// is replaced, never followed, and the mode SocketMode is set on the very file bound.
func listen(path string) (*agentdir.Socket, error) {
	dir, err := agentdir.Open(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("ipc: socket directory: %w", err)
	}
	defer dir.Close()
	ln, err := dir.Listen(filepath.Base(path), SocketMode)
	if err != nil {
		return nil, fmt.Errorf("ipc: %w", err)
	}
	return ln, nil
}

// Stop closes the socket and every connection, waits for the calls in
// flight, and removes the socket file if it is still the one Start made.
// It is safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stopping = true
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.cancel()
		err := s.ln.Close()
		s.wg.Wait()
		if err != nil {
			s.stopErr = fmt.Errorf("ipc: stop %s: %w", s.cfg.SocketPath, err)
		}
		s.log.Info("ipc: stopped", "socket", s.cfg.SocketPath)
	})
	return s.stopErr
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("ipc: accept", "err", err)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		s.mu.Lock()
		ok := !s.stopping && len(s.conns) < MaxConns
		if ok {
			s.conns[c] = struct{}{}
			s.wg.Add(1)
		}
		s.mu.Unlock()
		if !ok {
			s.warnOnce(fmt.Sprintf("connections refused: more than %d at once, or stopping", MaxConns))
			c.Close()
			continue
		}
		go s.serve(c)
	}
}

// session is one connection's MCP client session.
type session struct {
	id    string
	notes chan mcp.JSONRPCNotification
	ready atomic.Bool
}

func (c *session) SessionID() string                                   { return c.id }
func (c *session) NotificationChannel() chan<- mcp.JSONRPCNotification { return c.notes }
func (c *session) Initialize()                                         { c.ready.Store(true) }
func (c *session) Initialized() bool                                   { return c.ready.Load() }

// connWriter writes whole JSON-RPC messages, one per line.
type connWriter struct {
	mu sync.Mutex
	c  net.Conn
}

func (w *connWriter) write(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err = w.c.Write(append(b, '\n'))
	return err
}

// serve runs one connection: every line is one JSON-RPC message, handled
// in order. mcp-go's StdioServer is not used because its session is a
// package-wide singleton: a second connection at the same time would be
// refused ("session already exists") and all connections would share one
// writer. Here each connection has a session of its own.
func (s *Server) serve(c *net.UnixConn) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	sess := &session{id: fmt.Sprintf("%s#%d", s.folder, s.sessions.Add(1)), notes: make(chan mcp.JSONRPCNotification, 16)}
	if err := s.mcp.RegisterSession(s.ctx, sess); err != nil {
		s.log.Error("ipc: register session", "err", err)
		return
	}
	defer s.mcp.UnregisterSession(s.ctx, sess.id)
	ctx := s.mcp.WithContext(s.ctx, sess)
	w := &connWriter{c: c}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case n := <-sess.notes:
				w.write(n)
			case <-done:
				return
			}
		}
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	for {
		line, err := readLine(r)
		if errors.Is(err, errTooLong) {
			w.write(mcp.NewJSONRPCError(mcp.NewRequestId(nil), mcp.INVALID_REQUEST,
				fmt.Sprintf("message longer than %d bytes; closing the connection", MaxMessageBytes), nil))
			s.log.Warn("ipc: message too long, connection closed", "max", MaxMessageBytes)
			return
		}
		if len(line) > 0 {
			if resp := s.handle(ctx, line); resp != nil {
				if werr := w.write(resp); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

var errTooLong = errors.New("message too long")

// readLine reads up to the next newline, at most MaxMessageBytes, and
// returns it without surrounding whitespace.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > MaxMessageBytes+1 {
			return nil, errTooLong
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSpace(line), err
	}
}

// ErrBound is Bind's error on a server that serves a turn already.
var ErrBound = errors.New("ipc: the server serves a turn already")

// Binding is the turn a held server (ServerConfig.Held) serves from Bind on.
type Binding struct {
	ReplyTo string
	RunID   string
	Wake    func(folder string)
	OnTool  func(tool, outcome string, start, end time.Time)
}

// Bind gives a held server its turn: tools/call is served from now on, with b's chat and
// run.
func (s *Server) Bind(b Binding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound.Load() {
		return ErrBound
	}
	s.cfg.ReplyTo, s.cfg.RunID, s.cfg.Wake, s.cfg.OnTool = b.ReplyTo, b.RunID, b.Wake, b.OnTool
	s.bound.Store(true)
	return nil
}
