// Package gateway serves a turn's only ways off the host while its container has no
// network: the model API (model.sock) and the egress proxy (egress.sock), both unix
// sockets in the group's IPC directory that live exactly as long as the turn.
//
// It owns the model credential (read on the host, added to each forwarded request, never
// handed to the container), the per-turn token that the agent presents instead, the
// parsing of usage from the API's answers, the egress allowlist, and the egress CA with
// which the proxy sends the secrets a group binds to hosts (intercept.go). It does not touch the
// store or the engine: what it counts and refuses it reports through callbacks.
package gateway

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arizuko/arizukod/internal/agentdir"
)

// Paths the model gateway forwards, each for POST only. Claude Code needs exactly the
// first for a turn (with ?beta=true); count_tokens is the API's other per-request call.
var modelPaths = []string{"/v1/messages", "/v1/messages/count_tokens"}

// maxJSONResponseBytes bounds a non-streamed answer the gateway reads for its usage.
const maxJSONResponseBytes = 64 << 20

// Usage is what requests of one turn used, as the API reported it.
type Usage struct {
	Requests         int64
	Model            string
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	// CacheWrite1hTokens are the cache writes, of CacheWriteTokens, to the 1-hour cache
	// (the API's cache_creation.ephemeral_1h_input_tokens), priced above the 5-minute ones.
	CacheWrite1hTokens int64
	// Refused says why the gateway refused a request; "" for a forwarded one.
	Refused string
	// UpstreamError says how the upstream last failed (unreachable, no answer in time, a
	// 5xx answer) while the agent retries; "" when it did not.
	UpstreamError string
}

func (u *Usage) add(d Usage) {
	u.Requests += d.Requests
	u.InputTokens += d.InputTokens
	u.OutputTokens += d.OutputTokens
	u.CacheReadTokens += d.CacheReadTokens
	u.CacheWriteTokens += d.CacheWriteTokens
	u.CacheWrite1hTokens += d.CacheWrite1hTokens
	if d.Model != "" {
		u.Model = d.Model
	}
	if d.Refused != "" {
		u.Refused = d.Refused
	}
	if d.UpstreamError != "" {
		u.UpstreamError = d.UpstreamError
	}
}

// ModelConfig is one turn's model gateway.
type ModelConfig struct {
	// SocketPath is where it listens: <ipc dir>/model.sock.
	SocketPath string
	// Token is the token of the turn's container; a request without it is refused. Empty
	// refuses every request until Accept names the token: the container may be known only
	// once the gateway listens (one prepared ahead of its turn).
	Token string
	// Upstream is the Messages API's base URL, e.g. https://api.anthropic.com.
	Upstream *url.URL
	// Credential is added to every forwarded request. Without one every request is
	// refused with what to configure.
	Credential Credential
	// Models, when not nil, are the only models a request may name; an empty list allows
	// none.
	Models []string
	// RequestsPerTurn, when positive, bounds the turn's forwarded requests.
	RequestsPerTurn int64
	// Reserve, when set, is asked to reserve what a Messages request may use at most (its
	// model, its max_tokens and an estimate of its input, a token for every 3 bytes of its
	// body) before it is forwarded, and release is called once the request has ended and
	// its usage has been recorded: parallel requests cannot overshoot a budget by more
	// than their reservations underestimate. An error that is ErrBudget refuses the
	// request with its text, which the agent and the operator read; any other refuses it
	// as a failure of the gateway. A request under a budget must say its max_tokens.
	Reserve func(ctx context.Context, a Ask) (release func(), err error)
	// Shared, when set, bounds the requests in flight and their buffered bodies together
	// with every other gateway that shares it, beyond the turn's own bounds.
	Shared *Pool
	// Record gets the usage of each request as it ends (and each refusal), before the
	// agent reads the end of the answer. It must not block for long.
	Record func(Usage)
	// GiveUp, when positive, is how long the upstream may keep failing (no answer, or
	// only 5xx answers) before the gateway gives the turn up: Fail is called with
	// ErrUpstreamDown. The agent's SDK would retry for minutes.
	GiveUp time.Duration
	// Fail, when set, is called once when the turn cannot reach the model: at its first
	// request without a credential (ErrNoCredential), or once the upstream failed for
	// GiveUp (ErrUpstreamDown). The turn is then ended by its caller.
	Fail func(error)
	// OnRequest, when set, hears each request when its answer is over: its times, status
	// and usage (a turn's trace).
	OnRequest func(RequestTrace)
	// Transport reaches the upstream; nil uses one with the package's timeouts.
	Transport http.RoundTripper
	Logger    *slog.Logger
}

// Ask is what one Messages request may use at most: its model's Input tokens (an
// estimate from the size of its body) and Output tokens (its max_tokens).
type Ask struct {
	Model         string
	Input, Output int64
}

// Tokens is the sum of a's tokens.
func (a Ask) Tokens() int64 { return a.Input + a.Output }

// ErrBudget is a budget that a request would exceed (ModelConfig.Reserve).
var ErrBudget = errors.New("budget reached")

// ErrUpstreamDown: the model API upstream kept failing for ModelConfig.GiveUp.
var ErrUpstreamDown = errors.New("the model API upstream kept failing")

// Model is one turn's running model gateway.
type Model struct {
	cfg   ModelConfig
	pools []*Pool // the turn's own, then the shared one
	srv   *http.Server
	ln    net.Listener
	done  chan struct{}
	proxy *httputil.ReverseProxy
	token atomic.Pointer[string]

	mu       sync.Mutex
	usage    Usage
	forwards int64
	// failing is set while the upstream fails: it gives the turn up once GiveUp passed
	// with no good answer between.
	failing *time.Timer
	failed  sync.Once
}

// NewTransport is the upstream transport of the gateways: bounded dials and header waits,
// so that a dead upstream answers the agent with an error instead of hanging the turn.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 10 * time.Minute,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   16,
		ForceAttemptHTTP2:     true,
	}
}

// StartModel listens on cfg.SocketPath (replacing a stale socket) and serves until Stop.
func StartModel(cfg ModelConfig) (*Model, error) {
	switch {
	case cfg.SocketPath == "":
		return nil, errors.New("model gateway: no socket path")
	case cfg.Token != "" && len(cfg.Token) < 16:
		return nil, errors.New("model gateway: the turn's token is too short")
	case cfg.Upstream == nil || cfg.Upstream.Host == "" || (cfg.Upstream.Scheme != "https" && cfg.Upstream.Scheme != "http"):
		return nil, fmt.Errorf("model gateway: upstream %v is not an http(s) URL", cfg.Upstream)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Transport == nil {
		cfg.Transport = NewTransport()
	}
	if cfg.Record == nil {
		cfg.Record = func(Usage) {}
	}
	ln, err := listenUnix(cfg.SocketPath)
	if err != nil {
		return nil, fmt.Errorf("model gateway: %w", err)
	}
	m := &Model{cfg: cfg, ln: ln, done: make(chan struct{})}
	m.pools = []*Pool{{whose: "this turn's", maxRequests: TurnRequests, maxBytes: TurnBodyBytes}}
	if cfg.Shared != nil {
		m.pools = append(m.pools, cfg.Shared)
	}
	m.token.Store(&cfg.Token)
	m.proxy = &httputil.ReverseProxy{
		Rewrite:        m.rewrite,
		Transport:      cfg.Transport,
		FlushInterval:  -1,
		ModifyResponse: m.modifyResponse,
		ErrorHandler:   m.upstreamError,
		ErrorLog:       slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Error("model gateway stopped", "err", err)
		}
	}()
	return m, nil
}

// Accept makes token the only one the gateway takes, in place of ModelConfig.Token: the
// token of the container the turn got.
func (m *Model) Accept(token string) error {
	if len(token) < 16 {
		return errors.New("model gateway: the turn's token is too short")
	}
	m.token.Store(&token)
	return nil
}

// Stop closes the socket and every open request at once: the turn is over, and so is its
// token. Closing the socket removes its file.
func (m *Model) Stop() {
	m.srv.Close()
	<-m.done
	m.mu.Lock()
	if m.failing != nil {
		m.failing.Stop()
	}
	m.mu.Unlock()
}

// fail tells the caller, once, that the turn cannot reach the model.
func (m *Model) fail(err error) {
	m.failed.Do(func() {
		m.cfg.Logger.Error("model gateway gives the turn up", "err", err)
		if m.cfg.Fail != nil {
			m.cfg.Fail(err)
		}
	})
}

// upstreamFailed records how the upstream failed, for the operator to see while the agent
// retries, and starts the give-up clock at the first failure since a good answer.
func (m *Model) upstreamFailed(ctx context.Context, why string) {
	m.mu.Lock()
	if m.failing == nil && m.cfg.GiveUp > 0 {
		m.failing = time.AfterFunc(m.cfg.GiveUp, func() {
			m.fail(fmt.Errorf("%w for %s ([model] give_up): %s", ErrUpstreamDown, m.cfg.GiveUp, m.Usage().UpstreamError))
		})
	}
	m.mu.Unlock()
	m.recordFor(ctx, Usage{UpstreamError: why})
}

// upstreamAnswered stops the give-up clock: the upstream answers again.
func (m *Model) upstreamAnswered() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failing != nil {
		m.failing.Stop()
		m.failing = nil
	}
}

// Usage is the turn's usage so far.
func (m *Model) Usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usage
}

func (m *Model) record(u Usage) {
	m.mu.Lock()
	m.usage.add(u)
	m.mu.Unlock()
	m.cfg.Record(u)
}

// apiError writes an error in the Messages API's own shape, so the agent's SDK reads it
// (and retries 429 and 5xx as it would against the real API).
func apiError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Arizuko-Gateway", "refused")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": typ, "message": msg},
	})
}

// presentedToken is the token the agent sent, as an API key or a bearer token.
func presentedToken(h http.Header) string {
	if k := h.Get("X-Api-Key"); k != "" {
		return k
	}
	if a := h.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

func (m *Model) refuse(w http.ResponseWriter, r *http.Request, code int, typ, msg string, count bool) {
	m.cfg.Logger.Warn("model gateway refused a request", "method", r.Method, "path", r.URL.Path, "status", code, "reason", msg)
	if count {
		m.recordFor(r.Context(), Usage{Refused: msg})
	}
	apiError(w, code, typ, "arizukod: "+msg)
}

func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if m.cfg.OnRequest != nil {
		m.traced(w, r)
		return
	}
	m.serve(w, r)
}

func (m *Model) serve(w http.ResponseWriter, r *http.Request) {
	tok := presentedToken(r.Header)
	if want := *m.token.Load(); tok == "" || want == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(want)) != 1 {
		why := "the request carries no token: send this turn's ARIZUKO_MODEL_TOKEN as x-api-key"
		if tok != "" {
			why = "the token is not this turn's: only the running turn's ARIZUKO_MODEL_TOKEN is accepted"
		}
		m.refuse(w, r, http.StatusUnauthorized, "authentication_error", why, false)
		return
	}
	if m.cfg.Credential.Value == "" {
		m.refuse(w, r, http.StatusUnauthorized, "authentication_error", ErrNoCredential.Error(), true)
		m.fail(ErrNoCredential)
		return
	}
	// The path judged is the path forwarded: one the client percent-encoded (which the
	// upstream may read otherwise, "/v1/messages%2Fcount_tokens") is refused.
	if r.URL.EscapedPath() != r.URL.Path {
		m.refuse(w, r, http.StatusForbidden, "permission_error",
			fmt.Sprintf("%s %s is not forwarded: the path is percent-encoded; the gateway serves only POST %s", r.Method, r.URL.EscapedPath(), strings.Join(modelPaths, ", POST ")), false)
		return
	}
	if !slices.Contains(modelPaths, r.URL.Path) || r.Method != http.MethodPost {
		m.refuse(w, r, http.StatusForbidden, "permission_error",
			fmt.Sprintf("%s %s is not forwarded: the gateway serves only POST %s", r.Method, r.URL.Path, strings.Join(modelPaths, ", POST ")), false)
		return
	}
	h, err := admit(m.pools)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		m.refuse(w, r, http.StatusTooManyRequests, "rate_limit_error", err.Error(), true)
		return
	}
	defer h.release()
	body, err := readBody(r, h)
	var limit *errLimit
	switch {
	case errors.Is(err, errTooLarge):
		m.refuse(w, r, http.StatusRequestEntityTooLarge, "request_too_large", err.Error(), false)
		return
	case errors.As(err, &limit):
		w.Header().Set("Retry-After", "1")
		m.refuse(w, r, http.StatusTooManyRequests, "rate_limit_error", err.Error(), true)
		return
	case err != nil:
		m.refuse(w, r, http.StatusBadRequest, "invalid_request_error", err.Error(), false)
		return
	}
	req, err := judge(body)
	if err != nil {
		m.refuse(w, r, http.StatusBadRequest, "invalid_request_error", err.Error(), false)
		return
	}
	if m.cfg.Models != nil && !slices.Contains(m.cfg.Models, req.Model) {
		allowed := "none: the model lists of the group and its ancestors have no model in common"
		if len(m.cfg.Models) > 0 {
			allowed = strings.Join(m.cfg.Models, ", ")
		}
		m.refuse(w, r, http.StatusForbidden, "permission_error",
			fmt.Sprintf("model %q is not allowed for this group (allowed: %s)", req.Model, allowed), true)
		return
	}
	if r.URL.Path == "/v1/messages" {
		release, ok := m.count(w, r, req, len(body))
		if !ok {
			return
		}
		defer release()
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	m.proxy.ServeHTTP(w, r)
}

// inputEstimate is what a request body of n bytes is reserved for as input: a token
// for every 3 bytes, more than most text, JSON and images take; the request's real usage
// settles it.
func inputEstimate(n int) int64 { return (int64(n) + 2) / 3 }

// count counts a Messages request against the turn's requests and reserves the tokens
// it may use; release ends the reservation. It answers the agent when it refuses.
func (m *Model) count(w http.ResponseWriter, r *http.Request, req request, size int) (release func(), ok bool) {
	if m.cfg.Reserve != nil && req.MaxTokens == 0 {
		m.refuse(w, r, http.StatusBadRequest, "invalid_request_error",
			"max_tokens: required: this group's budget reserves it before the request is forwarded", false)
		return nil, false
	}
	m.mu.Lock()
	over := m.cfg.RequestsPerTurn > 0 && m.forwards >= m.cfg.RequestsPerTurn
	if !over {
		m.forwards++
	}
	m.mu.Unlock()
	if over {
		m.refuse(w, r, http.StatusForbidden, "permission_error",
			fmt.Sprintf("budget reached: this turn made its %d model requests (containerConfig.model.requests_per_turn)", m.cfg.RequestsPerTurn), true)
		return nil, false
	}
	release = func() {}
	if m.cfg.Reserve != nil {
		input := inputEstimate(size)
		rel, err := m.cfg.Reserve(r.Context(), Ask{Model: req.Model, Input: input, Output: req.MaxTokens})
		if err != nil {
			m.mu.Lock()
			m.forwards--
			m.mu.Unlock()
			if !errors.Is(err, ErrBudget) {
				m.refuse(w, r, http.StatusServiceUnavailable, "api_error", "checking the budget: "+err.Error(), false)
				return nil, false
			}
			m.refuse(w, r, http.StatusForbidden, "permission_error",
				fmt.Sprintf("%v; this request may use up to %d tokens (max_tokens %d and about %d of input)", err, req.MaxTokens+input, req.MaxTokens, input), true)
			return nil, false
		}
		release = rel
	}
	m.recordFor(r.Context(), Usage{Requests: 1, Model: req.Model})
	return release, true
}

// rewrite sends the request to the upstream with the real credential in place of the
// turn's token, and nothing else of the agent's identity.
func (m *Model) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(m.cfg.Upstream)
	pr.Out.Host = m.cfg.Upstream.Host
	h := pr.Out.Header
	h.Del("X-Api-Key")
	h.Del("Authorization")
	h.Del("Proxy-Authorization")
	h.Del("Cookie")
	m.cfg.Credential.apply(h)
}

func (m *Model) modifyResponse(resp *http.Response) error {
	if resp.StatusCode >= 500 {
		m.upstreamFailed(resp.Request.Context(), "the model API upstream answered "+resp.Status)
	} else {
		m.upstreamAnswered()
	}
	if resp.StatusCode != http.StatusOK || !strings.HasSuffix(resp.Request.URL.Path, "/v1/messages") {
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		ctx := resp.Request.Context()
		resp.Body = &sseUsage{rc: resp.Body, record: func(u Usage) { m.recordFor(ctx, u) }}
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONResponseBytes))
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("reading the upstream's answer: %w", err)
	}
	var msg messageEvent
	if json.Unmarshal(data, &msg.Message) == nil {
		m.recordFor(resp.Request.Context(), msg.Message.usage())
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	resp.ContentLength = int64(len(data))
	resp.Header.Del("Content-Length")
	return nil
}

// upstreamError answers the agent when the upstream could not be reached or did not
// answer in time: in the API's shape and with a 5xx status, so the agent retries.
func (m *Model) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the agent went away or the turn ended: nobody reads an answer
	}
	code, msg := http.StatusBadGateway, "the model API upstream could not be reached: "+err.Error()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		code, msg = http.StatusGatewayTimeout, "the model API upstream did not answer in time: "+err.Error()
	}
	m.cfg.Logger.Warn("model upstream failed", "path", r.URL.Path, "status", code, "err", err)
	m.upstreamFailed(r.Context(), msg)
	apiError(w, code, "api_error", "arizukod: "+msg)
}

// listenUnix listens on path, in the group's IPC directory: the agent's ground, so the
// socket is bound, given mode 0666 and later removed through the directory's descriptor
// (agentdir), replacing what an earlier turn or the agent left there and following no link.
// Closing the listener removes the socket if it is still the one bound.
func listenUnix(path string) (net.Listener, error) {
	dir, err := agentdir.Open(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return dir.Listen(filepath.Base(path), 0o666)
}
