package main

import (
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arizuko/arizukod/internal/fakemodel"
)

// The messages the scripted upstream answers by (a turn's message contains one).
const (
	msgPlain = "bench-plain"
	msgTool  = "bench-tool"
	msgHold  = "bench-hold"
)

// upstream is the scripted Messages API of the Claude Code measurements: internal/fakemodel
// behind a handler that notes when each /v1/messages request arrives, served on a loopback
// port (for Claude Code on the host and for the daemons' model gateway) and on a unix socket
// (model.sock, which the arizuko-claude runner relays to inside a container without
// network).
//
// It answers a message with msgPlain with a text; one with msgTool with a tool_use of
// arizuko's send_reply, and the request that carries its tool_result with a text; one with
// msgHold with a text after holding the request for hold (or until the client goes away).
type upstream struct {
	fake *fakemodel.Server
	url  string
	hold time.Duration
	srvs []*http.Server

	mu       sync.Mutex
	first    time.Time            // the first /v1/messages since reset
	requests int                  // the /v1/messages since reset
	arrived  map[string]time.Time // msgHold requests: their message text -> first arrival
	toolOK   int                  // tool_results since reset that say the outbox took the reply
	toolBad  []string             // the other tool_results since reset
	answered map[string]bool      // the tool_use_ids of the tool results answered
	tools    []any                // the tools of the first request that offered arizuko's

	held, maxHeld atomic.Int64
}

func startUpstream(socket string, hold time.Duration) (*upstream, error) {
	u := &upstream{fake: fakemodel.Start(), hold: hold, arrived: map[string]time.Time{}, answered: map[string]bool{}}
	u.fake.Reply = u.reply
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/messages" {
			now := time.Now()
			u.mu.Lock()
			if u.first.IsZero() {
				u.first = now
			}
			u.requests++
			u.mu.Unlock()
		}
		u.fake.Config.Handler.ServeHTTP(w, r)
	})
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		u.close()
		return nil, err
	}
	u.url = "http://" + tcp.Addr().String()
	os.Remove(socket)
	unix, err := net.Listen("unix", socket)
	if err != nil {
		tcp.Close()
		u.close()
		return nil, err
	}
	if err := os.Chmod(socket, 0o666); err != nil {
		tcp.Close()
		unix.Close()
		u.close()
		return nil, err
	}
	for _, ln := range []net.Listener{tcp, unix} {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		u.srvs = append(u.srvs, srv)
		go srv.Serve(ln)
	}
	return u, nil
}

func (u *upstream) close() {
	for _, s := range u.srvs {
		s.Close()
	}
	u.fake.Close()
}

func (u *upstream) reply(r fakemodel.Request) fakemodel.Reply {
	u.noteTools(r)
	if res, ok := u.freshToolResult(r); ok {
		u.mu.Lock()
		if strings.Contains(res, "outbox_id") {
			u.toolOK++
		} else {
			u.toolBad = append(u.toolBad, res)
		}
		u.mu.Unlock()
		return fakemodel.Reply{Text: "replied"}
	}
	text := r.LastUserText()
	switch {
	case strings.Contains(text, msgTool):
		return fakemodel.Reply{ToolUse: &fakemodel.ToolUse{Name: "mcp__arizuko__send_reply",
			Input: map[string]any{"text": "hello from the bench"}}}
	case strings.Contains(text, msgHold):
		u.mu.Lock()
		if _, seen := u.arrived[text]; !seen {
			u.arrived[text] = time.Now()
		}
		u.mu.Unlock()
		n := u.held.Add(1)
		for m := u.maxHeld.Load(); n > m && !u.maxHeld.CompareAndSwap(m, n); m = u.maxHeld.Load() {
		}
		select {
		case <-r.Done:
		case <-time.After(u.hold):
		}
		u.held.Add(-1)
		return fakemodel.Reply{Text: "held"}
	default:
		return fakemodel.Reply{Text: "ok"}
	}
}

// freshToolResult is the first tool_result of the last message that no earlier request
// carried: the answer to the upstream's last tool_use. A resumed session's later requests
// carry the earlier tool results again, in the same user message as the new text (Claude
// Code does not keep the text that answered them), so a tool_result alone says nothing.
func (u *upstream) freshToolResult(r fakemodel.Request) (string, bool) {
	msgs, _ := r.Body["messages"].([]any)
	if len(msgs) == 0 {
		return "", false
	}
	m, _ := msgs[len(msgs)-1].(map[string]any)
	blocks, _ := m["content"].([]any)
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, x := range blocks {
		bm, _ := x.(map[string]any)
		id, _ := bm["tool_use_id"].(string)
		if bm["type"] != "tool_result" || id == "" || u.answered[id] {
			continue
		}
		u.answered[id] = true
		switch c := bm["content"].(type) {
		case string:
			return c, true
		case []any:
			var parts []string
			for _, y := range c {
				if ym, _ := y.(map[string]any); ym["type"] == "text" {
					t, _ := ym["text"].(string)
					parts = append(parts, t)
				}
			}
			return strings.Join(parts, "\n"), true
		}
		return "", true
	}
	return "", false
}

// noteTools keeps the tool list of the first request that offers arizuko's MCP tools.
func (u *upstream) noteTools(r fakemodel.Request) {
	tools, _ := r.Body["tools"].([]any)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tools != nil {
		return
	}
	for _, t := range tools {
		if m, _ := t.(map[string]any); m != nil {
			if name, _ := m["name"].(string); strings.HasPrefix(name, mcpToolPrefix) {
				u.tools = tools
				return
			}
		}
	}
}

// arizukoTools is the tool list noteTools kept, or nil.
func (u *upstream) arizukoTools() []any {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tools
}

// reset starts a new account: of one turn, or of one density level.
func (u *upstream) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.first, u.requests, u.toolOK, u.toolBad = time.Time{}, 0, 0, nil
	u.arrived = map[string]time.Time{}
	u.maxHeld.Store(u.held.Load())
}

// turnAccount is what the upstream saw since reset.
type turnAccount struct {
	first    time.Time
	requests int
	toolOK   int
	toolBad  []string
}

func (u *upstream) account() turnAccount {
	u.mu.Lock()
	defer u.mu.Unlock()
	return turnAccount{first: u.first, requests: u.requests, toolOK: u.toolOK, toolBad: u.toolBad}
}

// arrivedAt is when the msgHold request with this exact message text first arrived.
func (u *upstream) arrivedAt(text string) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.arrived[text]
	return t, ok
}

// errNoRequest: a turn ended without the upstream seeing a model request.
var errNoRequest = errors.New("the upstream saw no /v1/messages request")

// check is the turn's account, or an error when it made no model request or, for a tool
// turn, its send_reply did not reach an outbox.
func (a turnAccount) check(kind string) error {
	if a.first.IsZero() {
		return errNoRequest
	}
	if kind == msgTool && (a.toolOK != 1 || len(a.toolBad) > 0) {
		return errors.New("send_reply did not reach the outbox: tool results " + strings.Join(a.toolBad, " | "))
	}
	return nil
}
