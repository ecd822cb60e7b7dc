package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sample is one line of the text exposition format: a name, optional labels, a value.
var sample = regexp.MustCompile(`^[a-z_]+(\{[a-z_]+="([^"\\]|\\.)*"(,[a-z_]+="([^"\\]|\\.)*")*\})? [0-9.e+-]+$`)

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	body := rec.Body.String()
	if strings.Contains(body, "# HELP arizukod") && regexp.MustCompile(`(?m)^# HELP \S+$`).MatchString(body) {
		t.Errorf("a metric without its documentation:\n%s", body)
	}
	for _, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		if !strings.HasPrefix(line, "# ") && !sample.MatchString(line) {
			t.Errorf("not a sample of the text format: %q", line)
		}
	}
	return body
}

func TestExposition(t *testing.T) {
	g := Gauges{Queued: 3, Running: 1, Prepared: 2, Warm: map[string]int64{"main": 200 << 20, "a\"b": 1}}
	m := New(func(context.Context) (Gauges, error) { return g, nil }, slog.New(slog.DiscardHandler))
	m.TurnEnded("ok", "", 42*time.Second)
	m.TurnEnded("ok", "", 2*time.Second)
	m.TurnEnded("fatal", "timeout", 20*time.Minute)
	m.TurnEnded("fatal", "killed", 0) // killed before it started: counted, no duration
	m.ModelUsage(Usage{Requests: 1, InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5})
	m.ModelUsage(Usage{Requests: 1, InputTokens: 1, CacheWriteTokens: 7})
	m.ModelCost("main/kid", "claude-sonnet-4-5", 300_000, true)
	m.ModelCost("main/kid", "claude-sonnet-4-5", 4, true)
	m.ModelCost("main", "claude-\"odd\"", 0, false)
	body := scrape(t, m)
	if n := strings.Count(body, "# TYPE arizukod_warm_agent_pss_bytes gauge"); n != 1 {
		t.Errorf("arizukod_warm_agent_pss_bytes has %d TYPE lines, want 1", n)
	}
	for _, want := range []string{
		"# TYPE arizukod_model_cost_microdollars_total counter",
		`arizukod_model_cost_microdollars_total{folder="main/kid",model="claude-sonnet-4-5"} 300004`,
		`arizukod_model_unpriced_responses_total{folder="main",model="claude-\"odd\""} 1`,
		"# HELP arizukod_turns_total Runs ended, by status",
		"# TYPE arizukod_turns_total counter",
		`arizukod_turns_total{status="ok",failure="none"} 2`,
		`arizukod_turns_total{status="fatal",failure="timeout"} 1`,
		`arizukod_turns_total{status="fatal",failure="killed"} 1`,
		"# TYPE arizukod_turn_duration_seconds histogram",
		`arizukod_turn_duration_seconds_bucket{status="ok",le="5"} 1`,
		`arizukod_turn_duration_seconds_bucket{status="ok",le="60"} 2`,
		`arizukod_turn_duration_seconds_bucket{status="ok",le="+Inf"} 2`,
		`arizukod_turn_duration_seconds_sum{status="ok"} 44`,
		`arizukod_turn_duration_seconds_count{status="fatal"} 1`,
		`arizukod_turn_duration_seconds_bucket{status="fatal",le="1200"} 1`,
		"arizukod_model_requests_total 2",
		`arizukod_model_tokens_total{kind="input"} 101`,
		`arizukod_model_tokens_total{kind="output"} 20`,
		`arizukod_model_tokens_total{kind="cache_read"} 5`,
		`arizukod_model_tokens_total{kind="cache_write"} 7`,
		"# TYPE arizukod_runs_queued gauge",
		"# HELP arizukod_warm_agents Warm agents",
		"arizukod_warm_agents 2",
		`arizukod_warm_agent_pss_bytes{folder="main"} 209715200`,
		`arizukod_warm_agent_pss_bytes{folder="a\"b"} 1`,
		"arizukod_runs_queued 3",
		"arizukod_runs_running 1",
		"arizukod_prepared_containers 2",
	} {
		if !strings.Contains(body, want+"\n") && !strings.HasPrefix(want, "# HELP") || !strings.Contains(body, want) {
			t.Errorf("missing %q in\n%s", want, body)
		}
	}
	g = Gauges{}
	if body := scrape(t, m); !strings.Contains(body, "arizukod_runs_running 0\n") {
		t.Errorf("gauges are read at each scrape:\n%s", body)
	}
}

// A scrape that cannot read the queue fails rather than reporting an empty one.
func TestGaugeError(t *testing.T) {
	m := New(func(context.Context) (Gauges, error) { return Gauges{}, errors.New("database is locked") }, slog.New(slog.DiscardHandler))
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "database is locked") {
		t.Errorf("got %d %q", rec.Code, rec.Body)
	}
}

func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := New(func(context.Context) (Gauges, error) { return Gauges{Running: 2}, nil }, slog.New(slog.DiscardHandler))
	addr, err := m.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "arizukod_runs_running 2\n") {
		t.Errorf("/metrics: %d %q", code, body)
	}
	// The listener serves the metrics alone, not the API.
	for _, p := range []string{"/health", "/v1/runs", "/"} {
		if code, _ := get(p); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, code)
		}
	}
	if _, err := m.Serve(ctx, addr.String()); err == nil || !strings.Contains(err.Error(), "metrics.listen") {
		t.Errorf("a second listen on the same address: %v", err)
	}
}
