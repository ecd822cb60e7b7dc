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
}

// LastUserText is the text of the last user message of a Messages request.
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
			var parts []string
			for _, b := range c {
				if bm, _ := b.(map[string]any); bm["type"] == "text" {
					s, _ := bm["text"].(string)
					parts = append(parts, s)
				}
			}
			return strings.Join(parts, "\n")
		}
	}
	return ""
}

// Reply is the fake's answer to one request: an error status with the API's error body,
// or a text.
type Reply struct {
	Status    int    // 0 or 200 for an answer
	ErrorType string // the API's error type for an error status
	Text      string
	// InputTokens and OutputTokens are the usage reported; 0 uses the lengths.
	InputTokens, OutputTokens int64
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
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw}
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
	msg := map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
		"stop_reason": nil, "stop_sequence": nil, "content": []any{},
		"usage": map[string]any{"input_tokens": rep.InputTokens, "output_tokens": 1,
			"cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
	}
	if stream, _ := req.Body["stream"].(bool); !stream {
		msg["content"] = []any{map[string]any{"type": "text", "text": rep.Text}}
		msg["stop_reason"] = "end_turn"
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
	event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}})
	for _, chunk := range chunks(rep.Text, 16) {
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": chunk}})
	}
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
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
