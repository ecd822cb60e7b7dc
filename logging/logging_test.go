package logging

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/mountsec"
	"github.com/coreos/go-systemd/v22/journal"
)

// entry is one journal.Send call.
type entry struct {
	msg  string
	pri  journal.Priority
	vars map[string]string
}

// fakeJournal records what would have been sent.
type fakeJournal struct {
	mu      sync.Mutex
	entries []entry
	err     error
}

func (f *fakeJournal) send(msg string, pri journal.Priority, vars map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.entries = append(f.entries, entry{msg, pri, vars})
	return nil
}

func (f *fakeJournal) last(t *testing.T) entry {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.entries) == 0 {
		t.Fatal("nothing sent")
	}
	return f.entries[len(f.entries)-1]
}

func newFake(opts Options) (*slog.Logger, *fakeJournal) {
	f := &fakeJournal{}
	return slog.New(newJournalHandler(opts, f.send)), f
}

// secret stands for mountsec.Secrets: it must only ever be logged through
// its LogValue.
type secret string

func (secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }
func (s secret) String() string     { return string(s) }

// groupValuer resolves to a group.
type groupValuer struct{}

func (groupValuer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("a", "1"), slog.Any("token", secret("hunter2")))
}

type stringer struct{}

func (stringer) String() string { return "stringer!" }

type nilErr struct{ msg *string }

func (e *nilErr) Error() string { return *e.msg }

func TestFieldName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ARIZUKO_RUN_ID", "ARIZUKO_RUN_ID"},
		{"ARIZUKO_EXIT_CODE", "ARIZUKO_EXIT_CODE"},
		{"MESSAGE_ID", "MESSAGE_ID"},
		{"run_id", "RUN_ID"},
		{"runId", "RUNID"},
		{"run-id", "RUN_ID"},
		{"a.b c/d", "A_B_C_D"},
		{"arizuko_run_id", "ARIZUKO_RUN_ID"},
		{"x9", "X9"},
		{"über", "X__BER"},
		{"_SYSTEMD_UNIT", "X__SYSTEMD_UNIT"},
		{"__x", "X___X"},
		{"9lives", "X_9LIVES"},
		{"", "X_"},
		{"message", "X_MESSAGE"},
		{"MESSAGE", "X_MESSAGE"},
		{"priority", "X_PRIORITY"},
		{"syslog_identifier", "X_SYSLOG_IDENTIFIER"},
		{"code_file", "X_CODE_FILE"},
		{"CODE_LINE", "X_CODE_LINE"},
		{"code_func", "X_CODE_FUNC"},
		{strings.Repeat("k", 70), strings.Repeat("K", 64)},
		{"_" + strings.Repeat("k", 70), "X__" + strings.Repeat("K", 61)},
	} {
		got := FieldName(tc.in)
		if got != tc.want {
			t.Errorf("FieldName(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !validField(got) {
			t.Errorf("FieldName(%q) = %q, which journald refuses", tc.in, got)
		}
	}
}

// validField is journald's rule for fields sent by clients.
func validField(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '_' || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func TestPriority(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  journal.Priority
	}{
		{slog.LevelDebug - 4, 7},
		{slog.LevelDebug, 7},
		{slog.LevelInfo - 1, 7},
		{slog.LevelInfo, 6},
		{slog.LevelInfo + 2, 6},
		{slog.LevelWarn, 4},
		{slog.LevelError - 1, 4},
		{slog.LevelError, 3},
		{slog.LevelError + 8, 3},
	} {
		log, f := newFake(Options{Level: slog.LevelDebug - 8})
		log.Log(context.Background(), tc.level, "m")
		if got := f.last(t).pri; got != tc.want {
			t.Errorf("level %v: priority %d, want %d", tc.level, got, tc.want)
		}
	}
}

func TestEntry(t *testing.T) {
	when := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, tc := range []struct {
		name string
		log  func(*slog.Logger)
		want map[string]string // fields besides SYSLOG_IDENTIFIER
	}{
		{"turn", func(l *slog.Logger) {
			l.Info("turn finished", append([]any{slog.String(FieldRunID, "r1"), slog.String(FieldFolder, "main/research"), slog.String(FieldContainer, "c1")},
				FieldStatus, "ok", FieldExitCode, 0, FieldDurationMS, int64(1234))...)
		}, map[string]string{
			"ARIZUKO_RUN_ID": "r1", "ARIZUKO_FOLDER": "main/research", "ARIZUKO_CONTAINER": "c1",
			"ARIZUKO_STATUS": "ok", "ARIZUKO_EXIT_CODE": "0", "ARIZUKO_DURATION_MS": "1234",
		}},
		{"group", func(l *slog.Logger) {
			l.Info("m", slog.Group("arizuko", "run_id", "r2", slog.Group("n", "k", 1)))
		}, map[string]string{"ARIZUKO_RUN_ID": "r2", "ARIZUKO_N_K": "1"}},
		{"WithGroup then With", func(l *slog.Logger) {
			l.With("before", 1).WithGroup("arizuko").With("folder", "main").WithGroup("").Info("m", "run_id", "r3")
		}, map[string]string{"BEFORE": "1", "ARIZUKO_FOLDER": "main", "ARIZUKO_RUN_ID": "r3"}},
		{"nested WithGroup", func(l *slog.Logger) {
			l.WithGroup("a").WithGroup("b").Info("m", "c", true)
		}, map[string]string{"A_B_C": "true"}},
		{"inline and empty groups, empty attr", func(l *slog.Logger) {
			l.Info("m", slog.Group("", "inline", "i"), slog.Group("empty"), slog.Attr{}, "", "nokey")
		}, map[string]string{"INLINE": "i", "X_": "nokey"}},
		{"values", func(l *slog.Logger) {
			l.Info("m", "i", -3, "u", uint64(7), "f", 1.5, "b", false, "d", 1500*time.Millisecond,
				"t", when, "err", errors.New("boom"), "str", stringer{}, "bytes", []byte("raw"),
				"map", map[string]int{"a": 1}, "slice", []string{"x", "y"}, "struct", struct{ A int }{2},
				"nil", nil, "nilerr", &nilErr{}, "nojson", struct{ F func() }{}, "multi", "line1\nline2")
		}, map[string]string{
			"I": "-3", "U": "7", "F": "1.5", "B": "false", "D": "1.5s", "T": "2026-01-02T03:04:05.000000006Z",
			"ERR": "boom", "STR": "stringer!", "BYTES": "raw", "MAP": `{"a":1}`, "SLICE": `["x","y"]`,
			"STRUCT": `{"A":2}`, "NIL": "null", "NILERR": "!PANIC: runtime error: invalid memory address or nil pointer dereference",
			"NOJSON": "{F:<nil>}", "MULTI": "line1\nline2",
		}},
		{"LogValuer", func(l *slog.Logger) {
			l.With("with", secret("s3cret")).Info("m", "secrets", secret("hunter2"), slog.Group("g", "s", secret("x")), "gv", groupValuer{},
				"env", mountsec.Secrets{"GH_TOKEN": "hunter2"})
		}, map[string]string{"ENV": "Secrets[GH_TOKEN]", "WITH": "[redacted]", "SECRETS": "[redacted]", "G_S": "[redacted]", "GV_A": "1", "GV_TOKEN": "[redacted]"}},
		{"reserved names", func(l *slog.Logger) {
			l.Info("real", "message", "fake", "PRIORITY", 0, "syslog_identifier", "evil", "_SYSTEMD_UNIT", "x.service")
		}, map[string]string{"X_MESSAGE": "fake", "X_PRIORITY": "0", "X_SYSLOG_IDENTIFIER": "evil", "X__SYSTEMD_UNIT": "x.service"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, f := newFake(Options{})
			tc.log(log)
			e := f.last(t)
			want := map[string]string{"SYSLOG_IDENTIFIER": "arizukod"}
			for k, v := range tc.want {
				want[k] = v
			}
			if !equalMaps(e.vars, want) {
				t.Errorf("fields\n got  %q\n want %q", e.vars, want)
			}
			for k, v := range e.vars {
				if !validField(k) {
					t.Errorf("field %q invalid", k)
				}
				if strings.Contains(v, "hunter2") || strings.Contains(v, "s3cret") {
					t.Errorf("field %s = %q: a secret got through", k, v)
				}
			}
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestOptions(t *testing.T) {
	log, f := newFake(Options{Identifier: "arizukod-x", Level: slog.LevelWarn, AddSource: true})
	log.Info("dropped")
	if len(f.entries) != 0 {
		t.Fatalf("Info below Warn sent: %+v", f.entries)
	}
	log.Warn("kept")
	_, _, line, _ := runtime.Caller(0)
	e := f.last(t)
	if e.msg != "kept" || e.pri != journal.PriWarning || e.vars["SYSLOG_IDENTIFIER"] != "arizukod-x" {
		t.Errorf("entry %+v", e)
	}
	if !strings.HasSuffix(e.vars["CODE_FILE"], "logging/logging_test.go") ||
		e.vars["CODE_LINE"] != strconv.Itoa(line-1) || !strings.HasSuffix(e.vars["CODE_FUNC"], "logging.TestOptions") {
		t.Errorf("source fields %q, want line %d of logging_test.go in TestOptions", e.vars, line-1)
	}

	log, f = newFake(Options{})
	log.Info("no source")
	if _, ok := f.last(t).vars["CODE_FILE"]; ok {
		t.Error("CODE_FILE without AddSource")
	}
}

// TestFallback: a failed journal write goes to stderr, with its attributes
// and groups.
func TestFallback(t *testing.T) {
	var buf bytes.Buffer
	f := &fakeJournal{err: errors.New("journald gone")}
	log := slog.New(newJournalHandler(Options{Stderr: &buf}, f.send))
	log.With("a", 1).WithGroup("g").Info("lost?", "b", secret("hunter2"))
	out := buf.String()
	if !strings.Contains(out, "msg=lost?") || !strings.Contains(out, "a=1") || !strings.Contains(out, "g.b=[redacted]") {
		t.Errorf("stderr = %q", out)
	}
}

func TestNewStderr(t *testing.T) {
	var buf bytes.Buffer
	log := New(Options{Stderr: &buf, ForceStderr: true, Level: slog.LevelDebug})
	log.With(FieldRunID, "r", FieldFolder, "main", FieldContainer, "c").Debug("hello", "s", secret("hunter2"))
	out := buf.String()
	for _, want := range []string{"level=DEBUG", "msg=hello", "ARIZUKO_RUN_ID=r", "ARIZUKO_FOLDER=main", "ARIZUKO_CONTAINER=c", "s=[redacted]"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr %q lacks %q", out, want)
		}
	}
}

// FuzzFieldName: whatever the key, journald accepts the name.
func FuzzFieldName(f *testing.F) {
	for _, s := range []string{"ARIZUKO_RUN_ID", "run-id", "_x", "9", "", "message", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if name := FieldName(key); !validField(name) {
			t.Fatalf("FieldName(%q) = %q, which journald refuses", key, name)
		}
	})
}

// TestTerminal: on a terminal every record prints as a readable line (time, level,
// message, a turn's fields by short names, values quoted only where needed, control
// characters escaped), beside the journal entry when journald answers and alone when it
// does not; a failed journal write is not printed twice.
func TestTerminal(t *testing.T) {
	line := regexp.MustCompile(`^\d\d:\d\d:\d\d WARN turn finished folder=main/research run_id=r1 status=error err="exit 2: \\x1b\[31mno\\nway" s=\[redacted\] g\.n=1\n$`)
	for _, tt := range []struct {
		name     string
		journald bool
		fail     bool
		entries  int
	}{
		{"journald", true, false, 1},
		{"journald failing", true, true, 0},
		{"no journald", false, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			f := &fakeJournal{}
			if tt.fail {
				f.err = errors.New("journald gone")
			}
			log := slog.New(newHandler(Options{Stderr: &buf, Terminal: true}, tt.journald, f.send))
			log.Debug("not at info")
			log.With(FieldFolder, "main/research", FieldRunID, "r1").Warn("turn finished", FieldStatus, "error",
				"err", "exit 2: \x1b[31mno\nway", "s", secret("hunter2"), slog.Group("g", "n", 1))
			if !line.MatchString(buf.String()) {
				t.Errorf("the terminal shows %q, want one line matching %s", buf.String(), line)
			}
			if len(f.entries) != tt.entries {
				t.Errorf("%d journal entries, want %d", len(f.entries), tt.entries)
			}
			if tt.entries > 0 && f.last(t).vars[FieldFolder] != "main/research" {
				t.Errorf("the journal entry: %+v", f.last(t))
			}
		})
	}
}
