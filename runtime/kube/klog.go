package kube

import (
	"context"
	"log/slog"
	"sync"

	"k8s.io/klog/v2"
)

var klogOnce sync.Once

// quietClientGo sends what client-go logs (klog: a stream that broke as its turn was
// detached or killed, a watch cancelled) to log at debug level, with component=client-go:
// the engine returns every error that matters to its caller.
func quietClientGo(log *slog.Logger) {
	klogOnce.Do(func() {
		klog.SetSlogLogger(slog.New(debugHandler{log.Handler()}).With("component", "client-go"))
	})
}

// debugHandler hands every record on at debug level.
type debugHandler struct{ h slog.Handler }

func (d debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

// Handle drops r unless debug is enabled: logr hands errors on without asking Enabled.
func (d debugHandler) Handle(ctx context.Context, r slog.Record) error {
	if !d.h.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return debugHandler{d.h.WithAttrs(attrs)}
}

func (d debugHandler) WithGroup(name string) slog.Handler { return debugHandler{d.h.WithGroup(name)} }
