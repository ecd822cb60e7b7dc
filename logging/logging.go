// Package logging builds the daemon's *slog.Logger: native journald entries
// when journald is reachable, slog's text format on stderr otherwise.
//
// It owns the mapping of a slog record to a journal entry: MESSAGE, PRIORITY
// from the level, SYSLOG_IDENTIFIER, CODE_* with AddSource, and one field per
// attribute, named by FieldName. Every value goes through its LogValue first,
// so a type that redacts itself (mountsec.Secrets) is never formatted any
// other way; Redacting runs every message and value through the caller's
// filter first. It must not decide what is logged, and it talks to nothing but
// the journal socket and the stderr writer it is given.
package logging

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// The fields of a turn's journal entries: `journalctl -u arizukod
// ARIZUKO_FOLDER=main` shows one group's turns. They are valid journal field
// names, so they pass through FieldName unchanged.
const (
	FieldRunID      = "ARIZUKO_RUN_ID"
	FieldFolder     = "ARIZUKO_FOLDER"
	FieldContainer  = "ARIZUKO_CONTAINER"
	FieldStatus     = "ARIZUKO_STATUS"
	FieldExitCode   = "ARIZUKO_EXIT_CODE"
	FieldDurationMS = "ARIZUKO_DURATION_MS"
	FieldState      = "ARIZUKO_STATE"
	FieldFailure    = "ARIZUKO_FAILURE"
	FieldError      = "ARIZUKO_ERROR"
	FieldStream     = "ARIZUKO_STREAM"
	FieldTaskID     = "ARIZUKO_TASK_ID"
	// A turn's model usage, from its model gateway.
	FieldModel            = "ARIZUKO_MODEL"
	FieldModelRequests    = "ARIZUKO_MODEL_REQUESTS"
	FieldModelRefused     = "ARIZUKO_MODEL_REFUSED"
	FieldInputTokens      = "ARIZUKO_INPUT_TOKENS"
	FieldOutputTokens     = "ARIZUKO_OUTPUT_TOKENS"
	FieldCacheReadTokens  = "ARIZUKO_CACHE_READ_TOKENS"
	FieldCacheWriteTokens = "ARIZUKO_CACHE_WRITE_TOKENS"
)

// DefaultIdentifier is the SYSLOG_IDENTIFIER when Options leave it empty.
const DefaultIdentifier = "arizukod"

// maxFieldName is the longest field name journald accepts.
const maxFieldName = 64

// Options configure New. The zero value logs at Info as "arizukod".
type Options struct {
	Level       slog.Leveler // the minimum level; nil means slog.LevelInfo
	Identifier  string       // SYSLOG_IDENTIFIER; "" means DefaultIdentifier
	Stderr      io.Writer    // where text goes without journald; nil means os.Stderr
	ForceStderr bool         // write text to Stderr even when journald is reachable
	// Terminal: Stderr is a terminal (a daemon in the foreground): every record goes there
	// as a readable line (time, level, message, key=value), beside journald when it answers.
	Terminal  bool
	AddSource bool // CODE_FILE, CODE_LINE, CODE_FUNC (source= in text)
}

// New returns a logger writing to journald when its socket answers and
// ForceStderr is false, else to Stderr. Should a journal write fail later
// (journald restarting), that record goes to Stderr. With Terminal, every
// record also goes to Stderr as a readable line, beside the journal.
func New(opts Options) *slog.Logger {
	return slog.New(newHandler(opts, !opts.ForceStderr && journal.Enabled(), journal.Send))
}

// Journald reports whether New would log to journald now.
func Journald() bool { return journal.Enabled() }

func newHandler(opts Options, journald bool, send sendFunc) slog.Handler {
	if !journald {
		return stderrHandler(opts)
	}
	j := newJournalHandler(opts, send)
	if !opts.Terminal {
		return j
	}
	j.fallback = slog.DiscardHandler // the terminal has every record already
	return slog.NewMultiHandler(j, stderrHandler(opts))
}

// stderrHandler writes to Stderr: readable lines on a terminal, slog's text format
// otherwise.
func stderrHandler(opts Options) slog.Handler {
	w := opts.Stderr
	if w == nil {
		w = os.Stderr
	}
	if opts.Terminal {
		return newLineHandler(w, opts.Level)
	}
	return slog.NewTextHandler(w, &slog.HandlerOptions{Level: opts.Level, AddSource: opts.AddSource})
}

// sendFunc is journal.Send; tests give a fake.
type sendFunc func(message string, priority journal.Priority, vars map[string]string) error

// journalHandler sends each record as one journal entry. It is immutable:
// WithAttrs and WithGroup return copies.
type journalHandler struct {
	send     sendFunc
	level    slog.Leveler
	ident    string
	source   bool
	prefix   string            // the open groups, each followed by '_'
	fields   map[string]string // from WithAttrs, named and formatted
	fallback slog.Handler      // the same logger on stderr, for failed sends
}

func newJournalHandler(opts Options, send sendFunc) *journalHandler {
	h := &journalHandler{
		send:     send,
		level:    opts.Level,
		ident:    opts.Identifier,
		source:   opts.AddSource,
		fields:   map[string]string{},
		fallback: stderrHandler(opts),
	}
	if h.level == nil {
		h.level = slog.LevelInfo
	}
	if h.ident == "" {
		h.ident = DefaultIdentifier
	}
	return h
}

func (h *journalHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	vars := make(map[string]string, len(h.fields)+r.NumAttrs()+4)
	maps.Copy(vars, h.fields)
	r.Attrs(func(a slog.Attr) bool {
		addAttr(vars, h.prefix, a)
		return true
	})
	vars["SYSLOG_IDENTIFIER"] = h.ident
	if h.source {
		if s := r.Source(); s != nil {
			vars["CODE_FILE"] = s.File
			vars["CODE_LINE"] = strconv.Itoa(s.Line)
			vars["CODE_FUNC"] = s.Function
		}
	}
	if err := h.send(r.Message, priority(r.Level), vars); err != nil {
		if ferr := h.fallback.Handle(ctx, r); ferr != nil {
			return fmt.Errorf("logging: journal: %w; stderr: %w", err, ferr)
		}
	}
	return nil
}

func (h *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	c := *h
	c.fields = maps.Clone(h.fields)
	for _, a := range as {
		addAttr(c.fields, h.prefix, a)
	}
	c.fallback = h.fallback.WithAttrs(as)
	return &c
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "_"
	c.fallback = h.fallback.WithGroup(name)
	return &c
}

// addAttr resolves a and stores it, a group as one field per member.
func addAttr(vars map[string]string, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "_"
		}
		for _, m := range a.Value.Group() {
			addAttr(vars, prefix, m)
		}
		return
	}
	vars[FieldName(prefix+a.Key)] = fieldValue(a.Value)
}

// handlerFields are the fields the handler writes itself; an attribute of
// the same name is renamed rather than allowed to replace them.
var handlerFields = map[string]bool{
	"MESSAGE": true, "PRIORITY": true, "SYSLOG_IDENTIFIER": true,
	"CODE_FILE": true, "CODE_LINE": true, "CODE_FUNC": true,
}

// FieldName turns an attribute key (groups joined with '_') into a journal
// field name: ASCII letters uppercased, every other character but digits and
// '_' replaced by '_'. A name journald would refuse or the handler writes
// itself (empty, starting with '_' or a digit, MESSAGE, PRIORITY,
// SYSLOG_IDENTIFIER, CODE_*) gets the prefix "X_". At most 64 bytes.
// A valid name such as ARIZUKO_RUN_ID passes through unchanged.
func FieldName(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteByte(byte(r - 'a' + 'A'))
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteByte(byte(r))
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if name == "" || name[0] == '_' || name[0] >= '0' && name[0] <= '9' || handlerFields[name] {
		name = "X_" + name
	}
	if len(name) > maxFieldName {
		name = name[:maxFieldName]
	}
	return name
}

// fieldValue formats a resolved value: strings as they are, times in
// RFC 3339, numbers, booleans and durations as slog prints them.
func fieldValue(v slog.Value) string {
	switch v.Kind() {
	case slog.KindTime:
		return v.Time().Format(time.RFC3339Nano)
	case slog.KindAny:
		return anyValue(v.Any())
	}
	return v.String()
}

// anyValue formats errors and Stringers by their methods, byte slices as
// text, anything else as JSON when it can be. A method that panics (a nil
// pointer receiver) gives "!PANIC: ..." as slog's own handlers do.
func anyValue(x any) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprintf("!PANIC: %v", r)
		}
	}()
	switch x := x.(type) {
	case error:
		return x.Error()
	case fmt.Stringer:
		return x.String()
	case []byte:
		return string(x)
	}
	if b, err := json.Marshal(x); err == nil {
		return string(b)
	}
	return fmt.Sprintf("%+v", x)
}

// priority is the journal priority of a level: below Info debug (7), below
// Warn info (6), below Error warning (4), else err (3).
func priority(l slog.Level) journal.Priority {
	switch {
	case l < slog.LevelInfo:
		return journal.PriDebug
	case l < slog.LevelWarn:
		return journal.PriInfo
	case l < slog.LevelError:
		return journal.PriWarning
	}
	return journal.PriErr
}
