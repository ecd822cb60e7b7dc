package daemon

import (
	"context"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/runtime/runner"

	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/metrics"
	"github.com/arizuko/arizukod/store"
)

// newMetrics returns the daemon's metrics, whose gauges are the store's counts of runs
// and of the outbox rows not yet delivered.
func newMetrics(d *Daemon) *metrics.Metrics {
	return metrics.New(func(ctx context.Context) (metrics.Gauges, error) {
		c, err := d.store.CountRuns(ctx)
		if err != nil {
			return metrics.Gauges{}, err
		}
		backlog, err := d.store.OutboxBacklog(ctx)
		warm := map[string]int64{}
		for _, w := range d.runner.WarmAgents(ctx) {
			warm[string(w.Folder)] = w.PSSBytes
		}
		return metrics.Gauges{Queued: c.Queued, Running: c.Running, OutboxBacklog: backlog, Prepared: len(d.runner.Prepared()), Warm: warm}, err
	}, d.log)
}

// meteredStore is the queue's store, counting each run's end in the metrics as the store
// records it: every end of a run passes FinishRun, whichever way it ended.
type meteredStore struct {
	*store.Store
	metrics *metrics.Metrics
}

func (s meteredStore) FinishRun(ctx context.Context, id string, o store.Outcome) (*store.Run, error) {
	r, err := s.Store.FinishRun(ctx, id, o)
	if err == nil {
		var ran time.Duration
		if r.StartedAt > 0 && r.EndedAt >= r.StartedAt {
			ran = time.Duration(r.EndedAt-r.StartedAt) * time.Millisecond
		}
		s.metrics.TurnEnded(string(r.Status), string(r.Failure), ran)
	}
	return r, err
}

// usageMetrics is what one model response used, for the metrics.
func usageMetrics(u gateway.Usage) metrics.Usage {
	return metrics.Usage{Requests: u.Requests, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens}
}

// warmAgents is GET /v1/warm: the runner's warm agents with their memory.
func (d *Daemon) warmAgents(ctx context.Context) apiwire.WarmAgents {
	cfg := d.sys.Load().Config
	out := apiwire.WarmAgents{Max: cfg.WarmAgents, MinAvailable: cfg.WarmMinAvailable}
	if avail, err := runner.MemAvailable(); err == nil {
		out.Available = avail
	}
	for _, w := range d.runner.WarmAgents(ctx) {
		out.Agents = append(out.Agents, apiwire.WarmAgent{Folder: string(w.Folder), Container: w.Container,
			Ready: w.Made.UTC().Format(time.RFC3339), PSSBytes: w.PSSBytes})
	}
	return out
}
