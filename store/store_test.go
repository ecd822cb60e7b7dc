package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

// clock is a settable clock for WithClock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *clock) MS() int64 { return c.Now().UnixMilli() }

// openAt opens the store at path and closes it when the test ends.
func openAt(t *testing.T, path string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openTest opens a fresh store in a temporary directory.
func openTest(t *testing.T, opts ...Option) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "arizuko.db"), opts...)
}

func TestOpenSetsPragmasOnEveryConnection(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	const n = 4
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	if got := s.db.Stats().OpenConnections; got < n {
		t.Fatalf("open connections = %d, want at least %d distinct ones", got, n)
	}
	pragmas := []struct {
		name string
		want string
	}{
		{"journal_mode", "wal"},
		{"busy_timeout", "5000"},
		{"foreign_keys", "1"},
		{"synchronous", "1"}, // NORMAL
	}
	for i, c := range conns {
		for _, p := range pragmas {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+p.name).Scan(&got); err != nil {
				t.Fatalf("conn %d: PRAGMA %s: %v", i, p.name, err)
			}
			if got != p.want {
				t.Errorf("conn %d: PRAGMA %s = %q, want %q", i, p.name, got, p.want)
			}
		}
	}
}

func TestOpenMigratesFromEmpty(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	var version int
	var name string
	if err := s.db.QueryRowContext(ctx, `SELECT version, name FROM schema_migrations ORDER BY version DESC LIMIT 1`).Scan(&version, &name); err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	if last := ms[len(ms)-1]; version != last.version || name != last.name {
		t.Errorf("schema at %d %s, want %d %s", version, name, last.version, last.name)
	}
	for _, table := range []string{"runs", "groups", "sessions", "inbox", "cursors",
		"outbox", "grant_sets", "grants", "routes", "tasks"} {
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("table %s missing", table)
		}
	}
	// Dropped by 0007: nothing wrote it.
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE name LIKE 'session_log%'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("session_log: %d schema objects (%v), want none", n, err)
	}
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "arizuko.db")
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.CreateRun(ctx, Run{Folder: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s2, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if _, err := s2.GetRun(ctx, r.ID); err != nil {
			t.Errorf("run lost across reopen: %v", err)
		}
		var n int
		if err := s2.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		ms, _ := loadMigrations(migrationFiles)
		if n != len(ms) {
			t.Errorf("schema_migrations has %d rows, want %d", n, len(ms))
		}
		s2.Close()
	}
}

func TestOpenRejectsNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "arizuko.db")
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(ctx, path)
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open = %v, want ErrSchemaTooNew", err)
	}
	ms, _ := loadMigrations(migrationFiles)
	for _, want := range []string{"version 99", fmt.Sprintf("up to %d", len(ms))} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestOpenCreatesPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "arizuko.db")
	openAt(t, path)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("database mode %o, want 600", mode)
	}
}

func TestOpenPathNeedingEscapes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a b?c#d%20e")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "x?y.db")
	s := openAt(t, path)
	if _, err := s.CreateRun(context.Background(), Run{Folder: "main"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database not at %q: %v", path, err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("Open(\"\") = %v, want ErrInvalid", err)
	}
	missing := filepath.Join(t.TempDir(), "no", "such", "dir", "x.db")
	if _, err := Open(ctx, missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Open(%s) = %v, want an error naming the path", missing, err)
	}
}

func TestLoadMigrations(t *testing.T) {
	tests := []struct {
		name    string
		files   fstest.MapFS
		want    []int
		wantErr string
	}{
		{
			name: "ordered",
			files: fstest.MapFS{
				"migrations/0002_second.sql": {Data: []byte("b")},
				"migrations/0001_first.sql":  {Data: []byte("a")},
			},
			want: []int{1, 2},
		},
		{
			name:    "bad name",
			files:   fstest.MapFS{"migrations/1_first.sql": {Data: []byte("a")}},
			wantErr: "1_first.sql: name is not NNNN_name.sql",
		},
		{
			name: "gap",
			files: fstest.MapFS{
				"migrations/0001_first.sql": {Data: []byte("a")},
				"migrations/0003_third.sql": {Data: []byte("c")},
			},
			wantErr: "0003_third: expected version 2",
		},
		{
			name: "duplicate",
			files: fstest.MapFS{
				"migrations/0001_a.sql": {Data: []byte("a")},
				"migrations/0001_b.sql": {Data: []byte("b")},
			},
			wantErr: "expected version 2",
		},
		{
			name:    "none",
			files:   fstest.MapFS{},
			wantErr: "no migrations",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := loadMigrations(tt.files)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.version)
			}
			if len(got) != len(tt.want) || got[0] != tt.want[0] || got[1] != tt.want[1] {
				t.Errorf("versions %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMigrateInOrderAndAtomically(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v1 := fstest.MapFS{
		"migrations/0001_a.sql": {Data: []byte("CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);")},
	}
	if err := migrate(ctx, db, v1, 1); err != nil {
		t.Fatal(err)
	}
	broken := fstest.MapFS{
		"migrations/0001_a.sql": v1["migrations/0001_a.sql"],
		"migrations/0002_b.sql": {Data: []byte("CREATE TABLE b (y INTEGER); INSERT INTO nowhere VALUES (1);")},
	}
	err = migrate(ctx, db, broken, 2)
	if err == nil || !strings.Contains(err.Error(), "migration 0002_b") {
		t.Fatalf("broken migration: err = %v, want one naming 0002_b", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE name = 'b'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("a failed migration left its table behind")
	}
	fixed := fstest.MapFS{
		"migrations/0001_a.sql": v1["migrations/0001_a.sql"],
		"migrations/0002_b.sql": {Data: []byte("CREATE TABLE b (y INTEGER); INSERT INTO a VALUES (2);")},
	}
	if err := migrate(ctx, db, fixed, 3); err != nil {
		t.Fatal(err)
	}
	// 0001 ran once (one row of 1 in a), 0002 once (one row of 2).
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM a`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("table a has %d rows, want 2 (each migration applied once)", n)
	}
	if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("schema version %d, want 2", n)
	}
}

func TestConcurrentOpenMigratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "arizuko.db")
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			s, err := Open(ctx, path)
			if err != nil {
				errs <- err
				return
			}
			errs <- s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
