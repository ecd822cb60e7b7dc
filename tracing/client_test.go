package tracing

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector answers each export with the next status of its script (200 once it runs
// out) and keeps what it decoded, as the official collector type.
type collector struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []*coltracepb.ExportTraceServiceRequest
	headers  []http.Header
}

func startCollector(t *testing.T, statuses ...int) *collector {
	c := &collector{statuses: statuses}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.headers = append(c.headers, r.Header.Clone())
		if len(c.statuses) > 0 {
			code := c.statuses[0]
			c.statuses = c.statuses[1:]
			if code != http.StatusOK {
				http.Error(w, "not now", code)
				return
			}
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Error(err)
				return
			}
			body = zr
		}
		data, _ := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			t.Errorf("not an ExportTraceServiceRequest: %v", err)
		}
		c.got = append(c.got, &req)
	}))
	t.Cleanup(c.Close)
	return c
}

func clearEnv(t *testing.T) {
	for _, k := range []string{"ENDPOINT", "HEADERS", "TIMEOUT", "COMPRESSION", "CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		t.Setenv("OTEL_EXPORTER_OTLP_"+k, "")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_"+k, "")
	}
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
}

// export sends one turn's trace through a Tracer made from the environment.
func export(t *testing.T, endpoint string) error {
	t.Helper()
	tr, err := New(context.Background(), Config{Endpoint: endpoint, Instance: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	now := time.Now()
	tt := tr.StartTurn(context.Background(), TurnStart{RunID: "r_1", Folder: "main"})
	tt.Phase(SpanPrepare, now, now, nil)
	tt.End(TurnEnd{Status: "ok"})
	return tr.Flush(context.Background())
}

// TestClientFromEnvironment: the endpoint, headers and compression of the standard
// variables reach a collector that decodes the official ExportTraceServiceRequest.
func TestClientFromEnvironment(t *testing.T) {
	clearEnv(t)
	c := startCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.URL+"/")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20s3cret, x-tenant = arizuko")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
	if err := export(t, ""); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.got) != 1 {
		t.Fatalf("%d exports", len(c.got))
	}
	h := c.headers[0]
	if h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Tenant") != "arizuko" || h.Get("Content-Type") != "application/x-protobuf" || h.Get("Content-Encoding") != "gzip" {
		t.Errorf("headers %v", h)
	}
	var names []string
	for _, rs := range c.got[0].ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				names = append(names, s.Name)
			}
		}
	}
	if strings.Join(names, ",") != "turn.prepare,turn" {
		t.Errorf("spans %v", names)
	}
}

// TestClientRetries: 503 and 429 are tried again; 400 is not, and is the error.
func TestClientRetries(t *testing.T) {
	clearEnv(t)
	c := startCollector(t, http.StatusServiceUnavailable, http.StatusTooManyRequests)
	if err := export(t, c.URL); err != nil {
		t.Fatalf("after two answers to retry: %v", err)
	}
	bad := startCollector(t, http.StatusBadRequest, http.StatusBadRequest)
	cl, err := newClient(bad.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.UploadTraces(context.Background(), nil); !errors.Is(err, errStatus) || !strings.Contains(err.Error(), "400") {
		t.Errorf("a 400: %v", err)
	}
	bad.mu.Lock()
	defer bad.mu.Unlock()
	if len(bad.headers) != 1 {
		t.Errorf("a 400 was sent %d times", len(bad.headers))
	}
}

// TestClientBadEnvironment: a variable set wrong is an error that names it.
func TestClientBadEnvironment(t *testing.T) {
	for k, v := range map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS":            "novalue",
		"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT":     "10s",
		"OTEL_EXPORTER_OTLP_COMPRESSION":        "zstd",
		"OTEL_EXPORTER_OTLP_CERTIFICATE":        "/nonexistent/ca.pem",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":    "collector:4318",
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/nonexistent/cert.pem",
	} {
		t.Run(k, func(t *testing.T) {
			clearEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
			t.Setenv(k, v)
			if _, err := New(context.Background(), Config{}); err == nil || !strings.Contains(err.Error(), strings.TrimSuffix(k, "_CERTIFICATE")) {
				t.Errorf("err = %v, want one naming %s", err, k)
			}
		})
	}
}
