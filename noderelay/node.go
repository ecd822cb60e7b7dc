package noderelay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/agentdir"
)

// Turn is a turn Pod of the node, as the node serves it: its slug and who its agent runs
// as (UID, GID; -1 when the Pod does not say), who is given its directories.
type Turn struct {
	Slug     string
	UID, GID int
}

// socketMode is the mode of the sockets a node serves, as the central's: whoever the
// agent runs as connects.
const socketMode = 0o666

// Node is `arizukod node`: it serves the sockets of the node's turn Pods in Dir/<slug>/ and
// relays each connection to the central.
type Node struct {
	// Name is the node's name, as Pods' spec.nodeName says it.
	Name string
	// Dir is the node's IPC directory (node_ipc_dir): each turn Pod mounts Dir/<slug>. Dir
	// itself is the node agent's; what is below it is the Pods'.
	Dir string
	// Central is the central's relay address, host:port.
	Central string
	// TLS is NodeTLS's configuration.
	TLS *tls.Config
	Log *slog.Logger
	// MaxConns bounds the connections relayed at once for one slug; one more is closed at
	// once. 0 is DefaultMaxConns.
	MaxConns int
	// Retry is how long a connection the agent made waits for the central to take it
	// (unreachable, not answering, or refusing while it starts) before the node closes it.
	// 0 is DefaultRetry.
	Retry time.Duration

	root   *agentdir.Dir
	mu     sync.Mutex
	served map[string]*slugServer
	swept  bool
}

// DefaultMaxConns is how many connections of one turn Pod a node relays at once: a Pod
// that opens more cannot make the node hold more connections to the central.
const DefaultMaxConns = 256

// DefaultRetry is how long a node holds an agent's connection while the central is away:
// long enough for a central's restart (a systemd restart, a StatefulSet's rollout) to go
// unseen by the turn, short enough that an agent whose central is gone learns it well
// before its own timeouts (the example agent's 2 min, Claude Code's longer).
const DefaultRetry = 30 * time.Second

// Run serves the turns of every snapshot from turns (the node's turn Pods now) until ctx
// ends, then stops serving them all and removes their directories.
func (n *Node) Run(ctx context.Context, turns <-chan []Turn) error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return fmt.Errorf("node IPC directory: %w", err)
	}
	root, err := agentdir.Open(n.Dir)
	if err != nil {
		return fmt.Errorf("node IPC directory: %w", err)
	}
	defer root.Close()
	n.root, n.served = root, map[string]*slugServer{}
	defer func() {
		for slug := range n.served {
			n.stop(slug)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ts := <-turns:
			n.reconcile(ctx, ts)
		}
	}
}

func (n *Node) reconcile(ctx context.Context, ts []Turn) {
	want := map[string]Turn{}
	for _, t := range ts {
		if err := CheckSlug(t.Slug); err != nil {
			n.Log.Warn("turn Pod not served", "err", err)
			continue
		}
		want[t.Slug] = t
	}
	for slug := range n.served {
		if _, ok := want[slug]; !ok {
			n.stop(slug)
		}
	}
	if !n.swept {
		n.sweep(want)
	}
	for slug, t := range want {
		if _, ok := n.served[slug]; ok {
			continue
		}
		s, err := n.start(ctx, t)
		if err != nil {
			n.Log.Error("serving a turn Pod's sockets", "slug", slug, "err", err)
			continue
		}
		n.mu.Lock()
		n.served[slug] = s
		n.mu.Unlock()
		n.Log.Info("serving a turn Pod's sockets", "slug", slug, "dir", s.dir.Name())
	}
}

// sweep removes, once the node's first turns are known, the directories of the Pods that
// ended while no node agent ran: whatever is in Dir that no turn of the node has.
func (n *Node) sweep(want map[string]Turn) {
	n.swept = true
	entries, err := n.root.ReadDir(".")
	if err != nil {
		n.Log.Warn("sweeping the node IPC directory", "err", err)
		return
	}
	for _, e := range entries {
		if _, ok := want[e.Name()]; ok {
			continue
		}
		if e.IsDir() {
			if err := n.root.Clear(e.Name()); err != nil {
				n.Log.Warn("sweeping the node IPC directory", "entry", e.Name(), "err", err)
				continue
			}
		}
		if err := n.root.Remove(e.Name()); err != nil {
			n.Log.Warn("sweeping the node IPC directory", "entry", e.Name(), "err", err)
			continue
		}
		n.Log.Info("removed what an ended turn Pod left", "entry", e.Name())
	}
}

func (n *Node) stop(slug string) {
	s := n.served[slug]
	s.close()
	n.mu.Lock()
	delete(n.served, slug)
	n.mu.Unlock()
	if err := n.root.Clear(slug); err != nil && !errors.Is(err, fs.ErrNotExist) {
		n.Log.Warn("clearing a turn Pod's directory", "slug", slug, "err", err)
	}
	if err := n.root.Remove(slug); err != nil && !errors.Is(err, fs.ErrNotExist) {
		n.Log.Warn("removing a turn Pod's directory", "slug", slug, "err", err)
	}
	n.Log.Info("stopped serving a turn Pod's sockets", "slug", slug)
}

// slugServer is what a node serves for one slug.
type slugServer struct {
	n      *Node
	slug   string
	dir    *agentdir.Dir // Dir/<slug>
	side   *agentdir.Dir // Dir/<slug>/sidecars
	owner  *agentdir.Owner
	cancel context.CancelFunc
	wg     sync.WaitGroup
	conns  chan struct{} // a token per connection relayed now

	mu      sync.Mutex
	sockets map[string]*agentdir.Socket // by socket name (CheckSocket's)
}

// ensureDir makes rel below d a directory of the daemon's, given to owner: whatever the
// Pod left at that name that is not a directory (a link, a file) is removed, never
// followed.
func ensureDir(d *agentdir.Dir, rel string, owner *agentdir.Owner) error {
	err := d.Mkdir(rel, 0o755)
	if errors.Is(err, fs.ErrExist) {
		if fi, lerr := d.Lstat(rel); lerr == nil && !fi.IsDir() {
			if err := d.Remove(rel); err != nil {
				return err
			}
			err = d.Mkdir(rel, 0o755)
		} else {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	if owner != nil {
		return d.Chown(rel, owner.UID, owner.GID)
	}
	return nil
}

func (n *Node) start(ctx context.Context, t Turn) (*slugServer, error) {
	var owner *agentdir.Owner
	if t.UID >= 0 && t.GID >= 0 {
		owner = &agentdir.Owner{UID: t.UID, GID: t.GID}
	}
	if err := ensureDir(n.root, t.Slug, owner); err != nil {
		return nil, err
	}
	dir, err := n.root.Dir(t.Slug)
	if err != nil {
		return nil, err
	}
	maxConns := n.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	s := &slugServer{n: n, slug: t.Slug, dir: dir, owner: owner, sockets: map[string]*agentdir.Socket{},
		conns: make(chan struct{}, maxConns)}
	ctx, s.cancel = context.WithCancel(ctx)
	fail := func(err error) (*slugServer, error) {
		s.close()
		return nil, err
	}
	for _, sub := range []string{contract.InputDir, contract.SidecarDir} {
		if err := ensureDir(dir, sub, owner); err != nil {
			return fail(err)
		}
	}
	if s.side, err = dir.Dir(contract.SidecarDir); err != nil {
		return fail(err)
	}
	for _, name := range []string{contract.RouterSocket, contract.ModelSocket, contract.EgressSocket} {
		if err := s.listen(ctx, s.dir, name, name); err != nil {
			return fail(err)
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.follow(ctx)
	}()
	return s, nil
}

// listen serves the socket name (CheckSocket's) as base in d.
func (s *slugServer) listen(ctx context.Context, d *agentdir.Dir, base, name string) error {
	ln, err := d.Listen(base, socketMode)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if ctx.Err() != nil {
		// close has closed every socket already: this one goes too.
		s.mu.Unlock()
		ln.Close()
		return ctx.Err()
	}
	s.sockets[name] = ln
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.relay(ctx, name, c)
		}
	}()
	return nil
}

// answerTimeout bounds one attempt of dial: the TLS handshake, the header and the
// central's answer.
const answerTimeout = 15 * time.Second

// dial opens a connection to the central that has said yes to h, and the reader of what
// follows its answer; the whole attempt is bounded by answerTimeout and by ctx.
func (n *Node) dial(ctx context.Context, h header) (*tls.Conn, *bufio.Reader, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}, Config: n.TLS}
	dctx, cancel := context.WithTimeout(ctx, answerTimeout)
	defer cancel()
	nc, err := d.DialContext(dctx, "tcp", n.Central)
	if err != nil {
		return nil, nil, fmt.Errorf("relay to %s: %w", n.Central, err)
	}
	c := nc.(*tls.Conn)
	deadline, _ := dctx.Deadline()
	c.SetDeadline(deadline)
	// A ctx that ends first (the Pod gone) ends the attempt too.
	stop := context.AfterFunc(dctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := writeLine(c, h); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("relay to %s: %w", n.Central, err)
	}
	r := bufio.NewReaderSize(c, maxHeader)
	var a answer
	if err := readLine(r, maxHeader, &a); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("relay to %s: answer: %w", n.Central, err)
	}
	if a.Error != "" {
		c.Close()
		return nil, nil, fmt.Errorf("%w: %s", ErrRefused, a.Error)
	}
	if !stop() {
		// The attempt's time ran out as the answer came: the connection has a past deadline.
		c.Close()
		return nil, nil, fmt.Errorf("relay to %s: %w", n.Central, context.Cause(dctx))
	}
	c.SetDeadline(time.Time{})
	return c, r, nil
}

// dialRetry is dial tried again, after 250 ms doubling up to 4 s, until the central takes
// the connection or Retry has passed: a central that restarts is down for a while, and
// then refuses the sockets of the turns it has not adopted yet. A certificate the node
// does not trust is not tried again: it will not change.
func (n *Node) dialRetry(ctx context.Context, h header, log *slog.Logger) (*tls.Conn, *bufio.Reader, error) {
	retry := n.Retry
	if retry <= 0 {
		retry = DefaultRetry
	}
	rctx, cancel := context.WithTimeout(ctx, retry)
	defer cancel()
	wait := 250 * time.Millisecond
	for tries := 1; ; tries++ {
		c, r, err := n.dial(rctx, h)
		if err == nil {
			if tries > 1 {
				log.Info("relay connection taken by the central", "tries", tries)
			}
			return c, r, nil
		}
		if untrusted(err) {
			return nil, nil, err
		}
		if tries == 1 {
			log.Warn("relay connection waits for the central", "err", err, "for", retry)
		}
		select {
		case <-rctx.Done():
			return nil, nil, fmt.Errorf("%d tries in %s: %w", tries, retry, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 4*time.Second)
	}
}

// untrusted says whether err is the node refusing the central's certificate.
func untrusted(err error) bool {
	var (
		cv *tls.CertificateVerificationError
		ua x509.UnknownAuthorityError
		he x509.HostnameError
	)
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he)
}

// relay carries one connection the agent made to the socket name on to the central.
func (s *slugServer) relay(ctx context.Context, name string, c net.Conn) {
	select {
	case s.conns <- struct{}{}:
		defer func() { <-s.conns }()
	default:
		s.n.Log.Warn("relay connection refused: too many at once", "slug", s.slug, "socket", name, "max", cap(s.conns))
		c.Close()
		return
	}
	log := s.n.Log.With("slug", s.slug, "socket", name)
	tc, r, err := s.n.dialRetry(ctx, header{Op: opConnect, Node: s.n.Name, Slug: s.slug, Socket: name}, log)
	if err != nil {
		log.Warn("relay connection failed", "err", err)
		c.Close()
		return
	}
	// The Pod gone, its connections go too.
	stop := context.AfterFunc(ctx, func() {
		c.Close()
		tc.Close()
	})
	defer stop()
	pipe(c, tc, r)
}

// follow keeps a watch on the central open while the slug is served, and applies every
// state it streams; a watch that ends is opened again.
func (s *slugServer) follow(ctx context.Context) {
	for ctx.Err() == nil {
		err := s.watchOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		s.n.Log.Warn("relay watch ended", "slug", s.slug, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s *slugServer) watchOnce(ctx context.Context) error {
	c, r, err := s.n.dial(ctx, header{Op: opWatch, Node: s.n.Name, Slug: s.slug})
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	for {
		c.SetReadDeadline(time.Now().Add(3 * keepalive))
		var st stateMsg
		if err := readLine(r, maxState, &st); err != nil {
			return err
		}
		s.apply(ctx, st)
	}
}

// apply makes the slug's sidecar sockets and input directory what the central has.
func (s *slugServer) apply(ctx context.Context, st stateMsg) {
	want := map[string]bool{}
	for _, name := range st.Sidecars {
		if checkSidecar(name) == nil {
			want[contract.SidecarDir+"/"+name+".sock"] = true
		}
	}
	s.mu.Lock()
	var gone []*agentdir.Socket
	for name, ln := range s.sockets {
		if len(name) > len(contract.SidecarDir) && name[:len(contract.SidecarDir)+1] == contract.SidecarDir+"/" && !want[name] {
			gone = append(gone, ln)
			delete(s.sockets, name)
		}
	}
	var add []string
	for name := range want {
		if _, ok := s.sockets[name]; !ok {
			add = append(add, name)
		}
	}
	s.mu.Unlock()
	for _, ln := range gone {
		ln.Close()
	}
	for _, name := range add {
		base := name[len(contract.SidecarDir)+1:]
		if err := s.listen(ctx, s.side, base, name); err != nil {
			s.n.Log.Warn("serving a sidecar's socket", "slug", s.slug, "socket", name, "err", err)
		}
	}
	if err := s.mirrorInput(st.Input); err != nil {
		s.n.Log.Warn("mirroring the input directory", "slug", s.slug, "err", err)
	}
}

// mirrorInput makes the input directory hold exactly files: the central's steering
// messages and _close sentinel, the daemon's files (mode 0644) as on the central. Every write replaces through the directory's descriptor,
// so nothing the Pod planted there is followed.
func (s *slugServer) mirrorInput(files []inputFile) error {
	in, err := s.dir.Dir(contract.InputDir)
	if errors.Is(err, agentdir.ErrLink) || errors.Is(err, fs.ErrNotExist) {
		if err := ensureDir(s.dir, contract.InputDir, s.owner); err != nil {
			return err
		}
		in, err = s.dir.Dir(contract.InputDir)
	}
	if err != nil {
		return err
	}
	defer in.Close()
	want := map[string][]byte{}
	for _, f := range files {
		if checkInputName(f.Name) == nil {
			want[f.Name] = f.Data
		}
	}
	have, err := in.ReadDir(".")
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range have {
		data, ok := want[e.Name()]
		if !ok {
			if err := in.Remove(e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, in.Clear(e.Name()), in.Remove(e.Name()))
			}
			continue
		}
		if e.Type().IsRegular() {
			if cur, err := in.ReadFile(e.Name(), maxInputFile); err == nil && bytes.Equal(cur, data) {
				delete(want, e.Name())
			}
		}
	}
	for name, data := range want {
		errs = append(errs, in.WriteFile(name, data, 0o644, nil))
	}
	return errors.Join(errs...)
}

func (s *slugServer) close() {
	s.cancel()
	s.mu.Lock()
	for name, ln := range s.sockets {
		ln.Close()
		delete(s.sockets, name)
	}
	s.mu.Unlock()
	s.wg.Wait()
	if s.side != nil {
		s.side.Close()
	}
	s.dir.Close()
}
