package retention

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/store"
)

type fixture struct {
	st     *store.Store
	layout groupfolder.Layout
	now    time.Time
}

func newFixture(t *testing.T, folders ...string) *fixture {
	t.Helper()
	dir := t.TempDir()
	layout, err := groupfolder.NewLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), filepath.Join(dir, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, f := range folders {
		if _, err := st.UpsertGroup(context.Background(), store.Group{Folder: f}); err != nil {
			t.Fatal(err)
		}
		if _, err := layout.Ensure(groupfolder.Folder(f), os.Getuid(), os.Getgid()); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{st: st, layout: layout, now: time.UnixMilli(1_800_000_000_000)}
}

func (fx *fixture) logsDir(t *testing.T, f string) string {
	t.Helper()
	dir, err := fx.layout.LogsDir(groupfolder.Folder(f))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeLogs writes run logs that started ago[i] before now.
func (fx *fixture) writeLogs(t *testing.T, f string, ago ...time.Duration) {
	t.Helper()
	for _, a := range ago {
		name := fmt.Sprintf("container-%d.log", fx.now.Add(-a).UnixMilli())
		if err := os.WriteFile(filepath.Join(fx.logsDir(t, f), name), []byte("log\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func (fx *fixture) left(t *testing.T, f string) []string {
	t.Helper()
	entries, err := os.ReadDir(fx.logsDir(t, f))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if ms, ok := strings.CutPrefix(name, "container-"); ok {
			var n int64
			fmt.Sscanf(ms, "%d.log", &n)
			name = fx.now.Sub(time.UnixMilli(n)).String()
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func TestPruneLogs(t *testing.T) {
	ctx := context.Background()
	day := 24 * time.Hour
	for _, tc := range []struct {
		name  string
		rules config.Retention
		want  []string
	}{
		{"off", config.Retention{}, []string{"1h0m0s", "240h0m0s", "24h0m0s", "48h0m0s", "720h0m0s", "notes.txt"}},
		{"by age", config.Retention{LogsMaxAge: 30 * time.Hour}, []string{"1h0m0s", "24h0m0s", "notes.txt"}},
		{"by count", config.Retention{LogsMaxCount: 2}, []string{"1h0m0s", "24h0m0s", "notes.txt"}},
		{"both", config.Retention{LogsMaxAge: 20 * day, LogsMaxCount: 4}, []string{"1h0m0s", "240h0m0s", "24h0m0s", "48h0m0s", "notes.txt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, "main", "main/research")
			fx.writeLogs(t, "main", time.Hour, day, 2*day, 10*day, 30*day)
			os.WriteFile(filepath.Join(fx.logsDir(t, "main"), "notes.txt"), []byte("an agent's own file"), 0o600)
			fx.writeLogs(t, "main/research", 30*day)
			dry, err := Prune(ctx, fx.st, fx.layout, tc.rules, fx.now, true)
			if err != nil {
				t.Fatal(err)
			}
			if got := fx.left(t, "main"); len(got) != 6 {
				t.Fatalf("a dry run removed logs: %v", got)
			}
			rep, err := Prune(ctx, fx.st, fx.layout, tc.rules, fx.now, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := fx.left(t, "main"); !slices.Equal(got, tc.want) {
				t.Errorf("main keeps %v, want %v", got, tc.want)
			}
			if rep.Logs != dry.Logs || rep.LogBytes != dry.LogBytes || len(rep.LogErrors) > 0 {
				t.Errorf("pruned %+v, the dry run said %+v", rep, dry)
			}
			// The nested group is a group of its own: its single, old log obeys the age rule alone.
			if got, want := len(fx.left(t, "main/research")), 1; tc.rules.LogsMaxAge > 0 && tc.rules.LogsMaxAge < 30*day {
				if got != 0 {
					t.Errorf("main/research keeps %d logs, want 0", got)
				}
			} else if got != want {
				t.Errorf("main/research keeps %d logs, want %d", got, want)
			}
		})
	}
}

// An agent owns its workspace, logs/ included: a symlink planted there is never followed
// nor removed, and a logs directory replaced by a symlink is reported, not walked.
func TestPruneLogsFollowsNoSymlink(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, "main", "other")
	outside := t.TempDir()
	victim := filepath.Join(outside, "container-1.log")
	if err := os.WriteFile(victim, []byte("not the daemon's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(fx.logsDir(t, "main"), "container-2.log")); err != nil {
		t.Fatal(err)
	}
	other := fx.logsDir(t, "other")
	if err := os.Remove(other); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, other); err != nil {
		t.Fatal(err)
	}
	rep, err := Prune(ctx, fx.st, fx.layout, config.Retention{LogsMaxAge: time.Minute}, fx.now, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Logs != 0 {
		t.Errorf("pruned %d logs", rep.Logs)
	}
	if len(rep.LogErrors) != 1 || !strings.Contains(rep.LogErrors[0], "other") || !strings.Contains(rep.LogErrors[0], "symlink") {
		t.Errorf("log errors %q, want one naming the symlink of other", rep.LogErrors)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("a file outside the data dir was touched: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(fx.logsDir(t, "main"), "container-2.log")); err != nil {
		t.Errorf("the planted symlink was removed: %v", err)
	}
}

// Run prunes on its own every interval.
func TestRun(t *testing.T) {
	fx := newFixture(t, "main")
	fx.now = time.Now()
	fx.writeLogs(t, "main", 48*time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rules := func() config.Retention { return config.Retention{Interval: time.Millisecond, LogsMaxAge: time.Hour} }
	done := make(chan struct{})
	go func() { Run(ctx, fx.st, fx.layout, rules, slog.New(slog.DiscardHandler)); close(done) }()
	for len(fx.left(t, "main")) > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}
