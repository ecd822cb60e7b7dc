package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/arizuko/arizukod/store"
)

type egressLog struct {
	mu      sync.Mutex
	hosts   map[string][2]int64
	refused []string
}

func startEgress(t *testing.T, allow []string, lookup func(context.Context, string) ([]netip.Addr, error)) (*http.Client, *egressLog) {
	t.Helper()
	log := &egressLog{hosts: map[string][2]int64{}}
	sock := filepath.Join(t.TempDir(), "egress.sock")
	e, err := StartEgress(EgressConfig{SocketPath: sock, Allow: allow, Lookup: lookup,
		Record: func(host string, up, down int64, refused bool) {
			log.mu.Lock()
			defer log.mu.Unlock()
			if refused {
				log.refused = append(log.refused, host)
				return
			}
			c := log.hosts[host]
			log.hosts[host] = [2]int64{c[0] + up, c[1] + down}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	proxy, _ := url.Parse("http://egress")
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(proxy),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}, log
}

func TestEgress(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	defer target.Close()
	tlsTarget := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "secure hello")
	}))
	defer tlsTarget.Close()
	addr := strings.TrimPrefix(target.URL, "http://")
	tlsAddr := strings.TrimPrefix(tlsTarget.URL, "https://")
	_, port, _ := net.SplitHostPort(addr)
	// "example.test" resolves to a public address; "inside.test" and "localhost" to loopback.
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "inside.test", "localhost":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "example.test":
			return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}

	t.Run("listed address reached, plain and CONNECT", func(t *testing.T) {
		c, log := startEgress(t, []string{addr, tlsAddr}, lookup)
		resp, err := c.Get(target.URL + "/x")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "hello from /x" {
			t.Fatalf("plain HTTP: %d %q", resp.StatusCode, b)
		}
		tc := tlsTarget.Client()
		tc.Transport.(*http.Transport).Proxy = c.Transport.(*http.Transport).Proxy
		tc.Transport.(*http.Transport).DialContext = c.Transport.(*http.Transport).DialContext
		resp, err = tc.Get(tlsTarget.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "secure hello" {
			t.Fatalf("CONNECT: %q", b)
		}
		tc.CloseIdleConnections()
		c.CloseIdleConnections()
		log.mu.Lock()
		defer log.mu.Unlock()
		if log.hosts[addr][1] == 0 {
			t.Errorf("no bytes counted for %s: %v", addr, log.hosts)
		}
	})

	for _, tc := range []struct {
		name, allow, url, want string
	}{
		{"not listed", "example.test:443", target.URL, "is not on this group's egress list"},
		{"no list", "", target.URL, "is not on this group's egress list"},
		{"other port", "127.0.0.1:1", target.URL, "is not on this group's egress list"},
		{"name resolving to loopback", "inside.test:" + port, "http://inside.test:" + port, "internal address"},
		{"localhost by name", "localhost:" + port, "http://localhost:" + port, "internal address"},
		{"wildcard is not the apex", "*.inside.test:" + port, "http://inside.test:" + port, "is not on this group's egress list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var allow []string
			if tc.allow != "" {
				allow = []string{tc.allow}
			}
			c, log := startEgress(t, allow, lookup)
			resp, err := c.Get(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 403 || !strings.Contains(string(b), tc.want) {
				t.Errorf("%d %q, want 403 with %q", resp.StatusCode, b, tc.want)
			}
			if len(log.refused) != 1 {
				t.Errorf("refusals recorded: %v", log.refused)
			}
		})
	}

	t.Run("CONNECT refused names the host", func(t *testing.T) {
		c, _ := startEgress(t, nil, lookup)
		conn, err := c.Transport.(*http.Transport).DialContext(context.Background(), "", "")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "CONNECT github.com:443 HTTP/1.1\r\nHost: github.com:443\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 403 || !strings.Contains(string(b), "github.com:443") {
			t.Errorf("%d %q", resp.StatusCode, b)
		}
	})
}

func TestCheckEgress(t *testing.T) {
	for _, tc := range []struct {
		entry string
		ok    bool
	}{
		{"github.com:443", true},
		{"*.npmjs.org:443", true},
		{"10.0.0.5:8080", true},
		{"[::1]:80", true},
		{"github.com", false},
		{"github.com:0", false},
		{"github.com:99999", false},
		{"github.com:08", false},
		{"git hub.com:443", false},
		{"*.:443", false},
		{"*:443", false},
		{"a..b:443", false},
		{"-x.com:443", false},
		{"http://github.com:443", false},
	} {
		err := CheckEgress([]string{tc.entry})
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok %v", tc.entry, err, tc.ok)
		}
	}
}

// syncBuffer is a log sink the proxy's handlers write to concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An agent that names hundreds of distinct hosts, some of them kilobytes long, leaves a
// bounded trace: a bounded number of short rows in the store, each refusal counted, and a
// bounded journal.
func TestEgressRefusalsBounded(t *testing.T) {
	const (
		requests = 400
		maxRows  = 100      // distinct destinations recorded by name, plus "others"
		maxHost  = 300      // bytes of a recorded host:port
		maxLog   = 64 << 10 // bytes of log for the whole turn
	)
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run, err := st.CreateRun(ctx, store.Run{Folder: "main", Input: json.RawMessage(`{"messages":[]}`), TimeoutMS: 60000})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	sock := filepath.Join(dir, "egress.sock")
	e, err := StartEgress(EgressConfig{SocketPath: sock, Allow: []string{"*.allowed.test:443"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Record: func(host string, up, down int64, refused bool) {
			eg := store.Egress{Host: host, BytesUp: up, BytesDown: down, Requests: 1}
			if refused {
				eg.Requests, eg.Refused = 0, 1
			}
			if err := st.AddEgress(ctx, run.ID, eg); err != nil {
				t.Errorf("AddEgress: %v", err)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			e.Stop()
		}
	}()
	long := strings.Repeat("x", 8000)
	for i := range requests {
		var host string
		switch i % 3 {
		case 0: // a plain name, not listed
			host = fmt.Sprintf("h%d-%s.evil.test:443", i, strings.Repeat("q", i%50))
		case 1: // kilobytes of name under the listed wildcard
			host = fmt.Sprintf("%s%d.allowed.test:443", long, i)
		default: // a listed name's port it may not use
			host = fmt.Sprintf("%s%d.Evil.test:%d", long[:1000], i, 1+i)
		}
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", host, host)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("CONNECT %d: %v", i, err)
		}
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("CONNECT %d: %d, want 403", i, resp.StatusCode)
		}
		resp.Body.Close()
		conn.Close()
	}
	e.Stop()
	stopped = true

	rows, err := st.RunEgress(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var refused int64
	for _, r := range rows {
		refused += r.Refused
		if len(r.Host) > maxHost {
			t.Errorf("a recorded host of %d bytes: %.80q...", len(r.Host), r.Host)
		}
		if strings.ContainsFunc(r.Host, func(c rune) bool { return c < 0x20 || c > 0x7e }) {
			t.Errorf("a recorded host with characters outside printable ASCII: %q", r.Host)
		}
	}
	if len(rows) == 0 || rows[0].Host != otherDestinations || rows[0].Refused == 0 {
		t.Errorf("no row of %q counting the refusals past %d destinations: %+v", otherDestinations, maxDestinations, rows[:min(len(rows), 1)])
	}
	if len(rows) > maxRows {
		t.Errorf("%d rows of egress for one turn, want at most %d", len(rows), maxRows)
	}
	if refused != requests {
		t.Errorf("%d refusals counted, want %d", refused, requests)
	}
	if n := len(logs.String()); n > maxLog {
		t.Errorf("%d bytes of log for one turn (%d lines), want at most %d", n, strings.Count(logs.String(), "\n"), maxLog)
	}
	if !strings.Contains(logs.String(), "egress refused") {
		t.Errorf("no refusal logged: %q", logs.String())
	}
	t.Logf("%d requests: %d rows, %d bytes of log", requests, len(rows), len(logs.String()))
}

func TestDestinationName(t *testing.T) {
	long := strings.Repeat("a", 300) + ".test:443"
	for _, tc := range []struct{ target, want string }{
		{"GitHub.com:443", "github.com:443"},
		{"[::1]:80", "[::1]:80"},
		{"", "(none)"},
		{"a b\x00\n\x1b[31m:443", "a?b???[31m:443"},
		{"caf\u00e9.test:443", "caf??.test:443"},
		{long, long[:maxDestinationLen-3] + "..."},
	} {
		if got := destinationName(tc.target); got != tc.want {
			t.Errorf("destinationName(%q) = %q, want %q", tc.target, got, tc.want)
		}
	}
}
