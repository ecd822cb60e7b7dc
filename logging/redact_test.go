package logging

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/mountsec"
)

// TestRedacting: a secret value in the message, a string attribute, an error, a group,
// a logger's With attributes or a Stringer reaches the journal only as [REDACTED:NAME].
func TestRedacting(t *testing.T) {
	const key = "sk-live-0123456789"
	secrets := mountsec.Secrets{"API_KEY": key}
	type stringer struct{ fmtStringer }
	cases := []struct {
		name string
		log  func(*slog.Logger)
	}{
		{"message", func(l *slog.Logger) { l.Info("agent said " + key) }},
		{"string", func(l *slog.Logger) { l.Info("m", "line", "x"+key+"y") }},
		{"error", func(l *slog.Logger) { l.Warn("m", "err", errors.New("upstream said "+key)) }},
		{"group", func(l *slog.Logger) { l.Info("m", slog.Group("g", "inner", key)) }},
		{"with", func(l *slog.Logger) { l.With("ctx", key).Info("m") }},
		{"with-group", func(l *slog.Logger) { l.WithGroup("g").Info("m", "a", key) }},
		{"stringer", func(l *slog.Logger) { l.Info("m", "v", stringer{fmtStringer(key)}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeJournal{}
			l := slog.New(Redacting(newJournalHandler(Options{}, f.send), secrets.Redact))
			c.log(l)
			e := f.last(t)
			all := e.msg
			for k, v := range e.vars {
				all += "\n" + k + "=" + v
			}
			if strings.Contains(all, key) {
				t.Fatalf("the secret reached the journal:\n%s", all)
			}
			if !strings.Contains(all, "[REDACTED:API_KEY]") {
				t.Fatalf("no redaction marker:\n%s", all)
			}
		})
	}
	t.Run("untouched", func(t *testing.T) {
		f := &fakeJournal{}
		l := slog.New(Redacting(newJournalHandler(Options{}, f.send), secrets.Redact))
		l.Info("plain", "n", 42, "s", "text")
		e := f.last(t)
		if e.msg != "plain" || e.vars["N"] != "42" || e.vars["S"] != "text" {
			t.Fatalf("entry changed: %+v", e)
		}
	})
}

type fmtStringer string

func (s fmtStringer) String() string { return string(s) }
