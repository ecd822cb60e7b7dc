package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// seen keeps the Authorization headers a test server got.
type seen struct {
	mu   sync.Mutex
	auth []string
}

func (s *seen) add(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth = append(s.auth, v)
}

func (s *seen) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.auth, "\n")
}

func TestEgressSendsBoundSecret(t *testing.T) {
	const secret = "ghp_realsecretvalue0123456789"
	var bound, other seen
	want := map[string]bool{"Bearer " + secret: true, "token " + secret: true,
		"Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+secret)): true}
	boundSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bound.add(r.Header.Get("Authorization"))
		if !want[r.Header.Get("Authorization")] {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "hello "+r.URL.Path)
	}))
	defer boundSrv.Close()
	otherSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.add(r.Header.Get("Authorization"))
		io.WriteString(w, "other")
	}))
	defer otherSrv.Close()
	plainSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.add(r.Header.Get("Authorization"))
	}))
	defer plainSrv.Close()
	boundAddr := strings.TrimPrefix(boundSrv.URL, "https://")
	otherAddr := strings.TrimPrefix(otherSrv.URL, "https://")
	plainAddr := strings.TrimPrefix(plainSrv.URL, "http://")

	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	upstream := x509.NewCertPool()
	upstream.AddCert(boundSrv.Certificate())
	sock := filepath.Join(t.TempDir(), "egress.sock")
	var refusedMu sync.Mutex
	var refused []string
	e, err := StartEgress(EgressConfig{SocketPath: sock, Allow: []string{boundAddr, otherAddr, plainAddr, "example.com:443"},
		CA: ca, UpstreamRoots: upstream,
		Bindings: []Binding{{Name: "GH_TOKEN", Hosts: []string{boundAddr}, Send: SendBearer, Secret: secret},
			{Name: "GIT_TOKEN", Hosts: []string{boundAddr}, Send: SendBasic, Secret: secret},
			{Name: "OTHER_TOKEN", Hosts: []string{"example.com:443"}, Send: SendToken, Secret: "elsewhere-secret-0123"}},
		Record: func(host string, _, _ int64, r bool) {
			if r {
				refusedMu.Lock()
				refused = append(refused, host)
				refusedMu.Unlock()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	ph := PlaceholderPrefix + "gh"
	gitPh := PlaceholderPrefix + "git"
	e.SetPlaceholders(map[string]string{"GH_TOKEN": ph, "GIT_TOKEN": gitPh, "OTHER_TOKEN": PlaceholderPrefix + "other"})

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	roots.AddCert(otherSrv.Certificate())
	proxy, _ := url.Parse("http://egress")
	client := &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(proxy),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}}
	get := func(u, auth string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if strings.HasSuffix(u, "/vhost") {
			req.Host = "example.com"
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	for _, tc := range []struct {
		name, url, auth string
		code            int
		body            string
	}{
		{"bearer placeholder swapped", boundSrv.URL + "/a", "Bearer " + ph, 200, "hello /a"},
		{"basic placeholder swapped (git)", boundSrv.URL + "/repo.git/info/refs", basic("x-access-token", gitPh), 200, "hello /repo.git/info/refs"},
		{"the placeholder in another form stays one", boundSrv.URL + "/b", "token " + ph, 401, "no token"},
		{"no placeholder, no secret", boundSrv.URL + "/c", "", 401, "no token"},
		{"a placeholder bound elsewhere is refused", boundSrv.URL + "/d", "token " + PlaceholderPrefix + "other", 403, "OTHER_TOKEN"},
		{"a placeholder over plain HTTP is refused", plainSrv.URL + "/e", "Bearer " + ph, 403, "GH_TOKEN"},
		{"an unbound host is a plain tunnel", otherSrv.URL + "/f", "Bearer " + ph, 200, "other"},
		{"another Host inside a bound host's CONNECT is refused", boundSrv.URL + "/vhost", "Bearer " + ph, 403, "Host \"example.com\""},
	} {
		code, body := get(tc.url, tc.auth)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, code, body, tc.code, tc.body)
		}
	}
	if got := bound.all(); !strings.Contains(got, "Bearer "+secret) || strings.Contains(got, PlaceholderPrefix+"other") {
		t.Errorf("the bound host saw:\n%s", got)
	}
	if got := other.all(); strings.Contains(got, secret) || !strings.Contains(got, ph) {
		t.Errorf("another host saw:\n%s", got)
	}
	refusedMu.Lock()
	if len(refused) != 3 {
		t.Errorf("refusals recorded: %v, want the two placeholders sent elsewhere and the other Host", refused)
	}
	refusedMu.Unlock()
}

// TestEgressVerifiesBoundHost: the proxy's own TLS to a bound host is verified; a host
// whose certificate its roots do not trust never gets the secret.
func TestEgressVerifiesBoundHost(t *testing.T) {
	var got seen
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.add(r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "egress.sock")
	e, err := StartEgress(EgressConfig{SocketPath: sock, Allow: []string{addr}, CA: ca, UpstreamRoots: x509.NewCertPool(),
		Bindings: []Binding{{Name: "T", Hosts: []string{addr}, Send: SendBearer, Secret: "s3cret-value-123456"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	e.SetPlaceholders(map[string]string{"T": PlaceholderPrefix + "t"})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	proxy, _ := url.Parse("http://egress")
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		TLSClientConfig: &tls.Config{RootCAs: roots}}}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer "+PlaceholderPrefix+"t")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "certificate") {
		t.Errorf("an untrusted bound host: %d %q, want 502 naming the certificate", resp.StatusCode, b)
	}
	if got.all() != "" {
		t.Errorf("the untrusted host saw %q", got.all())
	}
}

func TestBindingString(t *testing.T) {
	b := Binding{Name: "T", Hosts: []string{"a.example:443"}, Send: SendBearer, Secret: "s3cret-value", Placeholder: "p"}
	for _, got := range []string{fmt.Sprint(b), fmt.Sprintf("%v %+v %s", b, b, b)} {
		if strings.Contains(got, "s3cret") {
			t.Errorf("a binding prints its secret: %s", got)
		}
	}
}

func TestCheckBinding(t *testing.T) {
	allow := []string{"github.com:443", "*.github.com:443"}
	for _, tc := range []struct {
		host, send, want string
	}{
		{"github.com:443", "bearer", ""},
		{"api.github.com:443", "header:X-Api-Key", ""},
		{"gitlab.com:443", "bearer", "not on the group's egress list"},
		{"*.github.com:443", "bearer", "exact hosts"},
		{"github.com", "bearer", "not HOST:PORT"},
		{"github.com:443", "digest", `want "bearer"`},
		{"github.com:443", "header:Bad Name", `want "bearer"`},
	} {
		err := CheckBindingHost(tc.host, allow)
		if err == nil {
			err = CheckSend(tc.send)
		}
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s %s: %v, want %q", tc.host, tc.send, err, tc.want)
		}
	}
}

// TestOpenCA: the CA is made once and kept; its certificate file holds no key.
func TestOpenCA(t *testing.T) {
	dir := t.TempDir()
	key, cert := filepath.Join(dir, "ca.key"), filepath.Join(dir, "ca.pem")
	a, err := OpenCA(key, cert, "test")
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenCA(key, cert, "test")
	if err != nil {
		t.Fatal(err)
	}
	if string(a.CertPEM()) != string(b.CertPEM()) {
		t.Error("a second open made another CA")
	}
	pemFile, _ := os.ReadFile(cert)
	if string(pemFile) != string(a.CertPEM()) || strings.Contains(string(pemFile), "PRIVATE") {
		t.Errorf("the certificate file holds %q", pemFile)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key file: %v %v", fi.Mode(), err)
	}
	os.WriteFile(key, []byte("junk"), 0o600)
	if _, err := OpenCA(key, cert, "test"); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("a broken key file: %v", err)
	}
}

// BenchmarkEgressRequest measures one HTTPS request over a new connection through the
// proxy: a plain tunnel, and a bound host the proxy intercepts (two TLS handshakes).
func BenchmarkEgressRequest(b *testing.B) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	ca, err := NewCA("bench")
	if err != nil {
		b.Fatal(err)
	}
	upstream := x509.NewCertPool()
	upstream.AddCert(srv.Certificate())
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	roots.AddCert(srv.Certificate())
	for _, bound := range []bool{false, true} {
		name := "tunnel"
		cfg := EgressConfig{SocketPath: filepath.Join(b.TempDir(), "egress.sock"), Allow: []string{addr}, CA: ca, UpstreamRoots: upstream}
		if bound {
			name = "intercepted"
			cfg.Bindings = []Binding{{Name: "T", Hosts: []string{addr}, Send: SendBearer, Secret: "s3cret-value-123456"}}
		}
		b.Run(name, func(b *testing.B) {
			e, err := StartEgress(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Stop()
			e.SetPlaceholders(map[string]string{"T": PlaceholderPrefix + "t"})
			proxy, _ := url.Parse("http://egress")
			for b.Loop() {
				tr := &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true,
					DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
						return (&net.Dialer{}).DialContext(ctx, "unix", cfg.SocketPath)
					},
					TLSClientConfig: &tls.Config{RootCAs: roots}}
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				req.Header.Set("Authorization", "Bearer "+PlaceholderPrefix+"t")
				resp, err := (&http.Client{Transport: tr}).Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
