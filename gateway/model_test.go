package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/fakemodel"
)

const realKey = "sk-ant-real-key-never-in-a-container"

// unixClient is an HTTP client over one unix socket.
func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
}

type recorder struct {
	mu  sync.Mutex
	all []Usage
	sum Usage
}

func (r *recorder) record(u Usage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, u)
	r.sum.add(u)
}

func startModel(t *testing.T, up *url.URL, mod func(*ModelConfig)) (*Model, *http.Client, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg := ModelConfig{
		SocketPath: filepath.Join(t.TempDir(), "model.sock"),
		Token:      "arz-this-turns-token-0123456789",
		Upstream:   up,
		Credential: Credential{Value: realKey, Source: "test"},
		Record:     rec.record,
	}
	if mod != nil {
		mod(&cfg)
	}
	m, err := StartModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m, unixClient(cfg.SocketPath), rec
}

func post(t *testing.T, c *http.Client, path, token, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://model"+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("X-Api-Key", token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func errorType(t *testing.T, body string) string {
	t.Helper()
	typ, _ := apiErrorOf(t, body)
	return typ
}

// apiErrorOf is the type and message of an error in the API's shape.
func apiErrorOf(t *testing.T, body string) (typ, msg string) {
	t.Helper()
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Type != "error" {
		t.Fatalf("not an API error: %q", body)
	}
	return e.Error.Type, e.Error.Message
}

func TestModelForwardsWithTheRealKey(t *testing.T) {
	fake := fakemodel.Start()
	defer fake.Close()
	up, _ := url.Parse(fake.URL)
	_, c, rec := startModel(t, up, nil)
	for _, stream := range []bool{true, false} {
		body := `{"model":"claude-test","max_tokens":10,"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `,"messages":[{"role":"user","content":"hello there"}]}`
		resp, got := post(t, c, "/v1/messages?beta=true", "arz-this-turns-token-0123456789", body)
		if resp.StatusCode != 200 || !strings.Contains(got, "echo: hello there") && !strings.Contains(got, "echo: hello the") {
			t.Fatalf("stream %v: %d %q", stream, resp.StatusCode, got)
		}
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("upstream saw %d requests", len(reqs))
	}
	for _, r := range reqs {
		if r.Header.Get("X-Api-Key") != realKey || r.Header.Get("Authorization") != "" {
			t.Errorf("upstream got x-api-key %q authorization %q, want the real key only", r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"))
		}
		if r.Path != "/v1/messages" {
			t.Errorf("upstream path %q", r.Path)
		}
	}
	if rec.sum.Requests != 2 || rec.sum.InputTokens == 0 || rec.sum.OutputTokens == 0 || rec.sum.Model != "claude-test" {
		t.Errorf("usage %+v", rec.sum)
	}
}

func TestModelRefuses(t *testing.T) {
	fake := fakemodel.Start()
	defer fake.Close()
	up, _ := url.Parse(fake.URL)
	const tok = "arz-this-turns-token-0123456789"
	msg := `{"model":"claude-test","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`
	cases := []struct {
		name, method, path, token, body string
		mod                             func(*ModelConfig)
		code                            int
		typ                             string
	}{
		{"no token", "POST", "/v1/messages", "", msg, nil, 401, "authentication_error"},
		{"another turn's token", "POST", "/v1/messages", "arz-another-turns-token-99999", msg, nil, 401, "authentication_error"},
		{"other path", "POST", "/v1/complete", tok, msg, nil, 403, "permission_error"},
		{"models list", "GET", "/v1/models", tok, "", nil, 403, "permission_error"},
		{"path escape", "POST", "/v1/messages/../../admin", tok, msg, nil, 403, "permission_error"},
		{"not JSON", "POST", "/v1/messages", tok, "nope", nil, 400, "invalid_request_error"},
		{"model not allowed", "POST", "/v1/messages", tok, msg, func(c *ModelConfig) { c.Models = []string{"claude-small"} }, 403, "permission_error"},
		{"daily budget", "POST", "/v1/messages", tok, msg, func(c *ModelConfig) {
			c.Reserve = func(context.Context, Ask) (func(), error) { return nil, errBudget }
		}, 403, "permission_error"},
		{"budget unknown", "POST", "/v1/messages", tok, msg, func(c *ModelConfig) {
			c.Reserve = func(context.Context, Ask) (func(), error) { return nil, errors.New("database is locked") }
		}, 503, "api_error"},
		{"budget without max_tokens", "POST", "/v1/messages", tok, `{"model":"claude-test","messages":[]}`, func(c *ModelConfig) {
			c.Reserve = func(context.Context, Ask) (func(), error) { return func() {}, nil }
		}, 400, "invalid_request_error"},
		{"no model in common", "POST", "/v1/messages", tok, msg, func(c *ModelConfig) { c.Models = []string{} }, 403, "permission_error"},
		// An encoded path is refused: it was judged as count_tokens (not counted, not
		// budgeted) and forwarded as the agent wrote it.
		{"encoded slash", "POST", "/v1/messages%2Fcount_tokens", tok, msg, nil, 403, "permission_error"},
		{"encoded letter", "POST", "/v1/%6Dessages", tok, msg, nil, 403, "permission_error"},
		{"encoded count_tokens", "POST", "/v1/messages/count%5Ftokens", tok, msg, nil, 403, "permission_error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, c, _ := startModel(t, up, tc.mod)
			// The path goes as written: "..", "%2F" and all, for the gateway to judge.
			req, _ := http.NewRequest(tc.method, "http://model"+tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("X-Api-Key", tc.token)
			}
			n := len(fake.Requests())
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || errorType(t, string(b)) != tc.typ {
				t.Errorf("%d %s, want %d %s", resp.StatusCode, b, tc.code, tc.typ)
			}
			if !strings.Contains(string(b), "arizukod: ") {
				t.Errorf("the error does not say who refused: %s", b)
			}
			if len(fake.Requests()) != n {
				t.Errorf("a refused request reached the upstream")
			}
		})
	}
}

var errBudget = fmt.Errorf("%w: folder main used 1200 of its 1000 tokens today (containerConfig.model.tokens_per_day)", ErrBudget)

func TestModelRequestsPerTurn(t *testing.T) {
	fake := fakemodel.Start()
	defer fake.Close()
	up, _ := url.Parse(fake.URL)
	_, c, rec := startModel(t, up, func(c *ModelConfig) { c.RequestsPerTurn = 2 })
	const tok = "arz-this-turns-token-0123456789"
	msg := `{"model":"m","messages":[{"role":"user","content":"x"}]}`
	var codes []int
	for range 3 {
		resp, _ := post(t, c, "/v1/messages", tok, msg)
		codes = append(codes, resp.StatusCode)
	}
	// count_tokens is not a model turn: it never counts against the budget.
	resp, _ := post(t, c, "/v1/messages/count_tokens", tok, msg)
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 403 || resp.StatusCode != 200 {
		t.Errorf("codes %v, count_tokens %d; want 200 200 403, 200", codes, resp.StatusCode)
	}
	if !strings.Contains(rec.sum.Refused, "requests_per_turn") || rec.sum.Requests != 2 {
		t.Errorf("usage %+v", rec.sum)
	}
}

func TestModelUpstreamFailures(t *testing.T) {
	const tok = "arz-this-turns-token-0123456789"
	msg := `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`
	for _, tc := range []struct {
		name string
		rep  fakemodel.Reply
		code int
		typ  string
	}{
		{"rate limited", fakemodel.Reply{Status: 429, ErrorType: "rate_limit_error"}, 429, "rate_limit_error"},
		{"server error", fakemodel.Reply{Status: 500, ErrorType: "api_error"}, 500, "api_error"},
		{"overloaded", fakemodel.Reply{Status: 529, ErrorType: "overloaded_error"}, 529, "overloaded_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakemodel.Start()
			defer fake.Close()
			fake.Reply = func(fakemodel.Request) fakemodel.Reply { return tc.rep }
			up, _ := url.Parse(fake.URL)
			_, c, _ := startModel(t, up, nil)
			resp, body := post(t, c, "/v1/messages", tok, msg)
			if resp.StatusCode != tc.code || errorType(t, body) != tc.typ {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
		})
	}
	t.Run("upstream down", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		up, _ := url.Parse("http://" + addr)
		_, c, _ := startModel(t, up, nil)
		resp, body := post(t, c, "/v1/messages", tok, msg)
		if resp.StatusCode != 502 || errorType(t, body) != "api_error" || !strings.Contains(body, "could not be reached") {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
	})
}

func TestModelStopEndsTheToken(t *testing.T) {
	fake := fakemodel.Start()
	defer fake.Close()
	up, _ := url.Parse(fake.URL)
	m, c, _ := startModel(t, up, nil)
	m.Stop()
	req, _ := http.NewRequest("POST", "http://model/v1/messages", strings.NewReader("{}"))
	if _, err := c.Do(req); err == nil {
		t.Fatal("the gateway still answers after its turn ended")
	}
}

func TestSSEUsage(t *testing.T) {
	stream := strings.Join([]string{
		`event: message_start`,
		`data: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":120,"output_tokens":1,"cache_read_input_tokens":30,"cache_creation_input_tokens":7,"cache_creation":{"ephemeral_5m_input_tokens":2,"ephemeral_1h_input_tokens":5}}}}`,
		``,
		`event: content_block_delta`,
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
		``,
		`event: message_delta`,
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":42}}`,
		``,
		`event: message_stop`,
		`data: {"type":"message_stop"}`,
		``, ``,
	}, "\r\n")
	// Read it in every chunk size: the usage must not depend on where reads split lines.
	for _, size := range []int{1, 7, 64, 4096} {
		var got []Usage
		s := &sseUsage{rc: io.NopCloser(strings.NewReader(stream)), record: func(u Usage) { got = append(got, u) }}
		out, _ := io.ReadAll(bufio.NewReaderSize(readerOf(s, size), 16))
		if string(out) != stream {
			t.Fatalf("size %d: the stream changed", size)
		}
		want := Usage{Model: "claude-x", InputTokens: 120, OutputTokens: 42, CacheReadTokens: 30, CacheWriteTokens: 7, CacheWrite1hTokens: 5}
		if len(got) != 1 || got[0] != want {
			t.Errorf("size %d: recorded %+v, want once %+v", size, got, want)
		}
	}
}

// TestJSONUsage: a non-streamed answer's usage, cache writes split by the cache's
// lifetime; a 1-hour count above the writes' is taken as all of them.
func TestJSONUsage(t *testing.T) {
	for _, tc := range []struct {
		body string
		want Usage
	}{
		{`{"model":"m","usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":5,"cache_creation_input_tokens":6,"cache_creation":{"ephemeral_5m_input_tokens":2,"ephemeral_1h_input_tokens":4}}}`,
			Usage{Model: "m", InputTokens: 3, OutputTokens: 4, CacheReadTokens: 5, CacheWriteTokens: 6, CacheWrite1hTokens: 4}},
		{`{"model":"m","usage":{"input_tokens":3,"cache_creation_input_tokens":6}}`, Usage{Model: "m", InputTokens: 3, CacheWriteTokens: 6}},
		{`{"model":"m","usage":{"cache_creation_input_tokens":1,"cache_creation":{"ephemeral_1h_input_tokens":9}}}`, Usage{Model: "m", CacheWriteTokens: 1, CacheWrite1hTokens: 1}},
	} {
		var m apiMessage
		if err := json.Unmarshal([]byte(tc.body), &m); err != nil {
			t.Fatal(err)
		}
		if got := m.usage(); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.body, got, tc.want)
		}
	}
}

// readerOf reads r at most n bytes at a time.
func readerOf(r io.Reader, n int) io.Reader {
	return readerFunc(func(p []byte) (int, error) { return r.Read(p[:min(n, len(p))]) })
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestModelGivesUp: a turn without a credential is given up at its first request; an
// upstream that keeps failing is recorded as it fails (what the operator sees while the
// agent retries) and given up once GiveUp passed; one that answers between stops the clock.
func TestModelGivesUp(t *testing.T) {
	const tok = "arz-this-turns-token-0123456789"
	msg := `{"model":"m","messages":[{"role":"user","content":"x"}]}`
	down := func(t *testing.T) *url.URL {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		up, _ := url.Parse("http://" + addr)
		return up
	}
	failures := func(mod func(*ModelConfig)) (func(*ModelConfig), chan error) {
		ch := make(chan error, 2)
		return func(c *ModelConfig) {
			c.Fail = func(err error) { ch <- err }
			mod(c)
		}, ch
	}
	t.Run("no credential", func(t *testing.T) {
		mod, failed := failures(func(c *ModelConfig) { c.Credential = Credential{} })
		_, c, _ := startModel(t, down(t), mod)
		post(t, c, "/v1/messages", tok, msg)
		post(t, c, "/v1/messages", tok, msg)
		select {
		case err := <-failed:
			if !errors.Is(err, ErrNoCredential) {
				t.Errorf("Fail(%v), want ErrNoCredential", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no Fail for a request without a credential")
		}
		if len(failed) > 0 {
			t.Errorf("Fail called again: %v", <-failed)
		}
	})
	t.Run("upstream down", func(t *testing.T) {
		mod, failed := failures(func(c *ModelConfig) { c.GiveUp = 300 * time.Millisecond })
		_, c, rec := startModel(t, down(t), mod)
		start := time.Now()
		post(t, c, "/v1/messages", tok, msg)
		if got := rec.snapshot().UpstreamError; !strings.Contains(got, "could not be reached") {
			t.Errorf("recorded upstream error %q, want why it failed", got)
		}
		select {
		case err := <-failed:
			if !errors.Is(err, ErrUpstreamDown) || !strings.Contains(err.Error(), "could not be reached") || time.Since(start) < 300*time.Millisecond {
				t.Errorf("Fail(%v) after %s, want ErrUpstreamDown with the cause after 300ms", err, time.Since(start))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the gateway never gave up on an upstream that is down")
		}
	})
	t.Run("upstream recovers", func(t *testing.T) {
		fake := fakemodel.Start()
		defer fake.Close()
		var n atomic.Int32
		fake.Reply = func(fakemodel.Request) fakemodel.Reply {
			if n.Add(1) == 1 {
				return fakemodel.Reply{Status: 529, ErrorType: "overloaded_error"}
			}
			return fakemodel.Reply{Text: "ok"}
		}
		up, _ := url.Parse(fake.URL)
		mod, failed := failures(func(c *ModelConfig) { c.GiveUp = 300 * time.Millisecond })
		_, c, rec := startModel(t, up, mod)
		post(t, c, "/v1/messages", tok, msg)
		if got := rec.snapshot().UpstreamError; !strings.Contains(got, "529") {
			t.Errorf("recorded upstream error %q, want the 529", got)
		}
		post(t, c, "/v1/messages", tok, msg)
		select {
		case err := <-failed:
			t.Errorf("gave up on an upstream that answered again: %v", err)
		case <-time.After(600 * time.Millisecond):
		}
	})
}

func (r *recorder) snapshot() Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sum
}
