package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/tracing"
)

// startTracing starts the exporter of the turns' traces that [tracing] or the
// OTEL_EXPORTER_OTLP_* variables name; nil when tracing is off.
func startTracing(ctx context.Context, cfg *config.Config, version string, log *slog.Logger) (*tracing.Tracer, error) {
	tc := tracing.Config{Endpoint: cfg.Tracing.Endpoint, Instance: cfg.Instance, Version: version,
		OnError: func(err error) { log.Warn("tracing: spans not sent", "err", err) }}
	t, err := tracing.New(ctx, tc)
	if err != nil || t == nil {
		return nil, err
	}
	where := tc.Endpoint
	if where == "" {
		where = "OTEL_EXPORTER_OTLP_*"
	}
	log.Info("tracing turns over OTLP/HTTP", "endpoint", where)
	return t, nil
}

// stopTracing sends the spans still in the batch, for at most 5 seconds.
func stopTracing(t *tracing.Tracer, log *slog.Logger) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("tracing: the last spans were not sent", "err", err)
	}
}
