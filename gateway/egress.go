package gateway

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrBadEgress marks a malformed egress allowlist entry.
var ErrBadEgress = errors.New("bad egress entry")

// CheckEgress validates a group's egress list: each entry is HOST:PORT, where HOST is a
// DNS name, "*." and a DNS name (its subdomains, not itself), or an IP address
// ([v6] in brackets), and PORT is 1-65535.
func CheckEgress(list []string) error {
	for i, e := range list {
		if _, err := parseEgress(e); err != nil {
			return fmt.Errorf("egress[%d]: %w", i, err)
		}
	}
	return nil
}

type egressRule struct {
	host     string // lower case, without "*."
	wildcard bool
	ip       netip.Addr // valid for an address entry
	port     string
}

func parseEgress(e string) (egressRule, error) {
	host, port, err := net.SplitHostPort(e)
	if err != nil {
		return egressRule{}, fmt.Errorf("%w: %q is not HOST:PORT (e.g. \"github.com:443\", \"*.npmjs.org:443\")", ErrBadEgress, e)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return egressRule{}, fmt.Errorf("%w: %q: port %q is not 1-65535", ErrBadEgress, e, port)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return egressRule{ip: ip.Unmap(), port: port}, nil
	}
	r := egressRule{host: strings.ToLower(host), port: port}
	if rest, ok := strings.CutPrefix(r.host, "*."); ok {
		r.host, r.wildcard = rest, true
	}
	if !validDNSName(r.host) {
		return egressRule{}, fmt.Errorf("%w: %q: %q is not a DNS name", ErrBadEgress, e, host)
	}
	return r, nil
}

func validDNSName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// What the proxy keeps of the destinations an agent names, which it chooses freely: at
// most maxDestinations of a turn by name, each at most maxDestinationLen bytes of
// the characters of a host:port; the rest are counted together as otherDestinations.
const (
	maxDestinations   = 64
	otherDestinations = "(others)"
	maxDestinationLen = 253 + len(":65535")
)

// EgressConfig is one turn's egress proxy.
type EgressConfig struct {
	SocketPath string // <ipc dir>/egress.sock
	Allow      []string
	// Lookup resolves a name on the host; nil uses net.DefaultResolver.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Record gets each connection's counts when it ends, and each refusal, by
	// destination: a sanitized host:port, or "(others)" once the turn has named 64 others.
	Record func(host string, up, down int64, refused bool)
	// OnConn, when set, hears the same as Record with when the connection (or the
	// request refused) began and ended: a turn's trace.
	OnConn func(host string, start, end time.Time, up, down int64, refused bool)
	// Logger gets the first refusal of each destination, and when the proxy stops, how
	// many refusals it did not log one by one.
	Logger *slog.Logger
	// Bindings are the secrets the proxy sends for the agent, each to its hosts, which
	// the proxy intercepts with CA (required with any binding); their placeholders are
	// set once the container is named (SetPlaceholders).
	Bindings []Binding
	CA       *CA
	// UpstreamRoots verify the hosts of the bindings; nil is the system's roots (which
	// honour SSL_CERT_FILE and SSL_CERT_DIR).
	UpstreamRoots *x509.CertPool
}

// Egress is one turn's running egress proxy: an HTTP proxy (CONNECT, and plain HTTP in
// absolute form) that reaches only the allowed host:ports, and sends the bound secrets
// to their hosts (intercept.go).
type Egress struct {
	cfg   EgressConfig
	rules []egressRule
	srv   *http.Server
	done  chan struct{}
	conns sync.WaitGroup

	mu       sync.Mutex
	named    map[string]bool // destinations recorded by name: whether a refusal was logged
	refused  int             // refusals of the turn
	unlogged int             // refusals not logged one by one
	// placeholderLogged are the destinations a placeholder was refused to and logged, at
	// most maxDestinations.
	placeholderLogged map[string]bool
}

// StartEgress listens on cfg.SocketPath and serves until Stop.
func StartEgress(cfg EgressConfig) (*Egress, error) {
	e := &Egress{cfg: cfg, done: make(chan struct{}), named: map[string]bool{}, placeholderLogged: map[string]bool{}}
	for _, a := range cfg.Allow {
		r, err := parseEgress(a)
		if err != nil {
			return nil, fmt.Errorf("egress proxy: %w", err)
		}
		e.rules = append(e.rules, r)
	}
	e.cfg.Bindings = slices.Clone(cfg.Bindings)
	for _, b := range e.cfg.Bindings {
		if cfg.CA == nil {
			return nil, fmt.Errorf("egress proxy: credential %s: no CA to intercept its hosts with", b.Name)
		}
		for _, h := range b.Hosts {
			if err := CheckBindingHost(h, cfg.Allow); err != nil {
				return nil, fmt.Errorf("egress proxy: credential %s: %w", b.Name, err)
			}
		}
	}
	if e.cfg.Logger == nil {
		e.cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if e.cfg.Record == nil {
		e.cfg.Record = func(string, int64, int64, bool) {}
	}
	if e.cfg.Lookup == nil {
		e.cfg.Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ln, err := listenUnix(cfg.SocketPath)
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	e.srv = &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.cfg.Logger.Error("egress proxy stopped", "err", err)
		}
	}()
	return e, nil
}

// Stop closes the socket (which removes its file) and every connection through it, and
// returns once every request and tunnel has been recorded.
func (e *Egress) Stop() {
	e.srv.Close()
	<-e.done
	e.conns.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.unlogged > 0 {
		e.cfg.Logger.Warn("egress refusals not logged one by one", "refused", e.refused,
			"not_logged", e.unlogged, "destinations", len(e.named))
	}
}

// destinationName is what the store and the journal may keep of a target the agent named:
// lower case, the characters of a host:port only (any other byte is '?'), at most
// maxDestinationLen bytes.
func destinationName(target string) string {
	b := []byte(strings.ToLower(target))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte(".-_:[]*", c) >= 0) {
			b[i] = '?'
		}
	}
	if len(b) > maxDestinationLen {
		b = append(b[:maxDestinationLen-3], "..."...)
	}
	if len(b) == 0 {
		return "(none)"
	}
	return string(b)
}

// recorded is the name the turn records name under: itself, or otherDestinations once
// maxDestinations others are recorded. Call with e.mu held.
func (e *Egress) recorded(name string) string {
	if _, ok := e.named[name]; ok || len(e.named) < maxDestinations {
		if !ok {
			e.named[name] = false
		}
		return name
	}
	return otherDestinations
}

// destination is the name a connection to target is recorded under.
func (e *Egress) destination(target string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.recorded(destinationName(target))
}

// refusal counts a refusal of name and reports the name it is recorded under, and
// whether to log it: the first refusal of each destination recorded by name, and the
// first of those counted as others.
func (e *Egress) refusal(name string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refused++
	key := e.recorded(name)
	if !e.named[key] {
		e.named[key] = true
		return key, true
	}
	e.unlogged++
	return key, false
}

// listed reports whether host:port is on the list (by name or as an address).
func (e *Egress) listed(host, port string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	ip, ipErr := netip.ParseAddr(host)
	for _, r := range e.rules {
		if r.port != port {
			continue
		}
		switch {
		case r.ip.IsValid():
			if ipErr == nil && ip.Unmap() == r.ip {
				return true
			}
		case r.wildcard:
			if strings.HasSuffix(host, "."+r.host) {
				return true
			}
		case host == r.host:
			return true
		}
	}
	return false
}

// addressListed reports whether the address itself is an entry, which allows it even
// when it is private.
func (e *Egress) addressListed(ip netip.Addr, port string) bool {
	for _, r := range e.rules {
		if r.ip.IsValid() && r.ip == ip.Unmap() && r.port == port {
			return true
		}
	}
	return false
}

func internal(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(ip)
}

// errRefused is a destination the proxy does not reach; its text is what the agent reads.
type errRefused struct{ msg string }

func (e errRefused) Error() string { return e.msg }

// resolve checks host:port against the list and returns the address to dial: the name is
// resolved here, once, and an internal address is used only when it is listed itself.
// Its errors name the target by destinationName.
func (e *Egress) resolve(ctx context.Context, hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", errRefused{fmt.Sprintf("%q is not host:port", destinationName(hostport))}
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else if !validDNSName(strings.ToLower(strings.TrimSuffix(host, "."))) {
		return "", errRefused{fmt.Sprintf("%q is not a DNS name", destinationName(host))}
	}
	if !e.listed(host, port) {
		return "", errRefused{fmt.Sprintf("%s is not on this group's egress list (containerConfig.egress)", destinationName(hostport))}
	}
	if addrs == nil {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		addrs, err = e.cfg.Lookup(lctx, host)
		cancel()
		if err != nil || len(addrs) == 0 {
			return "", fmt.Errorf("resolving %s: %v", host, err)
		}
	}
	for _, ip := range addrs {
		if !internal(ip) || e.addressListed(ip, port) {
			return net.JoinHostPort(ip.Unmap().String(), port), nil
		}
	}
	return "", errRefused{fmt.Sprintf("%s resolves to %s, an internal address that is not itself on the egress list", host, addrs[0])}
}

// refuse answers a request the proxy does not carry: 403 for a destination it does not
// reach (recorded as a refusal), 502 for one it could not reach. err names the target by
// destinationName.
func (e *Egress) refuse(w http.ResponseWriter, start time.Time, target string, err error) {
	code := http.StatusBadGateway
	var rf errRefused
	name := destinationName(target)
	key, first := e.refusal(name)
	if errors.As(err, &rf) {
		code = http.StatusForbidden
		e.record(start, key, 0, 0, true)
	}
	if first {
		e.cfg.Logger.Warn("egress refused", "target", name, "recorded_as", key, "status", code, "reason", err.Error())
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Arizuko-Gateway", "refused")
	w.WriteHeader(code)
	fmt.Fprintf(w, "arizukod egress: %v\n", err)
}

// record tells Record and OnConn about a connection that began at start.
func (e *Egress) record(start time.Time, host string, up, down int64, refused bool) {
	e.cfg.Record(host, up, down, refused)
	if e.cfg.OnConn != nil {
		e.cfg.OnConn(host, start, time.Now(), up, down, refused)
	}
}

func (e *Egress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method == http.MethodConnect {
		e.connect(w, r, start)
		return
	}
	// Stop waits for the request to be recorded: its turn's record is written after.
	e.conns.Add(1)
	defer e.conns.Done()
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		e.refuse(w, start, r.Host, errRefused{"only CONNECT and absolute http:// requests are proxied; set HTTPS_PROXY/HTTP_PROXY to this proxy"})
		return
	}
	target := r.URL.Host
	if r.URL.Port() == "" {
		target = net.JoinHostPort(r.URL.Hostname(), "80")
	}
	// A secret is sent over TLS only: a placeholder in plain HTTP goes nowhere.
	if names := placeholdersIn(r, e.bindings()); len(names) > 0 {
		e.refusePlaceholder(w, start, target, names)
		return
	}
	addr, err := e.resolve(r.Context(), target)
	if err != nil {
		e.refuse(w, start, target, err)
		return
	}
	var conn countingConn
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			conn.Conn = c
			return &conn, nil
		},
		ResponseHeaderTimeout: 5 * time.Minute,
		DisableKeepAlives:     true,
	}
	defer tr.CloseIdleConnections()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = r.URL
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Proxy-Connection")
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			e.refuse(w, start, target, err)
		},
	}
	rp.ServeHTTP(w, r)
	e.record(start, e.destination(target), conn.written, conn.read, false)
}

func (e *Egress) connect(w http.ResponseWriter, r *http.Request, start time.Time) {
	target := r.Host
	addr, err := e.resolve(r.Context(), target)
	if err != nil {
		e.refuse(w, start, target, err)
		return
	}
	host, port, _ := net.SplitHostPort(target)
	all := e.bindings()
	bound := bindingsFor(all, host, port)
	if names := foreignPlaceholders(r, all, bound); len(names) > 0 {
		e.refusePlaceholder(w, start, target, names)
		return
	}
	if len(bound) > 0 {
		e.intercept(w, start, target, addr)
		return
	}
	dst, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(r.Context(), "tcp", addr)
	if err != nil {
		e.refuse(w, start, target, fmt.Errorf("connecting to %s (%s): %w", destinationName(target), addr, err))
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		dst.Close()
		e.refuse(w, start, target, errors.New("the proxy cannot take over this connection"))
		return
	}
	src, buf, err := hj.Hijack()
	if err != nil {
		dst.Close()
		return
	}
	e.conns.Add(1)
	go func() {
		defer e.conns.Done()
		defer src.Close()
		defer dst.Close()
		if _, err := src.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
			return
		}
		var up, down int64
		done := make(chan struct{})
		go func() {
			// Bytes the client sent with the CONNECT line are already buffered.
			n, _ := io.Copy(dst, io.MultiReader(buf.Reader, src))
			up = n
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			close(done)
		}()
		down, _ = io.Copy(src, dst)
		src.Close()
		<-done
		e.record(start, e.destination(target), up, down, false)
	}()
	go func() {
		<-e.done
		src.Close()
		dst.Close()
	}()
}

// countingConn counts the bytes read and written through a connection.
type countingConn struct {
	net.Conn
	read, written int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read += int64(n)
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written += int64(n)
	return n, err
}
