// Package fakemodel is a scripted stand-in for the Anthropic Messages API, for tests: it
// answers POST /v1/messages streamed (SSE, event by event like the real API) or not,
// records every request, and answers what its Reply function says.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Request is one request the fake received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
	Raw          []byte
	// Done is closed when the client goes away, for replies that wait.
	Done <-chan struct{}
}

// LastUserText is the text of the last user message of a Messages request (its last
// text block).
func (r Request) LastUserText() string {
	msgs, _ := r.Body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] != "user" {
			continue
		}
		switch c := m["content"].(type) {
		case string:
			return c
		case []any:
			// The last text block: agents put reminders and context in blocks before it.
			for j := len(c) - 1; j >= 0; j-- {
				if bm, _ := c[j].(map[string]any); bm["type"] == "text" {
					s, _ := bm["text"].(string)
					return s
				}
			}
		}
	}
	return ""
}

// ToolNames are the names of the tools a Messages request offers the model.
func (r Request) ToolNames() []string {
	tools, _ := r.Body["tools"].([]any)
	var out []string
	for _, t := range tools {
		if m, _ := t.(map[string]any); m != nil {
			if n, _ := m["name"].(string); n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

// ToolResult is the text of the last tool_result block of the last message, and whether it
// has one: what the agent sends back after running the tool the fake asked for last.
func (r Request) ToolResult() (string, bool) {
	msgs, _ := r.Body["messages"].([]any)
	if len(msgs) == 0 {
		return "", false
	}
	m, _ := msgs[len(msgs)-1].(map[string]any)
	blocks, _ := m["content"].([]any)
	for i := len(blocks) - 1; i >= 0; i-- {
		bm, _ := blocks[i].(map[string]any)
		if bm["type"] != "tool_result" {
			continue
		}
		switch c := bm["content"].(type) {
		case string:
			return c, true
		case []any:
			var parts []string
			for _, x := range c {
				if xm, _ := x.(map[string]any); xm["type"] == "text" {
					s, _ := xm["text"].(string)
					parts = append(parts, s)
				}
			}
			return strings.Join(parts, "\n"), true
		}
		return "", true
	}
	return "", false
}

// ToolUse asks the agent to call a tool.
type ToolUse struct {
	Name  string
	Input map[string]any
}

// Reply is the fake's answer to one request: an error status with the API's error body,
// a text, or a tool call.
type Reply struct {
	Status    int    // 0 or 200 for an answer
	ErrorType string // the API's error type for an error status
	Text      string
	ToolUse   *ToolUse
	// InputTokens and OutputTokens are the usage reported; 0 uses the lengths.
	InputTokens, OutputTokens int64
	// CacheReadTokens and CacheWriteTokens are reported as the API's
	// cache_read_input_tokens and cache_creation_input_tokens, and CacheWrite1hTokens of
	// those as cache_creation.ephemeral_1h_input_tokens (the rest as ephemeral_5m).
	CacheReadTokens, CacheWriteTokens, CacheWrite1hTokens int64
}

// Server is a running fake.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []Request
	// Reply decides each answer; nil answers "echo: <last user text>".
	Reply func(Request) Reply
}

// Start starts a fake on a loopback port; Close stops it.
func Start() *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Requests are the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw, Done: r.Context().Done()}
	json.Unmarshal(raw, &req.Body)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	reply := s.Reply
	s.mu.Unlock()
	if r.URL.Path == "/v1/messages/count_tokens" {
		writeJSON(w, 200, map[string]any{"input_tokens": len(raw) / 4})
		return
	}
	if r.URL.Path != "/v1/messages" {
		writeJSON(w, 404, apiError("not_found_error", "no such path "+r.URL.Path))
		return
	}
	rep := Reply{Text: "echo: " + req.LastUserText()}
	if reply != nil {
		rep = reply(req)
	}
	if rep.Status != 0 && rep.Status != 200 {
		writeJSON(w, rep.Status, apiError(rep.ErrorType, fmt.Sprintf("scripted %d", rep.Status)))
		return
	}
	if rep.InputTokens == 0 {
		rep.InputTokens = int64(len(raw)/4 + 1)
	}
	if rep.OutputTokens == 0 {
		rep.OutputTokens = int64(len(rep.Text)/4 + 1)
	}
	model, _ := req.Body["model"].(string)
	stop := "end_turn"
	content := []any{map[string]any{"type": "text", "text": rep.Text}}
	if rep.ToolUse != nil {
		stop = "tool_use"
		content = []any{map[string]any{"type": "tool_use", "id": "toolu_fake" + fmt.Sprint(len(s.Requests())),
			"name": rep.ToolUse.Name, "input": rep.ToolUse.Input}}
	}
	msg := map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
		"stop_reason": nil, "stop_sequence": nil, "content": []any{},
		"usage": map[string]any{"input_tokens": rep.InputTokens, "output_tokens": 1,
			"cache_read_input_tokens": rep.CacheReadTokens, "cache_creation_input_tokens": rep.CacheWriteTokens,
			"cache_creation": map[string]any{"ephemeral_5m_input_tokens": rep.CacheWriteTokens - rep.CacheWrite1hTokens,
				"ephemeral_1h_input_tokens": rep.CacheWrite1hTokens}},
	}
	if stream, _ := req.Body["stream"].(bool); !stream {
		msg["content"] = content
		msg["stop_reason"] = stop
		msg["usage"].(map[string]any)["output_tokens"] = rep.OutputTokens
		writeJSON(w, 200, msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	event := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if fl != nil {
			fl.Flush()
		}
	}
	event("message_start", map[string]any{"type": "message_start", "message": msg})
	if rep.ToolUse != nil {
		block := content[0].(map[string]any)
		input, _ := json.Marshal(rep.ToolUse.Input)
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": rep.ToolUse.Name, "input": map[string]any{}}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for _, chunk := range chunks(rep.Text, 16) {
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": chunk}})
		}
	}
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": rep.OutputTokens}})
	event("message_stop", map[string]any{"type": "message_stop"})
}

func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

func apiError(typ, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
