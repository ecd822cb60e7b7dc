package gateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/arizuko/arizukod/internal/atomicfile"
)

// The credentials the egress proxy sends for the agent. A group binds a secret (a file of
// the credentials directory) to HOST:PORTs of its egress list; its container holds only a
// placeholder, and the proxy, for exactly those hosts, terminates the agent's TLS with the
// daemon's CA, swaps the placeholder for the secret where the binding says it is sent,
// and opens its own TLS to the host, verified against the daemon's roots. The
// interception is crypto/tls and httputil.ReverseProxy of the standard library: the proxy
// already resolves, checks and dials every destination itself, and a proxy library
// (goproxy) would bring a second dialer and allowlist path around it for the same two
// calls (tls.Server, ReverseProxy).

// PlaceholderPrefix starts every placeholder a container gets instead of a secret.
const PlaceholderPrefix = "arizuko-placeholder-"

// ErrBadBinding marks a malformed credential binding.
var ErrBadBinding = errors.New("bad credential binding")

// The ways a binding's secret is sent: how the agent's request carries the placeholder.
const (
	SendBearer = "bearer" // Authorization: Bearer <secret>
	SendToken  = "token"  // Authorization: token <secret> (GitHub's)
	SendBasic  = "basic"  // Authorization: Basic base64(user:<secret>), git over HTTPS
	sendHeader = "header:"
)

var headerName = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// CheckSend validates how a binding's secret is sent: "bearer", "token", "basic", or
// "header:NAME" (the whole value of header NAME).
func CheckSend(send string) error {
	switch send {
	case SendBearer, SendToken, SendBasic:
		return nil
	}
	if name, ok := strings.CutPrefix(send, sendHeader); ok && headerName.MatchString(name) {
		return nil
	}
	return fmt.Errorf("%w: send %q: want \"bearer\", \"token\", \"basic\" or \"header:NAME\"", ErrBadBinding, send)
}

// CheckBindingHost validates a host a secret is bound to: an exact HOST:PORT (a DNS name
// or an address, no wildcard), which must be on allow, the group's egress list.
func CheckBindingHost(host string, allow []string) error {
	r, err := parseEgress(host)
	if err != nil {
		return err
	}
	if r.wildcard {
		return fmt.Errorf("%w: host %q: a secret is bound to exact hosts, not to a wildcard", ErrBadBinding, host)
	}
	e := &Egress{}
	for _, a := range allow {
		if ar, err := parseEgress(a); err == nil {
			e.rules = append(e.rules, ar)
		}
	}
	h, port, _ := net.SplitHostPort(host)
	if !e.listed(h, port) {
		return fmt.Errorf("%w: host %q is not on the group's egress list", ErrBadBinding, host)
	}
	return nil
}

// Binding is a secret the egress proxy sends for the agent of one turn.
type Binding struct {
	// Name is the variable the container holds the placeholder in (GH_TOKEN).
	Name string
	// Hosts are the HOST:PORTs the secret is sent to, each on the egress list.
	Hosts []string
	// Send is how it is sent (CheckSend).
	Send string
	// Secret is the value; Placeholder what the container has instead.
	Secret, Placeholder string
}

// String names the binding without its secret.
func (b Binding) String() string {
	return fmt.Sprintf("%s to %s (%s)", b.Name, strings.Join(b.Hosts, ","), b.Send)
}

// Placeholder is the placeholder of the variable name in the agent container named
// container: a MAC under the token secret, so that the container's environment can be
// minted before its turn (a prepared container) and means nothing elsewhere.
func (t *Tokens) Placeholder(container, name string) string {
	mac := hmac.New(sha256.New, t.secret)
	mac.Write([]byte("placeholder/" + name + "/" + container))
	return PlaceholderPrefix + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:18])
}

// CA is a certificate authority of the daemon, one per purpose and data directory
// (OpenCA, OpenCAFor): the egress proxy's, whose certificate (CertPEM) is mounted read-only
// into each container, whose tools trust it; the Kubernetes relay's (noderelay), which
// signs the central's and the nodes' certificates. Its key stays in a file the daemon
// alone reads, never mounted.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	pem     []byte
	purpose string

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// NewCA makes an egress CA named after the daemon's instance.
func NewCA(instance string) (*CA, error) { return newCA("egress", instance) }

func newCA(purpose, instance string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("%s CA: %w", purpose, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "arizukod " + purpose + " CA " + instance, Organization: []string{"arizukod"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("%s CA: %w", purpose, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("%s CA: %w", purpose, err)
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		purpose: purpose, leaves: map[string]*tls.Certificate{}}, nil
}

// OpenCA reads the egress CA kept in keyPath (its key and certificate, PEM), making it
// (0600) when missing or expired, and writes its certificate alone to certPath (0644) for
// the containers.
func OpenCA(keyPath, certPath, name string) (*CA, error) {
	return OpenCAFor("egress", keyPath, certPath, name)
}

// OpenCAFor is OpenCA for the CA of purpose (a word: "relay"), kept apart from every other
// CA in its own keyPath; certPath "" writes no certificate file.
func OpenCAFor(purpose, keyPath, certPath, name string) (*CA, error) {
	ca, err := readCA(purpose, keyPath)
	if errors.Is(err, fs.ErrNotExist) || err == nil && time.Until(ca.cert.NotAfter) < 30*24*time.Hour {
		if ca, err = newCA(purpose, name); err != nil {
			return nil, err
		}
		der, err := x509.MarshalECPrivateKey(ca.key)
		if err != nil {
			return nil, fmt.Errorf("%s CA: %w", purpose, err)
		}
		data := append(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), ca.pem...)
		if err := atomicfile.Write(keyPath, data, 0o600); err != nil {
			return nil, fmt.Errorf("%s CA: %w", purpose, err)
		}
	} else if err != nil {
		return nil, err
	}
	if certPath == "" {
		return ca, nil
	}
	if err := atomicfile.Write(certPath, ca.pem, 0o644); err != nil {
		return nil, fmt.Errorf("%s CA certificate: %w", purpose, err)
	}
	return ca, nil
}

func readCA(purpose, path string) (*CA, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s CA: %w", purpose, err)
	}
	bad := fmt.Errorf("%s CA %s: not a key and certificate made by arizukod; remove it and a new one is made", purpose, path)
	kb, rest := pem.Decode(data)
	if kb == nil || kb.Type != "EC PRIVATE KEY" {
		return nil, bad
	}
	cb, _ := pem.Decode(rest)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, bad
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, bad
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil || !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, bad
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(cb), purpose: purpose, leaves: map[string]*tls.Certificate{}}, nil
}

// Issue signs a new key pair for cn, valid for validity, with the one extended key usage
// given (x509.ExtKeyUsageServerAuth or ClientAuth) and the DNS names dnsNames, and returns
// the certificate and its key, PEM. The key is made here and kept nowhere: the caller
// hands it to whoever the certificate names.
func (c *CA) Issue(cn string, dnsNames []string, usage x509.ExtKeyUsage, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("%s CA: %w", c.purpose, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"arizukod"}},
		DNSNames:     dnsNames,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, nil, fmt.Errorf("%s CA: %w", c.purpose, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("%s CA: %w", c.purpose, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// CertPEM is the CA's certificate (its public part only).
func (c *CA) CertPEM() []byte { return c.pem }

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// leaf is the certificate the proxy presents for host (a name or an address), made once
// and again a day before it expires.
func (c *CA) leaf(host string) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.leaves[host]; ok && time.Until(l.Leaf.NotAfter) > 24*time.Hour {
		return l, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(0, 0, 7),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = []net.IP{ip.AsSlice()}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	l := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}
	c.leaves[host] = l
	return l, nil
}

// bindingsFor are the bindings of bs that send their secret to host:port.
func bindingsFor(bs []Binding, host, port string) []Binding {
	target := strings.ToLower(net.JoinHostPort(strings.TrimSuffix(host, "."), port))
	var out []Binding
	for _, b := range bs {
		for _, h := range b.Hosts {
			if strings.ToLower(h) == target {
				out = append(out, b)
				break
			}
		}
	}
	return out
}

// SetPlaceholders gives the bindings their placeholders, by name, once the turn's
// container is named.
func (e *Egress) SetPlaceholders(byName map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.cfg.Bindings {
		e.cfg.Bindings[i].Placeholder = byName[e.cfg.Bindings[i].Name]
	}
}

// bindings is a copy of the bindings, with their placeholders as they are now.
func (e *Egress) bindings() []Binding {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Binding(nil), e.cfg.Bindings...)
}

// placeholdersIn names the bindings whose placeholder r carries anywhere: its URL, any
// header, or a Basic authorization's user and password.
func placeholdersIn(r *http.Request, bs []Binding) []string {
	var texts []string
	texts = append(texts, r.URL.String(), r.RequestURI)
	for k, vs := range r.Header {
		for _, v := range vs {
			texts = append(texts, v)
			if k == "Authorization" || k == "Proxy-Authorization" {
				if scheme, enc, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "basic") {
					if dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc)); err == nil {
						texts = append(texts, string(dec))
					}
				}
			}
		}
	}
	var names []string
	for _, b := range bs {
		if b.Placeholder == "" {
			continue
		}
		for _, t := range texts {
			if strings.Contains(t, b.Placeholder) {
				names = append(names, b.Name)
				break
			}
		}
	}
	return names
}

// swap puts b's secret in h where b's placeholder is sent as b.Send says; it reports
// whether it did.
func swap(h http.Header, b Binding) bool {
	auth := h.Get("Authorization")
	switch b.Send {
	case SendBearer, SendToken:
		scheme := "Bearer"
		if b.Send == SendToken {
			scheme = "token"
		}
		if s, v, ok := strings.Cut(auth, " "); ok && strings.EqualFold(s, scheme) && strings.TrimSpace(v) == b.Placeholder {
			h.Set("Authorization", scheme+" "+b.Secret)
			return true
		}
	case SendBasic:
		s, enc, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(s, "basic") {
			return false
		}
		dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
		if err != nil {
			return false
		}
		user, pass, _ := strings.Cut(string(dec), ":")
		if user != b.Placeholder && pass != b.Placeholder {
			return false
		}
		if user == b.Placeholder {
			user = b.Secret
		}
		if pass == b.Placeholder {
			pass = b.Secret
		}
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
		return true
	default:
		name := strings.TrimPrefix(b.Send, sendHeader)
		if h.Get(name) == b.Placeholder {
			h.Set(name, b.Secret)
			return true
		}
	}
	return false
}

// foreignPlaceholders names the bindings whose placeholder r carries although they do not
// send their secret to r's destination, bound (the bindings of that destination).
func foreignPlaceholders(r *http.Request, all, bound []Binding) []string {
	var out []string
	for _, name := range placeholdersIn(r, all) {
		if !containsBinding(bound, name) {
			out = append(out, name)
		}
	}
	return out
}

func containsBinding(bs []Binding, name string) bool {
	for _, b := range bs {
		if b.Name == name {
			return true
		}
	}
	return false
}

// refusePlaceholder refuses a request that carries placeholders to a destination their
// secret is not bound to, logging which (never a value).
func (e *Egress) refusePlaceholder(w http.ResponseWriter, start time.Time, target string, names []string) {
	key := destinationName(target) + " " + strings.Join(names, ",")
	e.mu.Lock()
	first := !e.placeholderLogged[key] && len(e.placeholderLogged) < maxDestinations
	if first {
		e.placeholderLogged[key] = true
	}
	e.mu.Unlock()
	if first {
		e.cfg.Logger.Warn("egress refused a credential placeholder sent to a host it is not bound to",
			"target", destinationName(target), "credentials", strings.Join(names, ","))
	}
	e.refuse(w, start, target, errRefused{fmt.Sprintf("the placeholder of %s is not sent to %s: its secret is bound to other hosts (containerConfig.credentials)",
		strings.Join(names, ", "), destinationName(target))})
}

// sameHost reports whether a request's Host header names host:port (the port may be left
// out when it is 443).
func sameHost(hostHeader, host, port string) bool {
	h, p, err := net.SplitHostPort(hostHeader)
	if err != nil {
		h, p = strings.Trim(hostHeader, "[]"), "443"
	}
	return strings.EqualFold(strings.TrimSuffix(h, "."), strings.TrimSuffix(host, ".")) && p == port
}

// upstreamURL is the https URL of target for an intercepted request's path.
func upstreamURL(target string, u *url.URL) *url.URL {
	out := *u
	out.Scheme, out.Host = "https", target
	return &out
}

// intercept serves a CONNECT to target, whose secrets bound are sent by the proxy: it
// answers the agent's TLS with a certificate of the daemon's CA for target's host, and
// forwards each request over its own TLS to addr, verified as target's host against the
// daemon's roots (UpstreamRoots), with the placeholders swapped.
func (e *Egress) intercept(w http.ResponseWriter, start time.Time, target, addr string) {
	host, _, _ := net.SplitHostPort(target)
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	cert, err := e.cfg.CA.leaf(host)
	if err != nil {
		e.refuse(w, start, target, fmt.Errorf("a certificate for %s: %w", destinationName(target), err))
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		e.refuse(w, start, target, errors.New("the proxy cannot take over this connection"))
		return
	}
	src, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	e.conns.Add(1)
	go func() {
		defer e.conns.Done()
		defer src.Close()
		if _, err := src.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
			return
		}
		up := &countingConn{}
		tr := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				c, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", addr)
				if err != nil {
					return nil, err
				}
				up.Conn = c
				return up, nil
			},
			TLSClientConfig:       &tls.Config{ServerName: host, RootCAs: e.cfg.UpstreamRoots, MinVersion: tls.VersionTLS12},
			ResponseHeaderTimeout: 5 * time.Minute,
			MaxIdleConnsPerHost:   1,
		}
		defer tr.CloseIdleConnections()
		rp := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.URL = upstreamURL(target, pr.In.URL)
				pr.Out.Host = pr.In.Host
			},
			Transport:     tr,
			FlushInterval: -1,
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
				e.refuse(w, start, target, fmt.Errorf("forwarding to %s: %w", destinationName(target), err))
			},
		}
		tlsConf := &tls.Config{
			MinVersion: tls.VersionTLS12,
			NextProtos: []string{"http/1.1"},
			GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
				if hello.ServerName != "" && !strings.EqualFold(strings.TrimSuffix(hello.ServerName, "."), host) {
					return nil, fmt.Errorf("TLS for %q inside a CONNECT to %s", hello.ServerName, host)
				}
				return cert, nil
			},
		}
		conn := &bufferedConn{Conn: src, r: buf.Reader}
		ln := newOneConnListener(tls.Server(conn, tlsConf))
		srv := &http.Server{
			Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.forwardBound(w, r, start, target, rp) }),
			ReadHeaderTimeout: 30 * time.Second,
			ErrorLog:          log.New(io.Discard, "", 0),
		}
		stop := make(chan struct{})
		go func() {
			select {
			case <-e.done:
				srv.Close()
			case <-stop:
			}
		}()
		srv.Serve(ln)
		<-ln.closed
		srv.Close()
		close(stop)
		e.record(start, e.destination(target), up.written, up.read, false)
	}()
}

// forwardBound forwards one request of an intercepted connection: refused when it
// carries the placeholder of a secret not bound to target; else each bound secret is
// swapped in where its binding says it is sent.
func (e *Egress) forwardBound(w http.ResponseWriter, r *http.Request, start time.Time, target string, rp *httputil.ReverseProxy) {
	host, port, _ := net.SplitHostPort(target)
	all := e.bindings()
	bound := bindingsFor(all, host, port)
	if names := foreignPlaceholders(r, all, bound); len(names) > 0 {
		e.refusePlaceholder(w, start, target, names)
		return
	}
	// The secret goes to the host the CONNECT named, not to another one the same server
	// answers for.
	if !sameHost(r.Host, host, port) {
		e.refuse(w, start, target, errRefused{fmt.Sprintf("Host %q inside a CONNECT to %s", destinationName(r.Host), destinationName(target))})
		return
	}
	out := r.Clone(r.Context())
	for _, b := range bound {
		if b.Placeholder != "" && swap(out.Header, b) {
			e.cfg.Logger.Debug("egress sent a credential", "target", destinationName(target), "credential", b.Name)
		}
	}
	rp.ServeHTTP(w, out)
}

// bufferedConn reads first what the CONNECT's reader buffered.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// oneConnListener hands out one connection, then waits for it to close.
type oneConnListener struct {
	conn   net.Conn
	once   sync.Once
	closed chan struct{}
	mu     sync.Mutex
	given  bool
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{closed: make(chan struct{})}
	l.conn = &closeNotifyConn{Conn: c, l: l}
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if !l.given {
		l.given = true
		l.mu.Unlock()
		return l.conn, nil
	}
	l.mu.Unlock()
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }

type closeNotifyConn struct {
	net.Conn
	l *oneConnListener
}

func (c *closeNotifyConn) Close() error {
	err := c.Conn.Close()
	c.l.Close()
	return err
}
