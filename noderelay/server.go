package noderelay

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/agentdir"
)

// Pods is where the central learns which node a slug's turn Pod is on.
type Pods interface {
	// OnNode says whether a turn Pod of slug (its Annotation), pending or running, is on
	// node.
	OnNode(ctx context.Context, slug, node string) (bool, error)
}

// The bounds of a watch's state: what one input file and the whole line may hold.
const (
	maxInputFile = contract.MaxInputBytes
	maxState     = 8 << 20
)

// Server is the central's relay listener: it takes a node's TLS connection, checks it
// speaks for the node its certificate names, that the slug's turn Pod is on that node and
// that the socket is one a turn has, and connects it to that socket in IPCRoot/<slug>/, or
// streams the slug's sidecar sockets and input files (a watch).
type Server struct {
	// IPCRoot is DATA_DIR/ipc, the groups' IPC directories.
	IPCRoot string
	// TLS is ServerTLS's configuration.
	TLS  *tls.Config
	Pods Pods
	Log  *slog.Logger
	// Poll is how often a watch looks at its slug's sidecars and input; 0 is 100ms.
	Poll time.Duration
	// Recheck is how often a watch asks Pods again whether its Pod is still on the node;
	// 0 is 5s.
	Recheck time.Duration
}

// stateMsg is what a watch streams: the slug's sidecar sockets (names without .sock) and
// the files of its input directory, sent again whenever either changes and every
// keepalive.
type stateMsg struct {
	Sidecars []string    `json:"sidecars"`
	Input    []inputFile `json:"input"`
}

type inputFile struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// keepalive is how often a watch sends its state unchanged, so that a node notices a
// central gone silent.
const keepalive = 10 * time.Second

// Serve accepts on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	tl := tls.NewListener(ln, s.TLS)
	go func() {
		<-ctx.Done()
		tl.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := tl.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.handle(ctx, c.(*tls.Conn))
		}()
	}
}

// refusal is a connection refused, with the reason logged and told to the node.
type refusal struct{ reason string }

func (r refusal) Error() string { return r.reason }

func refuse(format string, a ...any) error { return refusal{fmt.Sprintf(format, a...)} }

func (s *Server) handle(ctx context.Context, c *tls.Conn) {
	log := s.Log.With("remote", c.RemoteAddr().String())
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.HandshakeContext(ctx); err != nil {
		log.Warn("relay connection refused", "reason", "TLS handshake: "+err.Error())
		c.Close()
		return
	}
	certNode, err := nodeOf(c.ConnectionState())
	if err != nil {
		log.Warn("relay connection refused", "reason", err.Error())
		c.Close()
		return
	}
	r := bufio.NewReaderSize(c, maxHeader)
	var h header
	if err := readLine(r, maxHeader, &h); err != nil {
		log.Warn("relay connection refused", "cert_node", certNode, "reason", "header: "+err.Error())
		c.Close()
		return
	}
	log = log.With("cert_node", certNode, "node", h.Node, "slug", h.Slug, "op", h.Op, "socket", h.Socket)
	conn, err := s.authorize(ctx, certNode, h)
	if err != nil {
		var rf refusal
		if errors.As(err, &rf) {
			log.Warn("relay connection refused", "reason", rf.reason)
			writeLine(c, answer{Error: rf.reason})
		} else {
			log.Error("relay connection failed", "err", err)
			writeLine(c, answer{Error: err.Error()})
		}
		c.Close()
		return
	}
	if err := writeLine(c, answer{}); err != nil {
		if conn != nil {
			conn.Close()
		}
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	if h.Op == opWatch {
		s.watch(ctx, log, c, h)
		return
	}
	log.Debug("relay connection")
	pipe(conn, c, r)
}

// authorize checks h against the certificate's node and the Pods, and for a connect dials
// the socket it names.
func (s *Server) authorize(ctx context.Context, certNode string, h header) (net.Conn, error) {
	switch {
	case h.Op != opConnect && h.Op != opWatch:
		return nil, refuse("op %q: not %s or %s", h.Op, opConnect, opWatch)
	case h.Node == "" || h.Node == AnyNode || checkNodeName(h.Node) != nil:
		return nil, refuse("node %q: not a node's name", h.Node)
	case certNode != AnyNode && certNode != h.Node:
		return nil, refuse("node %q: the certificate is node %q's", h.Node, certNode)
	}
	if err := CheckSlug(h.Slug); err != nil {
		return nil, refuse("%v", err)
	}
	if h.Op == opConnect {
		if err := CheckSocket(h.Socket); err != nil {
			return nil, refuse("%v", err)
		}
	} else if h.Socket != "" {
		return nil, refuse("a watch names no socket")
	}
	on, err := s.Pods.OnNode(ctx, h.Slug, h.Node)
	if err != nil {
		return nil, fmt.Errorf("where the turn Pod of %s runs: %w", h.Slug, err)
	}
	if !on {
		return nil, refuse("no turn Pod of %s on node %s", h.Slug, h.Node)
	}
	if h.Op == opWatch {
		return nil, nil
	}
	dir, err := s.openSlug(h.Slug)
	if err != nil {
		return nil, refuse("%v", err)
	}
	defer dir.Close()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := dir.Dial(dctx, h.Socket)
	if err != nil {
		return nil, refuse("%s of %s: %v", h.Socket, h.Slug, err)
	}
	return conn, nil
}

// openSlug opens IPCRoot/<slug>, slug checked.
func (s *Server) openSlug(slug string) (*agentdir.Dir, error) {
	root, err := agentdir.Open(s.IPCRoot)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.Dir(slug)
}

// watch streams the slug's state to the node until the node goes, ctx ends, or the Pod
// is no longer on the node.
func (s *Server) watch(ctx context.Context, log *slog.Logger, c *tls.Conn, h header) {
	defer c.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// A node sends nothing after its header: its read ends when it closes.
		buf := make([]byte, 1)
		c.Read(buf)
		cancel()
	}()
	poll, recheck := s.Poll, s.Recheck
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	if recheck <= 0 {
		recheck = 5 * time.Second
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var last *stateMsg
	sent, checked := time.Time{}, time.Now()
	for {
		if time.Since(checked) >= recheck {
			checked = time.Now()
			if on, err := s.Pods.OnNode(ctx, h.Slug, h.Node); err == nil && !on {
				log.Info("relay watch ends: the turn Pod left the node")
				return
			}
		}
		st, err := s.state(h.Slug)
		if err != nil {
			log.Warn("relay watch", "err", err)
		} else if last == nil || !reflect.DeepEqual(*last, st) || time.Since(sent) >= keepalive {
			c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if err := writeLine(c, st); err != nil {
				return
			}
			last, sent = &st, time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// state reads the slug's sidecar sockets and input files. Both directories are the
// daemon's (the agent runs on a node), read through descriptors all the same.
func (s *Server) state(slug string) (stateMsg, error) {
	st := stateMsg{Sidecars: []string{}, Input: []inputFile{}}
	dir, err := s.openSlug(slug)
	if err != nil {
		return st, err
	}
	defer dir.Close()
	side, err := dir.ReadDir(contract.SidecarDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return st, err
	}
	for _, e := range side {
		name, ok := strings.CutSuffix(e.Name(), ".sock")
		if ok && e.Type()&fs.ModeSocket != 0 && checkSidecar(name) == nil {
			st.Sidecars = append(st.Sidecars, name)
		}
	}
	in, err := dir.ReadDir(contract.InputDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return st, err
	}
	total := 0
	for _, e := range in {
		if !e.Type().IsRegular() || checkInputName(e.Name()) != nil {
			continue
		}
		data, err := dir.ReadFile(contract.InputDir+"/"+e.Name(), maxInputFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return st, err
		}
		if total += len(data) + len(e.Name()); total > maxState/2 {
			return st, fmt.Errorf("input of %s: more than %d bytes", slug, maxState/2)
		}
		st.Input = append(st.Input, inputFile{Name: e.Name(), Data: data})
	}
	return st, nil
}
