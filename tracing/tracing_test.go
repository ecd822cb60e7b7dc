package tracing

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name     string
		endpoint string
		env      map[string]string
		want     bool
	}{
		{"off by default", "", nil, false},
		{"the file's endpoint", "http://127.0.0.1:4318", nil, true},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{"OTEL_SDK_DISABLED", "http://127.0.0.1:4318", map[string]string{"OTEL_SDK_DISABLED": "true"}, false},
		{"OTEL_TRACES_EXPORTER=none", "http://127.0.0.1:4318", map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"} {
				t.Setenv(k, tc.env[k])
			}
			if got := (Config{Endpoint: tc.endpoint}).Enabled(); got != tc.want {
				t.Errorf("Enabled = %v, want %v", got, tc.want)
			}
			tr, err := New(context.Background(), Config{Endpoint: tc.endpoint})
			if err != nil || (tr != nil) != tc.want {
				t.Errorf("New = %v, %v; want a tracer: %v", tr, err, tc.want)
			}
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":                  "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":                 "http://127.0.0.1:4318/v1/traces",
		"https://otel.example.com/otlp/v1/spans": "https://otel.example.com/otlp/v1/spans",
	} {
		if got := tracesURL(in); got != want {
			t.Errorf("tracesURL(%q) = %q, want %q", in, got, want)
		}
	}
	if err := CheckEndpoint("grpc://x:4317"); !errors.Is(err, ErrEndpoint) {
		t.Errorf("CheckEndpoint(grpc://) = %v", err)
	}
}

// TestNilIsOff: with tracing off the turn's code calls the same methods on nil.
func TestNilIsOff(t *testing.T) {
	var tr *Tracer
	tt := tr.StartTurn(context.Background(), TurnStart{RunID: "r"})
	if tt != nil {
		t.Fatal("a nil Tracer started a trace")
	}
	now := time.Now()
	tt.Phase(SpanPrepare, now, now, nil)
	tt.Sidecars(1, now, now, nil)
	tt.Model(ModelRequest{})
	tt.ToolCall("send_reply", "ok", now, now)
	tt.Egress("example.com:443", now, now, 1, 2, false)
	tt.End(TurnEnd{Status: "ok"})
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkTurnTrace is what tracing costs one turn in the daemon: its root, its six
// phases, a model request, a tool call and an egress connection, batched and exported to
// a collector over loopback HTTP (Flush every 64 turns, as the batch would).
func BenchmarkTurnTrace(b *testing.B) {
	var bytes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		bytes.Add(n)
	}))
	defer srv.Close()
	tr, err := New(context.Background(), Config{Endpoint: srv.URL, Instance: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now := time.Now()
		tt := tr.StartTurn(ctx, TurnStart{RunID: "r_0123456789abcdef", Folder: "main/research", Queued: now.Add(-time.Millisecond), Picked: now})
		for _, p := range []string{SpanPrepare, SpanCreate, SpanStart, SpanRun, SpanFinish} {
			tt.Phase(p, now, now, nil)
		}
		tt.Model(ModelRequest{Path: "/v1/messages", Model: "claude-test", Status: 200, Start: now, FirstByte: now, End: now, InputTokens: 21, OutputTokens: 8})
		tt.ToolCall("send_reply", "ok", now, now)
		tt.Egress("example.com:443", now, now, 100, 2000, false)
		tt.End(TurnEnd{Status: "ok", Container: "arizuko-main-1"})
		if i%64 == 63 {
			tr.Flush(ctx)
		}
	}
	tr.Flush(ctx)
	b.ReportMetric(float64(bytes.Load())/float64(b.N), "B-exported/turn")
}
