package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	sqlite3 "modernc.org/sqlite/lib"
)

// RunKind says what started a run.
type RunKind string

// Run kinds.
const (
	KindTurn RunKind = "turn" // a turn over API input or a group's inbox
	KindTask RunKind = "task" // a scheduled task's isolated turn
)

// RunState is where a run is in its life. Queued and running are open;
// exited, error and killed are final.
type RunState string

// Run states.
const (
	RunQueued  RunState = "queued"
	RunRunning RunState = "running"
	RunExited  RunState = "exited" // the container exited; Status says how the turn went
	RunError   RunState = "error"  // the run failed outside the agent (engine, timeout, lost...)
	RunKilled  RunState = "killed"
)

// Final reports whether the state is one a run never leaves.
func (s RunState) Final() bool {
	return s == RunExited || s == RunError || s == RunKilled
}

// Status is the turn contract's outcome status (seed 000).
type Status string

// Outcome statuses.
const (
	StatusNone  Status = ""      // no outcome (yet)
	StatusOK    Status = "ok"    // success: the inbox cursor advances
	StatusError Status = "error" // failure with output: the cursor advances
	StatusFatal Status = "fatal" // no output: the cursor rolls back and the messages run again
)

// Failure classifies why a run did not succeed. The store records any value;
// these are the ones arizukod uses.
type Failure string

// Failure classes.
const (
	FailureNone      Failure = ""
	FailureTimeout   Failure = "timeout"
	FailureOOM       Failure = "oom"
	FailureMisconfig Failure = "misconfig"
	FailureEngine    Failure = "engine"
	FailureLost      Failure = "lost" // the container vanished while the daemon was away
	FailureKilled    Failure = "killed"
)

// Run is one container run for one group folder.
type Run struct {
	ID        string  // "r_" + 16 hex digits unless the caller chose one
	Seq       int64   // creation order, assigned by the store
	Folder    string  // the group folder
	Kind      RunKind // KindTurn or KindTask
	TaskID    string  // the task of a KindTask run; "" otherwise
	Container string  // the engine's container name, once known
	State     RunState
	Status    Status
	Failure   Failure
	// Terminal marks a failure that running the same input again cannot fix
	// (a misconfiguration, say), so it must not be retried.
	Terminal     bool
	ExitCode     *int // nil until the container exited with a code
	Error        string
	Result       string
	NewSessionID string
	// Input is the turn's input as JSON (messages, sessionId, senderJid).
	// It must never hold a secret.
	Input     json.RawMessage
	TimeoutMS int64 // 0: the daemon's default
	Attempt   int   // 1 for the first try; RequeueRun and inbox retries count up
	// InboxFirst and InboxLast are the inbox message ids the run covers
	// (see CreateInboxRun); both 0 for runs not made from an inbox.
	InboxFirst      int64
	InboxLast       int64
	KillRequestedAt int64 // unix ms; 0 unless a kill was requested
	CreatedAt       int64 // unix ms
	StartedAt       int64 // unix ms; 0 until running
	EndedAt         int64 // unix ms; 0 until final
	// Usage is what the turn used of the model API through the gateway.
	Usage Usage
	// InputSentAt is when the turn's input line reached the container's stdin (unix ms);
	// 0 until then, and again after RequeueRun.
	InputSentAt int64
	// SessionCleared says the folder's session was cleared while the run ran, so FinishRun
	// does not make the turn's NewSessionID the folder's session.
	SessionCleared bool
}

// Usage is what one run used of the model API, summed over its requests.
type Usage struct {
	Requests         int64
	Model            string // the last model the agent asked for
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	// CacheWrite1hTokens are the cache writes, of CacheWriteTokens, to the 1-hour cache.
	CacheWrite1hTokens int64
	// Refused is why the gateway last refused a request of the run ("" when it never did).
	Refused string
	// UpstreamError is how the model upstream last failed during the run ("" when it
	// never did): what the agent was retrying.
	UpstreamError string
}

// RunFilter selects runs for ListRuns. Zero fields match everything.
type RunFilter struct {
	Folder string
	State  RunState
	TaskID string
	Limit  int // at most this many, newest first; 0 for all
}

// RunCounts is how many runs are open.
type RunCounts struct {
	Queued  int
	Running int
}

// Outcome is how a run ended, and what else changes with it in FinishRun's
// transaction.
type Outcome struct {
	State        RunState // RunExited, RunError or RunKilled
	Status       Status
	Failure      Failure
	Terminal     bool
	ExitCode     *int
	Error        string
	Result       string
	NewSessionID string
	// SaveSession also makes NewSessionID, when not empty, the folder's session.
	SaveSession bool
	// Cursor is what happens to the folder's inbox cursor. It is required
	// for a run made by CreateInboxRun and must be zero for any other run.
	Cursor CursorUpdate
}

const runColumns = `id, seq, folder, kind, task_id, container, state, status, failure, terminal,
	exit_code, error, result, new_session_id, input, timeout_ms, attempt, inbox_first, inbox_last,
	kill_requested_at, created_at, started_at, ended_at, model_requests, model, input_tokens,
	output_tokens, cache_read_tokens, cache_write_tokens, cache_write_1h_tokens, model_refused, model_error, input_sent_at, session_cleared`

func scanRun(row interface{ Scan(...any) error }) (*Run, error) {
	var (
		r                                                        Run
		taskID                                                   sql.NullString
		exitCode, inFirst, inLast, kill, start, ended, inputSent sql.NullInt64
		input                                                    string
	)
	err := row.Scan(&r.ID, &r.Seq, &r.Folder, &r.Kind, &taskID, &r.Container, &r.State, &r.Status,
		&r.Failure, &r.Terminal, &exitCode, &r.Error, &r.Result, &r.NewSessionID, &input,
		&r.TimeoutMS, &r.Attempt, &inFirst, &inLast, &kill, &r.CreatedAt, &start, &ended,
		&r.Usage.Requests, &r.Usage.Model, &r.Usage.InputTokens, &r.Usage.OutputTokens,
		&r.Usage.CacheReadTokens, &r.Usage.CacheWriteTokens, &r.Usage.CacheWrite1hTokens, &r.Usage.Refused, &r.Usage.UpstreamError, &inputSent, &r.SessionCleared)
	if err != nil {
		return nil, err
	}
	r.TaskID = taskID.String
	if exitCode.Valid {
		c := int(exitCode.Int64)
		r.ExitCode = &c
	}
	r.Input = json.RawMessage(input)
	r.InboxFirst, r.InboxLast = inFirst.Int64, inLast.Int64
	r.KillRequestedAt, r.StartedAt, r.EndedAt = kill.Int64, start.Int64, ended.Int64
	r.InputSentAt = inputSent.Int64
	return &r, nil
}

func queryRuns(ctx context.Context, q querier, query string, args ...any) ([]Run, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

func getRun(ctx context.Context, q querier, id string) (*Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %q: %w", id, ErrNotFound)
	}
	return r, err
}

// checkNewRun validates r and fills its defaults for insertion.
func checkNewRun(r *Run) error {
	if r.Folder == "" {
		return fmt.Errorf("run: folder: %w: empty", ErrInvalid)
	}
	if r.Kind == "" {
		r.Kind = KindTurn
	}
	switch r.Kind {
	case KindTurn:
		if r.TaskID != "" {
			return fmt.Errorf("run: task_id: %w: set on a %s run", ErrInvalid, r.Kind)
		}
	case KindTask:
		if r.TaskID == "" {
			return fmt.Errorf("run: task_id: %w: empty on a task run", ErrInvalid)
		}
	default:
		return fmt.Errorf("run: kind: %w: %q is not turn or task", ErrInvalid, r.Kind)
	}
	if len(r.Input) == 0 {
		r.Input = json.RawMessage(`{}`)
	}
	if !json.Valid(r.Input) {
		return fmt.Errorf("run: input: %w: not valid JSON", ErrInvalid)
	}
	if r.TimeoutMS < 0 {
		return fmt.Errorf("run: timeout_ms: %w: %d is negative", ErrInvalid, r.TimeoutMS)
	}
	if r.Attempt < 0 {
		return fmt.Errorf("run: attempt: %w: %d is negative", ErrInvalid, r.Attempt)
	}
	if r.Attempt == 0 {
		r.Attempt = 1
	}
	if r.ID == "" {
		r.ID = newID("r_")
	}
	return nil
}

// insertRun inserts r, already checked, as a queued run created at now and
// fills in what the store assigned.
func insertRun(ctx context.Context, q querier, r *Run, now int64) error {
	err := q.QueryRowContext(ctx, `INSERT INTO runs (id, seq, folder, kind, task_id, state, input,
		timeout_ms, attempt, inbox_first, inbox_last, created_at)
		VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM runs), ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?)
		RETURNING seq`,
		r.ID, r.Folder, r.Kind, nullString(r.TaskID), string(r.Input), r.TimeoutMS, r.Attempt,
		nullInt(r.InboxFirst), nullInt(r.InboxLast), now).Scan(&r.Seq)
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("run %q: %w: id exists", r.ID, ErrConflict)
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		if r.InboxLast != 0 {
			return fmt.Errorf("run %q: %w: folder %q already has an open inbox run", r.ID, ErrConflict, r.Folder)
		}
		return fmt.Errorf("run %q: %w: %v", r.ID, ErrConflict, err)
	}
	if err != nil {
		return fmt.Errorf("run %q: insert: %w", r.ID, err)
	}
	r.State = RunQueued
	r.CreatedAt = now
	return nil
}

// CreateRun queues a new run. The store sets State (queued), Seq and
// CreatedAt, and an ID if r has none; Kind defaults to KindTurn and Attempt
// to 1. Runs over a group's inbox are made with CreateInboxRun instead, so
// r.InboxFirst and r.InboxLast must be 0. An ID already in use is ErrConflict.
func (s *Store) CreateRun(ctx context.Context, r Run) (*Run, error) {
	if r.InboxFirst != 0 || r.InboxLast != 0 {
		return nil, fmt.Errorf("store: create run: inbox range: %w: use CreateInboxRun", ErrInvalid)
	}
	if err := checkNewRun(&r); err != nil {
		return nil, fmt.Errorf("store: create %w", err)
	}
	input, err := s.redactJSON(r.Input)
	if err != nil {
		return nil, fmt.Errorf("store: create run %q: input: %w", r.ID, err)
	}
	r.Input = input
	if err := s.write(ctx, func(tx *sql.Tx) error {
		return insertRun(ctx, tx, &r, s.nowMS())
	}); err != nil {
		return nil, fmt.Errorf("store: create %w", err)
	}
	return s.GetRun(ctx, r.ID)
}

// GetRun returns the run with the given id, or ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (*Run, error) {
	r, err := getRun(ctx, s.db, id)
	if err != nil {
		return nil, fmt.Errorf("store: get %w", err)
	}
	return r, nil
}

// ListRuns returns the runs f selects, newest first.
func (s *Store) ListRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	var (
		where []string
		args  []any
	)
	if f.Folder != "" {
		where, args = append(where, "folder = ?"), append(args, f.Folder)
	}
	if f.State != "" {
		where, args = append(where, "state = ?"), append(args, f.State)
	}
	if f.TaskID != "" {
		where, args = append(where, "task_id = ?"), append(args, f.TaskID)
	}
	query := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY seq DESC LIMIT ?`
	runs, err := queryRuns(ctx, s.db, query, append(args, limitArg(f.Limit))...)
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	return runs, nil
}

// ListRunning returns every running run, oldest first: what a restarted
// daemon reconciles with the engine.
func (s *Store) ListRunning(ctx context.Context) ([]Run, error) {
	runs, err := queryRuns(ctx, s.db, `SELECT `+runColumns+` FROM runs WHERE state = 'running' ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("store: list running: %w", err)
	}
	return runs, nil
}

// CountRuns returns how many runs are queued and running.
func (s *Store) CountRuns(ctx context.Context) (RunCounts, error) {
	var c RunCounts
	err := s.db.QueryRowContext(ctx, `SELECT
		COALESCE(SUM(state = 'queued'), 0), COALESCE(SUM(state = 'running'), 0)
		FROM runs WHERE state IN ('queued', 'running')`).Scan(&c.Queued, &c.Running)
	if err != nil {
		return RunCounts{}, fmt.Errorf("store: count runs: %w", err)
	}
	return c, nil
}

// StartNext is the queue. In one transaction it picks the oldest queued run
// (by Seq) whose folder and ancestor folders have no running run, provided fewer
// than globalCap runs are running, and marks it running with StartedAt set. It
// returns nil, nil when nothing can start. So at most one run per folder runs at
// a time, none while an ancestor's runs, at most globalCap in all, and each
// folder's runs start in creation order.
func (s *Store) StartNext(ctx context.Context, globalCap int) (*Run, error) {
	if globalCap < 1 {
		return nil, fmt.Errorf("store: start next: globalCap: %w: %d is less than 1", ErrInvalid, globalCap)
	}
	var started *Run
	err := s.write(ctx, func(tx *sql.Tx) error {
		var running int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs WHERE state = 'running'`).Scan(&running); err != nil {
			return err
		}
		if running >= globalCap {
			return nil
		}
		var id string
		// Not while its folder or an ancestor folder runs: an ancestor's agent can write
		// this folder's directory, and must not be running while its container is made
		// (queue's fence).
		err := tx.QueryRowContext(ctx, `SELECT id FROM runs q WHERE state = 'queued'
			AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.state = 'running'
				AND (r.folder = q.folder OR substr(q.folder, 1, length(r.folder) + 1) = r.folder || '/'))
			ORDER BY seq LIMIT 1`).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = 'running', started_at = ? WHERE id = ?`, s.nowMS(), id); err != nil {
			return err
		}
		started, err = getRun(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: start next: %w", err)
	}
	return started, nil
}

// runStateError explains why the run id cannot take a transition that needs
// it in one of the states want: ErrNotFound or ErrConflict.
func runStateError(ctx context.Context, q querier, id string, want ...RunState) error {
	r, err := getRun(ctx, q, id)
	if err != nil {
		return err
	}
	names := make([]string, len(want))
	for i, w := range want {
		names[i] = string(w)
	}
	if r.KillRequestedAt != 0 && r.State == RunRunning {
		return fmt.Errorf("run %q: %w: a kill was requested", id, ErrConflict)
	}
	return fmt.Errorf("run %q: %w: it is %s, not %s", id, ErrConflict, r.State, strings.Join(names, " or "))
}

// SetContainer records the container name of a running run.
func (s *Store) SetContainer(ctx context.Context, id, container string) error {
	if container == "" {
		return fmt.Errorf("store: set container of run %q: container: %w: empty", id, ErrInvalid)
	}
	if err := s.updateRunning(ctx, id, `UPDATE runs SET container = ? WHERE id = ? AND state = 'running'`, container, id); err != nil {
		return fmt.Errorf("store: set container: %w", err)
	}
	return nil
}

// RequeueRun puts a running run back in the queue, in its old place, with
// Attempt one higher and no container, start time or InputSentAt: for a run
// that could not start because the engine was away, or whose input never
// reached its agent. A run with a kill request is ErrConflict.
func (s *Store) RequeueRun(ctx context.Context, id string) error {
	if err := s.updateRunning(ctx, id, `UPDATE runs SET state = 'queued', started_at = NULL,
		container = '', input_sent_at = NULL, attempt = attempt + 1
		WHERE id = ? AND state = 'running' AND kill_requested_at IS NULL`, id); err != nil {
		return fmt.Errorf("store: requeue: %w", err)
	}
	return nil
}

// MarkInputSent records that the running run's input reached its container's
// stdin. A run that is not running is ErrConflict.
func (s *Store) MarkInputSent(ctx context.Context, id string) error {
	if err := s.updateRunning(ctx, id, `UPDATE runs SET input_sent_at = ? WHERE id = ? AND state = 'running'`, s.nowMS(), id); err != nil {
		return fmt.Errorf("store: mark input sent: %w", err)
	}
	return nil
}

// updateRunning runs an UPDATE of run id that only applies while it is running; when it
// changes nothing, the error says what state the run is in instead.
func (s *Store) updateRunning(ctx context.Context, id, query string, args ...any) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return runStateError(ctx, tx, id, RunRunning)
		}
		return nil
	})
}

func checkOutcome(o Outcome) error {
	if !o.State.Final() {
		return fmt.Errorf("state: %w: %q is not exited, error or killed", ErrInvalid, o.State)
	}
	switch o.Status {
	case StatusNone, StatusOK, StatusError, StatusFatal:
	default:
		return fmt.Errorf("status: %w: %q is not ok, error, fatal or empty", ErrInvalid, o.Status)
	}
	return checkCursorUpdate(o.Cursor)
}

// FinishRun records how a queued or running run ended. In the same
// transaction it applies o.Cursor to the folder's inbox cursor and, with
// o.SaveSession, stores o.NewSessionID as the folder's session, so a crash
// never leaves a finished inbox run whose messages would run again. A session
// cleared while the run ran (ClearSession) stays cleared: the turn's session
// id is recorded on the run only. Error, Result, NewSessionID and the cursor's reason are redacted
// (WithRedact). For an inbox run the same transaction appends to the outbox what its
// chat should get: its result and notices (see runEndOutbox). A run already final is
// ErrConflict.
func (s *Store) FinishRun(ctx context.Context, id string, o Outcome) (*Run, error) {
	if err := checkOutcome(o); err != nil {
		return nil, fmt.Errorf("store: finish run %q: %w", id, err)
	}
	var (
		done *Run
		sent []OutboxItem
	)
	err := s.write(ctx, func(tx *sql.Tx) error {
		r, err := getRun(ctx, tx, id)
		if err != nil {
			return err
		}
		if r.State.Final() {
			return fmt.Errorf("run %q: %w: already %s", id, ErrConflict, r.State)
		}
		inbox := r.InboxLast != 0
		if inbox && o.Cursor.Op == CursorNone {
			return fmt.Errorf("run %q: cursor: %w: an inbox run needs a cursor update", id, ErrInvalid)
		}
		if !inbox && o.Cursor.Op != CursorNone {
			return fmt.Errorf("run %q: cursor: %w: not an inbox run", id, ErrInvalid)
		}
		now := s.nowMS()
		var exitCode any
		if o.ExitCode != nil {
			exitCode = *o.ExitCode
		}
		o.Error, o.Result, o.NewSessionID = s.redact(o.Error), s.redact(o.Result), s.redact(o.NewSessionID)
		o.Cursor.Reason = s.redact(o.Cursor.Reason)
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = ?, status = ?, failure = ?,
			terminal = ?, exit_code = ?, error = ?, result = ?, new_session_id = ?, ended_at = ?
			WHERE id = ?`, o.State, o.Status, o.Failure, o.Terminal, exitCode, o.Error, o.Result,
			o.NewSessionID, now, id); err != nil {
			return err
		}
		if inbox {
			cur, err := applyCursorUpdate(ctx, tx, r.Folder, r.InboxLast, o.Cursor, now)
			if err != nil {
				return err
			}
			if sent, err = s.runEndOutbox(ctx, tx, r, o, cur, now); err != nil {
				return err
			}
		}
		if o.SaveSession && o.NewSessionID != "" && !r.SessionCleared {
			if err := setSession(ctx, tx, r.Folder, o.NewSessionID, now); err != nil {
				return err
			}
		}
		done, err = getRun(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: finish: %w", err)
	}
	s.outbox.notify(true, sent...)
	return done, nil
}

// RequestKill asks for a run to end. A queued run becomes killed at once
// (Failure "killed"); if it was made from the inbox, its messages count as
// handled and the cursor advances past them, as they would after an error.
// A running run gets KillRequestedAt set (once) and stays running: the runner
// stops it and calls FinishRun. A final run is ErrConflict. It returns the run
// as it now is.
func (s *Store) RequestKill(ctx context.Context, id string) (*Run, error) {
	var out *Run
	err := s.write(ctx, func(tx *sql.Tx) error {
		r, err := getRun(ctx, tx, id)
		if err != nil {
			return err
		}
		now := s.nowMS()
		switch r.State {
		case RunQueued:
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = 'killed', failure = ?,
				kill_requested_at = ?, ended_at = ? WHERE id = ?`, FailureKilled, now, now, id); err != nil {
				return err
			}
			if r.InboxLast != 0 {
				if _, err := applyCursorUpdate(ctx, tx, r.Folder, r.InboxLast, CursorUpdate{Op: CursorAdvance}, now); err != nil {
					return err
				}
			}
		case RunRunning:
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET kill_requested_at = ?
				WHERE id = ? AND kill_requested_at IS NULL`, now, id); err != nil {
				return err
			}
		default:
			return fmt.Errorf("run %q: %w: already %s", id, ErrConflict, r.State)
		}
		out, err = getRun(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: kill: %w", err)
	}
	return out, nil
}

// RecentFolders are the folders of the latest turns (not tasks), the most recent first, at
// most limit of them: those whose next turn is likely soon.
func (s *Store) RecentFolders(ctx context.Context, limit int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT folder FROM runs WHERE kind = 'turn' GROUP BY folder ORDER BY MAX(seq) DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: recent folders: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var f string
		if err := rows.Scan(&f); err != nil {
			return nil, fmt.Errorf("store: recent folders: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: recent folders: %w", err)
	}
	return out, nil
}
