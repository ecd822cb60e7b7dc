package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors callers branch on. Every error the store returns for these cases wraps one of them.
var (
	// ErrNotFound: the row named by the call does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the row exists but is in a state the call cannot act on,
	// or a row with the same key already exists.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: an argument is malformed; the message names the field.
	ErrInvalid = errors.New("invalid argument")
	// ErrSchemaTooNew: the database was migrated by a newer binary.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
)

// busyTimeoutMS is how long a connection waits for another's write lock.
const busyTimeoutMS = 5000

// Store is arizukod's durable state. It is safe for concurrent use.
type Store struct {
	db     *sql.DB
	now    func() time.Time
	redact func(string) string
	outbox outboxWatch // wakes WaitOutbox
}

// Option configures a Store at Open.
type Option func(*Store)

// WithClock makes the store read the time from now instead of time.Now.
// The timestamps it writes (created_at, started_at, ...) and the backoff and
// inbox-run decisions it takes all use this clock.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// WithRedact makes the store pass the free text of a run, an agent or a caller through
// redact before writing it: run input, result, error and session ids, an inbox's retry and parked reasons,
// outbox, inbox and task text. The daemon gives it the filter that replaces its secrets'
// values, so that no credential an agent echoes is ever stored.
func WithRedact(redact func(string) string) Option {
	return func(s *Store) { s.redact = redact }
}

// Open opens (creating if needed, mode 0600) the database at path and applies
// the embedded migrations it lacks. Every pooled connection runs in WAL mode
// with foreign keys on, synchronous=NORMAL and a busy timeout, and begins its
// write transactions with BEGIN IMMEDIATE.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("store: open: path: %w: empty", ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := createPrivate(abs); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	db, err := sql.Open("sqlite", dsn(abs))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	// Keep connections: a new SQLite connection re-applies the pragmas and re-reads the
	// schema, and database/sql keeps only 2 idle ones by default.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	s := &Store{db: db, now: time.Now, redact: func(t string) string { return t }}
	for _, o := range opts {
		o(s)
	}
	// Switching a new database to WAL takes an exclusive lock, and SQLite answers a
	// connection that races it with SQLITE_BUSY without waiting: retry that, briefly.
	for delay := 5 * time.Millisecond; ; delay *= 2 {
		err = db.PingContext(ctx)
		if err == nil {
			err = migrate(ctx, db, migrationFiles, s.nowMS())
		}
		if err == nil || !isBusy(err) || delay > 2*time.Second {
			break
		}
		time.Sleep(delay)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	return s, nil
}

func isBusy(err error) bool {
	return strings.Contains(err.Error(), "SQLITE_BUSY") || strings.Contains(err.Error(), "database is locked")
}

// Close closes the database. Calls after Close fail.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// createPrivate creates an empty file at path with mode 0600 unless it exists,
// so that SQLite (which gives -wal and -shm the main file's mode) never makes
// the database world-readable.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// dsn is the modernc.org/sqlite data source name for the database file at the
// absolute path abs. The _pragma parameters run on every new connection.
func dsn(abs string) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	return "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + q.Encode()
}

func (s *Store) nowMS() int64 { return s.now().UnixMilli() }

// redactJSON redacts every string (keys included) of the JSON value b, which must be
// valid, after decoding, so that an escaped secret is found too; it returns b itself when
// nothing changed.
func (s *Store) redactJSON(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	changed := false
	redact := func(t string) string {
		r := s.redact(t)
		changed = changed || r != t
		return r
	}
	v = redactValue(v, redact)
	if !changed {
		return b, nil
	}
	return json.Marshal(v)
}

func redactValue(v any, redact func(string) string) any {
	switch v := v.(type) {
	case string:
		return redact(v)
	case []any:
		for i := range v {
			v[i] = redactValue(v[i], redact)
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[redact(k)] = redactValue(e, redact)
		}
		return out
	}
	return v
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// write runs fn in a BEGIN IMMEDIATE transaction and commits it if fn succeeds.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// newID returns prefix followed by 16 random hex digits.
func newID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// sqliteCode is the extended SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

func isUniqueViolation(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || c == sqlite3.SQLITE_CONSTRAINT_UNIQUE
}

func isForeignKeyViolation(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// nullInt maps 0 to NULL.
func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// nullString maps "" to NULL.
func nullString(v string) any {
	if v == "" {
		return nil
	}
	return v
}

// limitArg maps a limit of 0 or less ("no limit") to SQLite's -1.
func limitArg(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// underClause is the SQL condition "col is folder or one of its descendants",
// taking underArgs(folder) as its arguments. It compares bytes exactly, unlike LIKE
// (which is case-insensitive and treats % and _ as wildcards).
func underClause(col string) string {
	return "(" + col + " = ? OR substr(" + col + ", 1, length(?) + 1) = ? || '/')"
}

func underArgs(folder string) []any { return []any{folder, folder, folder} }
