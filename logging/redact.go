package logging

import (
	"context"
	"fmt"
	"log/slog"
)

// Redacting wraps h so that every record's message and attribute values, in groups too,
// pass through redact before h sees them: a secret that reaches a log call (an agent's
// stderr line, an error that quotes a request) never reaches the journal. Values that are
// not strings are formatted with fmt first and replaced only when redact changes them.
func Redacting(h slog.Handler, redact func(string) string) slog.Handler {
	return &redacting{h: h, redact: redact}
}

type redacting struct {
	h      slog.Handler
	redact func(string) string
}

func (r *redacting) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r *redacting) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, r.redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.attr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r *redacting) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = r.attr(a)
	}
	return &redacting{h: r.h.WithAttrs(clean), redact: r.redact}
}

func (r *redacting) WithGroup(name string) slog.Handler {
	return &redacting{h: r.h.WithGroup(name), redact: r.redact}
}

func (r *redacting) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.redact(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]any, len(group))
		for i, g := range group {
			clean[i] = r.attr(g)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		s := fmt.Sprint(v.Any())
		if c := r.redact(s); c != s {
			return slog.String(a.Key, c)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
