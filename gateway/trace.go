package gateway

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// RequestTrace is one request of the agent through the model gateway, as
// ModelConfig.OnRequest hears it.
type RequestTrace struct {
	Path string
	// Status is the HTTP status the agent got; 0 when it got none (it went away).
	Status int
	// Start is when the request came, FirstByte when its answer's status went back (zero
	// when none did), End when the answer was over.
	Start, FirstByte, End time.Time
	// Usage is what this request used and how it was refused or failed.
	Usage Usage
}

type traceKey struct{}

// requestTrace gathers a RequestTrace while its request is served.
type requestTrace struct {
	mu sync.Mutex
	t  RequestTrace
}

// traced serves r and tells OnRequest about it.
func (m *Model) traced(w http.ResponseWriter, r *http.Request) {
	rt := &requestTrace{t: RequestTrace{Path: r.URL.Path, Start: time.Now()}}
	m.serve(&traceWriter{ResponseWriter: w, rt: rt}, r.WithContext(context.WithValue(r.Context(), traceKey{}, rt)))
	rt.mu.Lock()
	rt.t.End = time.Now()
	t := rt.t
	rt.mu.Unlock()
	m.cfg.OnRequest(t)
}

// recordFor records u as the turn's usage, and as the traced request's that ctx carries.
func (m *Model) recordFor(ctx context.Context, u Usage) {
	m.record(u)
	if rt, ok := ctx.Value(traceKey{}).(*requestTrace); ok {
		rt.mu.Lock()
		rt.t.Usage.add(u)
		rt.mu.Unlock()
	}
}

// traceWriter notes the status and the time of the answer's first byte.
type traceWriter struct {
	http.ResponseWriter
	rt *requestTrace
}

func (w *traceWriter) WriteHeader(code int) {
	w.rt.mu.Lock()
	if w.rt.t.Status == 0 && code >= http.StatusOK {
		w.rt.t.Status, w.rt.t.FirstByte = code, time.Now()
	}
	w.rt.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
}

func (w *traceWriter) Write(p []byte) (int, error) {
	w.rt.mu.Lock()
	if w.rt.t.Status == 0 {
		w.rt.t.Status, w.rt.t.FirstByte = http.StatusOK, time.Now()
	}
	w.rt.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController flush the streamed answers through it.
func (w *traceWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
