package noderelay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/agentdir"
	"github.com/arizuko/arizukod/internal/fakemodel"
)

// logBuf is a log the test reads.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// staticPods says each slug's Pod is on the node the map names.
type staticPods struct {
	mu sync.Mutex
	on map[string]string
}

func (p *staticPods) OnNode(_ context.Context, slug, node string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.on[slug] == node, nil
}

// central is a relay listener over a data directory whose IPC directory of each slug
// serves echo sockets answering "<socket>:<what was sent>".
type central struct {
	t      *testing.T
	layout groupfolder.Layout
	ca     *gateway.CA
	addr   string
	log    *logBuf
	pods   *staticPods
}

func startCentral(t *testing.T) *central {
	t.Helper()
	c := newCentral(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.addr = ln.Addr().String()
	c.serve(ln)
	for _, slug := range []string{"main", "other"} {
		for _, sock := range []string{contract.RouterSocket, contract.ModelSocket, contract.EgressSocket} {
			c.echo(slug, sock)
		}
	}
	return c
}

// newCentral is a central's data directory and CA, not listening yet.
func newCentral(t *testing.T) *central {
	t.Helper()
	layout, err := groupfolder.NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := OpenCA(layout, "test")
	if err != nil {
		t.Fatal(err)
	}
	return &central{t: t, layout: layout, ca: ca, log: &logBuf{},
		pods: &staticPods{on: map[string]string{"main": "node-a", "other": "node-b"}}}
}

// serve runs the central's relay listener on ln until the test ends.
func (c *central) serve(ln net.Listener) {
	c.t.Helper()
	conf, err := ServerTLS(c.ca)
	if err != nil {
		c.t.Fatal(err)
	}
	s := &Server{IPCRoot: filepath.Join(c.layout.DataDir, "ipc"), TLS: conf, Pods: c.pods, Poll: 20 * time.Millisecond, Recheck: 50 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(c.log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(ctx, ln)
	}()
	c.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// ipc opens the central's IPC directory of slug, made when missing.
func (c *central) ipc(slug string) *agentdir.Dir {
	c.t.Helper()
	for _, sub := range []string{"", contract.InputDir, contract.SidecarDir} {
		if err := os.MkdirAll(filepath.Join(c.layout.DataDir, "ipc", slug, sub), 0o755); err != nil {
			c.t.Fatal(err)
		}
	}
	d, err := agentdir.Open(filepath.Join(c.layout.DataDir, "ipc", slug))
	if err != nil {
		c.t.Fatal(err)
	}
	return d
}

// echo serves socket name (a CheckSocket name) of slug on the central.
func (c *central) echo(slug, name string) *agentdir.Socket {
	c.t.Helper()
	d := c.ipc(slug)
	defer d.Close()
	if dir, base := filepath.Split(name); dir != "" {
		sub, err := d.Dir(filepath.Clean(dir))
		if err != nil {
			c.t.Fatal(err)
		}
		defer sub.Close()
		d, name = sub, base
	}
	ln, err := d.Listen(name, 0o666)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { ln.Close() })
	tag := slug + "/" + name
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				b, _ := io.ReadAll(conn)
				conn.Write([]byte(tag + ":" + string(b)))
			}()
		}
	}()
	return ln
}

// nodeCert is a node's TLS configuration with a certificate of c's CA for node.
func (c *central) nodeCert(node string) *tls.Config {
	c.t.Helper()
	nc, err := IssueNode(c.ca, node)
	if err != nil {
		c.t.Fatal(err)
	}
	conf, err := NodeTLS(nc.CA, nc.Cert, nc.Key)
	if err != nil {
		c.t.Fatal(err)
	}
	return conf
}

// startNode runs a node named name whose turn Pods are turns; its IPC directory is
// returned, with the channel that changes its turns.
func startNode(t *testing.T, c *central, name string, conf *tls.Config, plant func(dir string), mod ...func(*Node)) (string, chan []Turn, *logBuf) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "node-ipc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if plant != nil {
		plant(dir)
	}
	log := &logBuf{}
	n := &Node{Name: name, Dir: dir, Central: c.addr, TLS: conf, Log: slog.New(slog.NewTextHandler(log, nil))}
	for _, m := range mod {
		m(n)
	}
	turns := make(chan []Turn, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := n.Run(ctx, turns); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return dir, turns, log
}

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func isSocket(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&fs.ModeSocket != 0
}

// call connects as the agent does to name below the node's slug directory, sends msg and
// half-closes, and returns the answer (or the error).
func call(t *testing.T, slugDir, name, msg string) (string, error) {
	t.Helper()
	d, err := agentdir.Open(slugDir)
	if err != nil {
		return "", err
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := d.Dial(ctx, name)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(msg)); err != nil {
		return "", err
	}
	conn.(*net.UnixConn).CloseWrite()
	b, err := io.ReadAll(conn)
	return string(b), err
}

func TestNodeRelaysTheTurnSocketsToTheCentral(t *testing.T) {
	c := startCentral(t)
	dir, turns, _ := startNode(t, c, "node-a", c.nodeCert("node-a"), nil)
	turns <- []Turn{{Slug: "main", UID: -1, GID: -1}}
	slugDir := filepath.Join(dir, "main")
	waitFor(t, "the node's sockets", func() bool { return isSocket(filepath.Join(slugDir, contract.EgressSocket)) })
	for _, sock := range []string{contract.RouterSocket, contract.ModelSocket, contract.EgressSocket} {
		got, err := call(t, slugDir, sock, "hello "+sock)
		if want := "main/" + sock + ":hello " + sock; err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", sock, got, err, want)
		}
	}
	// A big payload crosses byte for byte, both ways.
	big := strings.Repeat("0123456789abcdef", 1<<16)
	if got, err := call(t, slugDir, contract.ModelSocket, big); err != nil || got != "main/model.sock:"+big {
		t.Errorf("1 MiB through model.sock: %d bytes, %v", len(got), err)
	}

	// A sidecar that starts on the central appears on the node, and goes with it.
	side := c.echo("main", contract.SidecarDir+"/web.sock")
	sidePath := filepath.Join(slugDir, contract.SidecarDir, "web.sock")
	waitFor(t, "the sidecar's socket on the node", func() bool { return isSocket(sidePath) })
	if got, err := call(t, slugDir, contract.SidecarDir+"/web.sock", "q"); err != nil || got != "main/web.sock:q" {
		t.Errorf("sidecar: %q, %v", got, err)
	}
	side.Close()
	waitFor(t, "the sidecar's socket gone from the node", func() bool { return !isSocket(sidePath) })

	// Steering files and the _close sentinel are mirrored into the node's input/.
	in := c.ipc("main")
	defer in.Close()
	if err := in.WriteFile("input/1-000.json", []byte(`{"role":"user","content":"steer"}`), 0o644, nil); err != nil {
		t.Fatal(err)
	}
	mirrored := filepath.Join(slugDir, contract.InputDir, "1-000.json")
	waitFor(t, "the steering message on the node", func() bool {
		b, err := os.ReadFile(mirrored)
		return err == nil && string(b) == `{"role":"user","content":"steer"}`
	})
	if err := in.Clear(contract.InputDir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the steering message gone from the node", func() bool { _, err := os.Lstat(mirrored); return err != nil })

	// The Pod gone, its directory goes.
	turns <- nil
	waitFor(t, "the slug's directory removed", func() bool { _, err := os.Lstat(slugDir); return err != nil })
}

// rawDial opens a TLS connection to the central with conf, sends h and returns the answer
// line, or the error of the handshake or the read.
func rawDial(t *testing.T, addr string, conf *tls.Config, h header) (answer, error) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
	if err != nil {
		return answer{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if err := writeLine(conn, h); err != nil {
		return answer{}, err
	}
	var a answer
	err = readLine(bufio.NewReader(conn), maxHeader, &a)
	return a, err
}

func TestCentralRefuses(t *testing.T) {
	c := startCentral(t)
	nodeA := c.nodeCert("node-a")
	// A CA of another data directory: its certificates mean nothing here.
	otherLayout, _ := groupfolder.NewLayout(t.TempDir())
	otherCA, err := OpenCA(otherLayout, "other")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := IssueNode(otherCA, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	foreignConf, _ := NodeTLS(c.ca.CertPEM(), foreign.Cert, foreign.Key)
	noCert := nodeA.Clone()
	noCert.Certificates = nil
	// The central's own server certificate is no node's.
	srvCert, srvKey, err := c.ca.Issue(ServerName, []string{ServerName}, x509.ExtKeyUsageServerAuth, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serverAsClient, _ := NodeTLS(c.ca.CertPEM(), srvCert, srvKey)

	for _, tc := range []struct {
		name   string
		conf   *tls.Config
		h      header
		reason string // in the log; "" when the handshake itself fails
	}{
		{"no client certificate", noCert, header{Op: opConnect, Node: "node-a", Slug: "main", Socket: "model.sock"}, ""},
		{"a certificate of another CA", foreignConf, header{Op: opConnect, Node: "node-a", Slug: "main", Socket: "model.sock"}, ""},
		{"the server's certificate as a client's", serverAsClient, header{Op: opConnect, Node: "node-a", Slug: "main", Socket: "model.sock"}, ""},
		{"unknown socket", nodeA, header{Op: opConnect, Node: "node-a", Slug: "main", Socket: "secret.sock"}, `socket \"secret.sock\": not one of`},
		{"a path as socket", nodeA, header{Op: opConnect, Node: "node-a", Slug: "main", Socket: "../other/model.sock"}, "not one of"},
		{"a sidecar path", nodeA, header{Op: opConnect, Node: "node-a", Slug: "main", Socket: "sidecars/../../other/model.sock"}, "not one of"},
		{"a path as slug", nodeA, header{Op: opConnect, Node: "node-a", Slug: "../ipc/other", Socket: "model.sock"}, "slug"},
		{"the slug of a Pod on another node", nodeA, header{Op: opConnect, Node: "node-a", Slug: "other", Socket: "model.sock"}, "no turn Pod of other on node node-a"},
		{"a node the certificate is not", nodeA, header{Op: opConnect, Node: "node-b", Slug: "other", Socket: "model.sock"}, `the certificate is node \"node-a\"'s`},
		{"any node as the claim", nodeA, header{Op: opConnect, Node: "*", Slug: "main", Socket: "model.sock"}, "not a node's name"},
		{"unknown op", nodeA, header{Op: "exec", Node: "node-a", Slug: "main"}, `op \"exec\"`},
		{"a watch of another node's slug", nodeA, header{Op: opWatch, Node: "node-a", Slug: "other"}, "no turn Pod of other on node node-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(c.log.String())
			a, err := rawDial(t, c.addr, tc.conf, tc.h)
			if err == nil && a.Error == "" {
				t.Fatalf("accepted")
			}
			waitFor(t, "the refusal logged", func() bool {
				l := c.log.String()[before:]
				return strings.Contains(l, "relay connection refused") && strings.Contains(l, tc.reason)
			})
			if tc.reason != "" && !strings.Contains(a.Error, strings.ReplaceAll(tc.reason, `\"`, `"`)) {
				t.Errorf("answer %q does not say %q", a.Error, tc.reason)
			}
		})
	}

	// What is allowed, for contrast: the same certificate, its own node's slug; and a
	// certificate for any node, claiming node-b for node-b's slug.
	if a, err := rawDial(t, c.addr, nodeA, header{Op: opConnect, Node: "node-a", Slug: "main", Socket: "model.sock"}); err != nil || a.Error != "" {
		t.Errorf("own slug: %+v, %v", a, err)
	}
	if a, err := rawDial(t, c.addr, c.nodeCert(AnyNode), header{Op: opConnect, Node: "node-b", Slug: "other", Socket: "router.sock"}); err != nil || a.Error != "" {
		t.Errorf("any node's certificate: %+v, %v", a, err)
	}
}

func TestNodeWithAForeignCentralGetsNothing(t *testing.T) {
	c := startCentral(t)
	// The node trusts another CA: it refuses the central, and serves nothing that works.
	otherLayout, _ := groupfolder.NewLayout(t.TempDir())
	otherCA, err := OpenCA(otherLayout, "other")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := IssueNode(c.ca, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	conf, _ := NodeTLS(otherCA.CertPEM(), nc.Cert, nc.Key)
	dir, turns, log := startNode(t, c, "node-a", conf, nil)
	turns <- []Turn{{Slug: "main", UID: -1, GID: -1}}
	slugDir := filepath.Join(dir, "main")
	waitFor(t, "the node's sockets", func() bool { return isSocket(filepath.Join(slugDir, contract.ModelSocket)) })
	if got, _ := call(t, slugDir, contract.ModelSocket, "x"); got != "" {
		t.Errorf("answer through a central the node does not trust: %q", got)
	}
	waitFor(t, "the failure logged", func() bool { return strings.Contains(log.String(), "certificate signed by unknown authority") })
}

func TestNodeFollowsNoLinkThePodPlanted(t *testing.T) {
	c := startCentral(t)
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("host file"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, turns, _ := startNode(t, c, "node-a", c.nodeCert("node-a"), func(dir string) {
		// A Pod of the slug before: its directory holds links to the host everywhere.
		slug := filepath.Join(dir, "main")
		os.Mkdir(slug, 0o755)
		for _, name := range []string{contract.ModelSocket, contract.RouterSocket} {
			os.Symlink(victim, filepath.Join(slug, name))
		}
		os.Symlink(outside, filepath.Join(slug, contract.SidecarDir))
		os.Symlink(outside, filepath.Join(slug, contract.InputDir))
	})
	turns <- []Turn{{Slug: "main", UID: -1, GID: -1}}
	slugDir := filepath.Join(dir, "main")
	waitFor(t, "the node's sockets", func() bool { return isSocket(filepath.Join(slugDir, contract.EgressSocket)) })
	for _, name := range []string{contract.ModelSocket, contract.RouterSocket} {
		if !isSocket(filepath.Join(slugDir, name)) {
			t.Errorf("%s is not the node's socket", name)
		}
	}
	for _, name := range []string{contract.SidecarDir, contract.InputDir} {
		if fi, err := os.Lstat(filepath.Join(slugDir, name)); err != nil || !fi.IsDir() {
			t.Errorf("%s is not a directory: %v", name, err)
		}
	}
	// While it runs, the Pod swaps input/ for a link: a steering message does not land
	// outside, and the sidecars' directory, swapped too, gets no socket outside.
	os.Rename(filepath.Join(slugDir, contract.InputDir), filepath.Join(slugDir, "input.old"))
	os.Symlink(outside, filepath.Join(slugDir, contract.InputDir))
	in := c.ipc("main")
	defer in.Close()
	if err := in.WriteFile("input/2-000.json", []byte(`{"role":"user","content":"x"}`), 0o644, nil); err != nil {
		t.Fatal(err)
	}
	c.echo("main", contract.SidecarDir+"/db.sock")
	waitFor(t, "input/ a directory again with the message", func() bool {
		_, err := os.ReadFile(filepath.Join(slugDir, contract.InputDir, "2-000.json"))
		fi, lerr := os.Lstat(filepath.Join(slugDir, contract.InputDir))
		return err == nil && lerr == nil && fi.IsDir()
	})
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 || entries[0].Name() != "victim" {
		t.Errorf("the node wrote outside through a link: %v", entries)
	}
	if b, _ := os.ReadFile(victim); string(b) != "host file" {
		t.Errorf("victim changed: %q", b)
	}
	turns <- nil
	waitFor(t, "the slug's directory removed", func() bool { _, err := os.Lstat(slugDir); return err != nil })
	if b, _ := os.ReadFile(victim); string(b) != "host file" {
		t.Errorf("victim changed by the cleanup: %q", b)
	}
}

const modelKey = "sk-ant-the-real-key-stays-central-0123456789"

// recordConn keeps every byte that crosses a connection.
type recordConn struct {
	net.Conn
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (r recordConn) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.mu.Lock()
	r.buf.Write(p[:n])
	r.mu.Unlock()
	return n, err
}

func (r recordConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.buf.Write(p)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

func TestTheModelKeyNeverReachesTheNode(t *testing.T) {
	fake := fakemodel.Start()
	defer fake.Close()
	up, _ := url.Parse(fake.URL)
	c := startCentral(t)
	ipc := filepath.Join(c.layout.DataDir, "ipc", "keyed")
	c.ipc("keyed").Close()
	token := "arz-the-containers-token-0123456789"
	m, err := gateway.StartModel(gateway.ModelConfig{SocketPath: filepath.Join(ipc, contract.ModelSocket), Token: token,
		Upstream: up, Credential: gateway.Credential{Value: modelKey, Source: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	c.pods.mu.Lock()
	c.pods.on["keyed"] = "node-a"
	c.pods.mu.Unlock()
	nc, err := IssueNode(c.ca, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	conf, _ := NodeTLS(nc.CA, nc.Cert, nc.Key)
	dir, turns, log := startNode(t, c, "node-a", conf, nil)
	turns <- []Turn{{Slug: "keyed", UID: -1, GID: -1}}
	slugDir := filepath.Join(dir, "keyed")
	waitFor(t, "the node's model.sock", func() bool { return isSocket(filepath.Join(slugDir, contract.ModelSocket)) })

	// The agent's HTTP through the node's model.sock, every byte it sends and gets kept:
	// the node relays exactly those bytes.
	var mu sync.Mutex
	var seen bytes.Buffer
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		d, err := agentdir.Open(slugDir)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		conn, err := d.Dial(ctx, contract.ModelSocket)
		if err != nil {
			return nil, err
		}
		return recordConn{conn, &mu, &seen}, nil
	}}}
	req, _ := http.NewRequest(http.MethodPost, "http://model/v1/messages",
		strings.NewReader(`{"model":"claude-test","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("X-Api-Key", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "echo: hello") {
		t.Fatalf("through the relay: %d %s", resp.StatusCode, body)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("X-Api-Key") != modelKey {
		t.Fatalf("the upstream did not get the key: %+v", reqs)
	}
	mu.Lock()
	crossed := seen.String()
	mu.Unlock()
	if strings.Contains(crossed, modelKey) || !strings.Contains(crossed, token) {
		t.Errorf("the key crossed the node, or the recording missed the token")
	}
	// Nothing the node holds names the key: its certificate, its directory, its log.
	for _, b := range [][]byte{nc.CA, nc.Cert, nc.Key, []byte(log.String())} {
		if bytes.Contains(b, []byte(modelKey)) {
			t.Errorf("the key is in what the node holds")
		}
	}
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(modelKey)) {
				t.Errorf("the key is in %s on the node", p)
			}
		}
		return nil
	})
}

func TestNodeSweepsWhatEndedPodsLeftAndBoundsConnections(t *testing.T) {
	c := startCentral(t)
	dir, turns, log := startNode(t, c, "node-a", c.nodeCert("node-a"), func(dir string) {
		// A Pod that ended while no node agent ran left its directory, with a link in it.
		os.MkdirAll(filepath.Join(dir, "gone", contract.InputDir), 0o755)
		os.Symlink("/etc", filepath.Join(dir, "gone", "model.sock"))
		os.Symlink("/etc", filepath.Join(dir, "stray-link"))
	}, func(n *Node) { n.MaxConns = 1 })
	turns <- []Turn{{Slug: "main", UID: -1, GID: -1}}
	slugDir := filepath.Join(dir, "main")
	waitFor(t, "the node's sockets", func() bool { return isSocket(filepath.Join(slugDir, contract.RouterSocket)) })
	waitFor(t, "the leftovers swept", func() bool {
		_, e1 := os.Lstat(filepath.Join(dir, "gone"))
		_, e2 := os.Lstat(filepath.Join(dir, "stray-link"))
		return os.IsNotExist(e1) && os.IsNotExist(e2)
	})
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatalf("the sweep followed a link: %v", err)
	}

	// One connection held open: the next is closed at once, unrelayed.
	d, err := agentdir.Open(slugDir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	held, err := d.Dial(context.Background(), contract.RouterSocket)
	if err != nil {
		t.Fatal(err)
	}
	held.Write([]byte("held"))
	waitFor(t, "the held connection relayed", func() bool { return strings.Contains(c.log.String(), "relay connection") })
	if got, _ := call(t, slugDir, contract.ModelSocket, "second"); got != "" {
		t.Errorf("a connection beyond the bound was relayed: %q", got)
	}
	waitFor(t, "the refusal logged", func() bool { return strings.Contains(log.String(), "too many at once") })
	held.(*net.UnixConn).CloseWrite()
	if b, _ := io.ReadAll(held); string(b) != "main/router.sock:held" {
		t.Errorf("held: %q", b)
	}
	held.Close()
	waitFor(t, "a connection relayed again", func() bool {
		got, _ := call(t, slugDir, contract.ModelSocket, "third")
		return got == "main/model.sock:third"
	})
}

// TestNodeHoldsAConnectionWhileTheCentralRestarts: an agent that connects while no central
// listens, then while the new central has not adopted the turn yet (it refuses the socket
// it does not serve yet), is carried through once the central serves it: a restart of the
// central is not seen by the turn.
func TestNodeHoldsAConnectionWhileTheCentralRestarts(t *testing.T) {
	c := newCentral(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.addr = ln.Addr().String()
	ln.Close() // the central is down
	dir, turns, log := startNode(t, c, "node-a", c.nodeCert("node-a"), nil)
	turns <- []Turn{{Slug: "main", UID: -1, GID: -1}}
	slugDir := filepath.Join(dir, "main")
	waitFor(t, "the node's sockets", func() bool { return isSocket(filepath.Join(slugDir, contract.ModelSocket)) })
	type result struct {
		got string
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := call(t, slugDir, contract.ModelSocket, "asked while the central was away")
		done <- result{got, err}
	}()
	waitFor(t, "the node waiting for the central", func() bool { return strings.Contains(log.String(), "relay connection waits for the central") })
	time.Sleep(time.Second)
	// The central is back, without the turn's model socket yet: it refuses.
	ln, err = net.Listen("tcp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.serve(ln)
	c.ipc("main").Close()
	waitFor(t, "the central refusing the socket it does not serve yet", func() bool {
		return strings.Contains(c.log.String(), "model.sock of main")
	})
	select {
	case r := <-done:
		t.Fatalf("the agent's connection ended before the central served it: %q, %v", r.got, r.err)
	default:
	}
	c.echo("main", contract.ModelSocket) // adopted: the turn's socket is back
	r := <-done
	if want := "main/model.sock:asked while the central was away"; r.err != nil || r.got != want {
		t.Fatalf("through the restart: %q, %v; want %q\nnode log:\n%s", r.got, r.err, want, log)
	}
}

// TestNodeBoundsACentralThatNeverAnswers: a central that takes the TCP connection and
// never speaks, or none at all, costs the agent Retry, then its connection is closed.
func TestNodeBoundsACentralThatNeverAnswers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) string
	}{
		{"silent", func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var held []net.Conn
			go func() {
				for {
					conn, err := ln.Accept()
					if err != nil {
						return
					}
					mu.Lock()
					held = append(held, conn)
					mu.Unlock()
				}
			}()
			t.Cleanup(func() {
				ln.Close()
				mu.Lock()
				defer mu.Unlock()
				for _, c := range held {
					c.Close()
				}
			})
			return ln.Addr().String()
		}},
		{"down", func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln.Close()
			return ln.Addr().String()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCentral(t)
			c.addr = tc.start(t)
			dir, turns, log := startNode(t, c, "node-a", c.nodeCert("node-a"), nil, func(n *Node) { n.Retry = 2 * time.Second })
			turns <- []Turn{{Slug: "main", UID: -1, GID: -1}}
			slugDir := filepath.Join(dir, "main")
			waitFor(t, "the node's sockets", func() bool { return isSocket(filepath.Join(slugDir, contract.ModelSocket)) })
			began := time.Now()
			got, err := call(t, slugDir, contract.ModelSocket, "anyone?")
			took := time.Since(began)
			// Closed with the request unread, the agent's connection reads a reset.
			if got != "" || err != nil && !errors.Is(err, syscall.ECONNRESET) || took < 2*time.Second || took > 5*time.Second {
				t.Errorf("the agent's connection: %q, %v after %s; want it closed after the node's 2 s", got, err, took)
			}
			waitFor(t, "the failure logged", func() bool { return strings.Contains(log.String(), "relay connection failed") })
		})
	}
}
