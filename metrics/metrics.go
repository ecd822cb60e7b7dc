// Package metrics is how arizukod is watched: the Prometheus text exposition of its turns
// (by status and failure class, with their durations), its queue (queued and running runs)
// and the model traffic of its turns (tokens by kind, requests, cost by group and model),
// served at GET /metrics on the API socket and, when metrics.listen is set, on a loopback
// TCP listener of its own.
//
// It owns the metric names and that listener. It counts what the daemon reports to it and
// reads the queue's gauges through the function it is given at each scrape; it must not
// touch the store, an engine or a file itself.
package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
)

// Gauges are the values read at each scrape.
type Gauges struct {
	Queued        int // runs waiting to start
	Running       int // turns running now
	OutboxBacklog int // outbox rows no consumer has acknowledged yet
	Prepared      int // containers made ahead for a folder's next turn, waiting (warm agents too)
	// Warm are the warm agents (started, waiting for their turn) by folder, with the PSS
	// of their processes in bytes (0 when it cannot be read).
	Warm map[string]int64
}

// durationBuckets are the upper bounds (seconds) of the turn duration histogram: from a
// quick answer to the longest run_timeout that is sensible.
var durationBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 3600}

// help documents each metric in its # HELP line.
var help = map[string]string{
	"arizukod_warm_agents":                    "Warm agents: containers started with their agent waiting for the folder's next turn.",
	"arizukod_warm_agent_pss_bytes":           "Proportional set size of a warm agent's processes, by folder.",
	"arizukod_turns_total":                    "Runs ended, by status (ok, error, fatal) and failure class (none, timeout, oom, misconfig, no-output, bad-output, killed, engine, no-input, lost).",
	"arizukod_turn_duration_seconds":          "How long ended runs ran, from start to end, by status.",
	"arizukod_runs_queued":                    "Runs waiting to start.",
	"arizukod_runs_running":                   "Turns running now.",
	"arizukod_outbox_backlog":                 "Outbox rows waiting for a gateway or webhook to acknowledge them (parked rows not counted).",
	"arizukod_prepared_containers":            "Containers made ahead for a folder's next turn: created and initialized, never started yet, or warm agents (arizukod_warm_agents of them).",
	"arizukod_model_requests_total":           "Requests the turns' model gateways forwarded.",
	"arizukod_model_tokens_total":             "Model tokens the turns used, by kind (input, output, cache_read, cache_write).",
	"arizukod_model_cost_microdollars_total":  "What the turns' model usage cost in millionths of a US dollar, at the daemon's prices, by group folder and model (a model with no price adds nothing here).",
	"arizukod_model_unpriced_responses_total": "Model responses whose model has no price ([prices] in arizukod.toml), by group folder and model: their cost is unknown.",
}

// Metrics counts one daemon's turns and model traffic. Its zero value is not usable: call New.
type Metrics struct {
	set    *vm.Set
	gauges func(ctx context.Context) (Gauges, error)
	log    *slog.Logger

	requests                             *vm.Counter
	input, output, cacheRead, cacheWrite *vm.Counter
}

// New returns the metrics of one daemon; gauges is asked at each scrape. It turns on the
// library's # TYPE and # HELP lines, a setting of the whole process.
func New(gauges func(ctx context.Context) (Gauges, error), log *slog.Logger) *Metrics {
	vm.ExposeMetadata(true)
	s := vm.NewSet()
	tokens := func(kind string) *vm.Counter {
		return s.NewCounter(`arizukod_model_tokens_total{kind="` + kind + `"}`)
	}
	return &Metrics{
		set: s, gauges: gauges, log: log,
		requests:  s.NewCounter("arizukod_model_requests_total"),
		input:     tokens("input"),
		output:    tokens("output"),
		cacheRead: tokens("cache_read"), cacheWrite: tokens("cache_write"),
	}
}

// TurnEnded counts one finished run by its status (ok, error, fatal) and failure class
// ("" for none, counted as "none"), and its duration when it ran (ran > 0).
func (m *Metrics) TurnEnded(status, failure string, ran time.Duration) {
	if failure == "" {
		failure = "none"
	}
	m.set.GetOrCreateCounter(fmt.Sprintf(`arizukod_turns_total{status=%q,failure=%q}`, status, failure)).Inc()
	if ran > 0 {
		m.set.GetOrCreatePrometheusHistogramExt(fmt.Sprintf(`arizukod_turn_duration_seconds{status=%q}`, status), durationBuckets).Update(ran.Seconds())
	}
}

// Usage is what one model response used.
type Usage struct {
	Requests, InputTokens, OutputTokens, CacheReadTokens, CacheWriteTokens int64
}

// ModelUsage counts what one response of the model used.
func (m *Metrics) ModelUsage(u Usage) {
	add := func(c *vm.Counter, n int64) {
		if n > 0 {
			c.Add(int(n))
		}
	}
	add(m.requests, u.Requests)
	add(m.input, u.InputTokens)
	add(m.output, u.OutputTokens)
	add(m.cacheRead, u.CacheReadTokens)
	add(m.cacheWrite, u.CacheWriteTokens)
}

// ModelCost counts what one model response of a turn of folder cost, in micro-dollars,
// or that its model has no price (priced false). Per folder and model: a daemon has few
// of each, and a group's cost today or this month is the increase of its series.
func (m *Metrics) ModelCost(folder, model string, micros int64, priced bool) {
	labels := `{folder="` + escapeLabel(folder) + `",model="` + escapeLabel(model) + `"}`
	if !priced {
		m.set.GetOrCreateCounter("arizukod_model_unpriced_responses_total" + labels).Inc()
		return
	}
	c := m.set.GetOrCreateCounter("arizukod_model_cost_microdollars_total" + labels)
	if micros > 0 {
		c.Add(int(micros))
	}
}

// escapeLabel escapes a label value of the text exposition format.
func escapeLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

// ServeHTTP writes every metric in the Prometheus text exposition format (version 0.0.4).
// A failure to read the gauges is a 500: a scrape must not pass an empty queue off as true.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g, err := m.gauges(r.Context())
	if err != nil {
		m.log.Error("metrics: read the queue", "err", err)
		http.Error(w, "metrics: read the queue: "+err.Error(), http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	m.set.WritePrometheus(&b)
	vm.WriteGaugeUint64(&b, "arizukod_runs_queued", uint64(max(g.Queued, 0)))
	vm.WriteGaugeUint64(&b, "arizukod_runs_running", uint64(max(g.Running, 0)))
	vm.WriteGaugeUint64(&b, "arizukod_outbox_backlog", uint64(max(g.OutboxBacklog, 0)))
	vm.WriteGaugeUint64(&b, "arizukod_prepared_containers", uint64(max(g.Prepared, 0)))
	vm.WriteGaugeUint64(&b, "arizukod_warm_agents", uint64(len(g.Warm)))
	folders := make([]string, 0, len(g.Warm))
	for f := range g.Warm {
		folders = append(folders, f)
	}
	slices.Sort(folders)
	if len(folders) > 0 {
		// One family: its HELP and TYPE once, then a sample per folder.
		const name = "arizukod_warm_agent_pss_bytes"
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help[name], name)
		for _, f := range folders {
			fmt.Fprintf(&b, "%s{folder=\"%s\"} %d\n", name, escapeLabel(f), max(g.Warm[f], 0))
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(withHelp(b.Bytes()))
}

// withHelp completes the library's empty # HELP lines with the metrics' documentation.
func withHelp(text []byte) []byte {
	lines := bytes.SplitAfter(text, []byte("\n"))
	for i, l := range lines {
		name, ok := bytes.CutPrefix(bytes.TrimSuffix(l, []byte("\n")), []byte("# HELP "))
		if h := help[string(name)]; ok && h != "" {
			lines[i] = []byte("# HELP " + string(name) + " " + h + "\n")
		}
	}
	return bytes.Join(lines, nil)
}

// Serve serves /metrics alone on the TCP address addr (config.Config.Metrics.Listen, a
// loopback address) until ctx ends, and returns the address it listens on. Only the
// listen is reported as an error: once it serves, a failure is logged.
func (m *Metrics) Serve(ctx context.Context, addr string) (net.Addr, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("metrics listener stopped", "addr", addr, "err", err)
		}
	}()
	m.log.Info("metrics listening", "addr", l.Addr().String())
	return l.Addr(), nil
}
