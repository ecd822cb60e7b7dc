package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/fakemodel"
)

// TestModelOnRequest: each request is heard once with its own status, time to first byte
// and usage, streamed or not, and a refusal with why; the turn's usage is unchanged.
func TestModelOnRequest(t *testing.T) {
	fake := fakemodel.Start()
	defer fake.Close()
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Text: "echo", InputTokens: 21, OutputTokens: 8}
	}
	up, _ := url.Parse(fake.URL)
	var mu sync.Mutex
	var heard []RequestTrace
	m, c, rec := startModel(t, up, func(cfg *ModelConfig) {
		cfg.Models = []string{"claude-test"}
		cfg.OnRequest = func(r RequestTrace) {
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, r)
		}
	})
	const tok = "arz-this-turns-token-0123456789"
	for _, stream := range []string{"true", "false"} {
		resp, _ := post(t, c, "/v1/messages", tok, `{"model":"claude-test","max_tokens":10,"stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 200 {
			t.Fatalf("stream %s: %d", stream, resp.StatusCode)
		}
	}
	post(t, c, "/v1/messages", tok, `{"model":"claude-other","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 3 {
		t.Fatalf("heard %d requests, want 3: %+v", len(heard), heard)
	}
	for i, r := range heard[:2] {
		u := r.Usage
		if r.Status != 200 || r.Path != "/v1/messages" || u.Requests != 1 || u.Model != "claude-test" || u.InputTokens != 21 || u.OutputTokens != 8 {
			t.Errorf("request %d: %+v", i, r)
		}
		if r.FirstByte.Before(r.Start) || r.End.Before(r.FirstByte) {
			t.Errorf("request %d: start %v, first byte %v, end %v", i, r.Start, r.FirstByte, r.End)
		}
	}
	if r := heard[2]; r.Status != 403 || !strings.Contains(r.Usage.Refused, "claude-other") || r.Usage.Requests != 0 {
		t.Errorf("refused request: %+v", r)
	}
	if got := m.Usage(); got != rec.sum || got.Requests != 2 || got.InputTokens != 42 {
		t.Errorf("turn usage %+v, recorded %+v", got, rec.sum)
	}
}

// TestEgressOnConn: OnConn hears what Record hears, with when each connection began and
// ended, refusals too.
func TestEgressOnConn(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello")
	}))
	defer target.Close()
	addr := strings.TrimPrefix(target.URL, "http://")
	type conn struct {
		host       string
		start, end time.Time
		down       int64
		refused    bool
	}
	var mu sync.Mutex
	var heard []conn
	sock := filepath.Join(t.TempDir(), "egress.sock")
	e, err := StartEgress(EgressConfig{SocketPath: sock, Allow: []string{addr},
		OnConn: func(host string, start, end time.Time, _, down int64, refused bool) {
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, conn{host, start, end, down, refused})
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	proxy, _ := url.Parse("http://egress")
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	for _, u := range []string{target.URL + "/x", "http://127.0.0.1:1/"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 2 || heard[0].host != addr || heard[0].refused || heard[0].down == 0 ||
		heard[1].host != "127.0.0.1:1" || !heard[1].refused {
		t.Fatalf("heard %+v", heard)
	}
	for _, h := range heard {
		if h.end.Before(h.start) || h.start.IsZero() {
			t.Errorf("%s: start %v end %v", h.host, h.start, h.end)
		}
	}
}
