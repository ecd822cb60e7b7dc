package logging

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// lineHandler writes a record as one line for a person at a terminal: the local time, the
// level and the message, then key=value for each attribute, a turn's ARIZUKO_* fields
// by their short lowercase names (ARIZUKO_FOLDER is folder=). A value with a space, a
// quote, an '=' or a control character is quoted.
type lineHandler struct {
	w      io.Writer
	mu     *sync.Mutex
	level  slog.Leveler
	prefix string // the open groups, each followed by '.'
	attrs  string // from WithAttrs, formatted, each with its leading space
}

func newLineHandler(w io.Writer, level slog.Leveler) *lineHandler {
	if level == nil {
		level = slog.LevelInfo
	}
	return &lineHandler{w: w, mu: &sync.Mutex{}, level: level}
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	b.WriteString(t.Format("15:04:05"))
	b.WriteByte(' ')
	b.WriteString(r.Level.String())
	b.WriteByte(' ')
	b.WriteString(lineValue(r.Message, false))
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		writeLineAttr(&b, h.prefix, a)
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	var b strings.Builder
	for _, a := range as {
		writeLineAttr(&b, h.prefix, a)
	}
	c.attrs += b.String()
	return &c
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix += name + "."
	return &c
}

func writeLineAttr(b *strings.Builder, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, m := range a.Value.Group() {
			writeLineAttr(b, prefix, m)
		}
		return
	}
	key := a.Key
	if short, ok := strings.CutPrefix(key, "ARIZUKO_"); ok && short != "" {
		key = strings.ToLower(short)
	}
	b.WriteByte(' ')
	b.WriteString(lineValue(prefix+key, true))
	b.WriteByte('=')
	b.WriteString(lineValue(a.Value.String(), true))
}

// lineValue quotes s when it would not read as one token (quoteSpace), or when it holds
// a control character, which never reaches the terminal raw.
func lineValue(s string, quoteSpace bool) string {
	if s == "" && quoteSpace || strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || quoteSpace && (unicode.IsSpace(r) || slices.Contains([]rune{'"', '='}, r))
	}) {
		return strconv.Quote(s)
	}
	return s
}
