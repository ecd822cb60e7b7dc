package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Source says how a message reached a group's inbox.
type Source string

// Inbox sources.
const (
	SourceAPI      Source = "api"      // POST /v1/groups/{folder}/messages
	SourceRoute    Source = "route"    // an inbound chat message matched a route
	SourceInject   Source = "inject"   // the inject_message tool
	SourceDelegate Source = "delegate" // delegate_to_child or delegate_to_parent
	SourceTask     Source = "task"     // a scheduled task
)

func (s Source) valid() bool {
	switch s {
	case SourceAPI, SourceRoute, SourceInject, SourceDelegate, SourceTask:
		return true
	}
	return false
}

// InboxMessage is one message waiting for (or handled by) a group's turn.
type InboxMessage struct {
	ID        int64 // increasing across all folders, assigned by the store
	Folder    string
	SenderJID string // who wrote it; "" when unknown
	ChatJID   string // the chat it was written in; "" when none
	Role      string
	Content   string
	Source    Source
	CreatedAt int64 // unix ms
}

// Cursor is a folder's progress through its inbox. The messages with ids
// above LastDoneID are pending.
type Cursor struct {
	Folder     string
	LastDoneID int64
	// Retries counts the failed attempts at the pending messages since the
	// cursor last advanced.
	Retries       int
	LastError     string
	NextAttemptAt int64  // unix ms; no inbox run is made before it
	ParkedReason  string // not empty while parked: no inbox run is made
	ParkedAt      int64  // unix ms
	UpdatedAt     int64  // unix ms
}

// Parked reports whether the folder's inbox is parked.
func (c Cursor) Parked() bool { return c.ParkedReason != "" }

// CursorOp is what happens to a folder's inbox cursor after an inbox run.
type CursorOp int

// Cursor operations.
const (
	// CursorNone leaves the cursor alone (for runs not made from the inbox).
	CursorNone CursorOp = iota
	// CursorAdvance marks the run's messages handled and clears retries,
	// the error and any backoff (statuses ok and error).
	CursorAdvance
	// CursorRetry leaves the messages pending for another attempt after
	// Backoff, recording Reason; once Retries would exceed MaxRetries the
	// folder is parked instead (status fatal).
	CursorRetry
	// CursorPark leaves the messages pending and parks the folder with Reason
	// until Unpark (failures that retrying cannot fix).
	CursorPark
)

// CursorUpdate is a CursorOp with its parameters.
type CursorUpdate struct {
	Op         CursorOp
	Reason     string        // CursorRetry, CursorPark: recorded, shown to operators
	Backoff    time.Duration // CursorRetry: wait before the next attempt
	MaxRetries int           // CursorRetry: retries allowed before parking
}

func checkCursorUpdate(u CursorUpdate) error {
	switch u.Op {
	case CursorNone, CursorAdvance:
	case CursorRetry:
		if u.Backoff < 0 {
			return fmt.Errorf("cursor backoff: %w: %s is negative", ErrInvalid, u.Backoff)
		}
		if u.MaxRetries < 0 {
			return fmt.Errorf("cursor max retries: %w: %d is negative", ErrInvalid, u.MaxRetries)
		}
		if u.Reason == "" {
			return fmt.Errorf("cursor reason: %w: empty", ErrInvalid)
		}
	case CursorPark:
		if u.Reason == "" {
			return fmt.Errorf("cursor reason: %w: empty", ErrInvalid)
		}
	default:
		return fmt.Errorf("cursor op: %w: unknown op %d", ErrInvalid, u.Op)
	}
	return nil
}

// AppendInbox appends msgs to folder's inbox in one transaction and returns
// their ids in order. Each message's Folder must be empty or folder; Role
// must not be empty; Source must be one of the Source constants.
func (s *Store) AppendInbox(ctx context.Context, folder string, msgs ...InboxMessage) ([]int64, error) {
	if folder == "" {
		return nil, fmt.Errorf("store: append inbox: folder: %w: empty", ErrInvalid)
	}
	for i, m := range msgs {
		switch {
		case m.Folder != "" && m.Folder != folder:
			return nil, fmt.Errorf("store: append inbox: messages[%d].folder: %w: %q is not %q", i, ErrInvalid, m.Folder, folder)
		case m.Role == "":
			return nil, fmt.Errorf("store: append inbox: messages[%d].role: %w: empty", i, ErrInvalid)
		case !m.Source.valid():
			return nil, fmt.Errorf("store: append inbox: messages[%d].source: %w: %q is not api, route, inject, delegate or task", i, ErrInvalid, m.Source)
		}
	}
	ids := make([]int64, 0, len(msgs))
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := s.nowMS()
		for _, m := range msgs {
			var id int64
			if err := tx.QueryRowContext(ctx, `INSERT INTO inbox (folder, sender_jid, chat_jid, role, content, source, created_at)
				VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`, folder, m.SenderJID, m.ChatJID, m.Role, s.redact(m.Content), m.Source, now).Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: append inbox of %q: %w", folder, err)
	}
	return ids, nil
}

func pendingInbox(ctx context.Context, q querier, folder string, after int64, limit int) ([]InboxMessage, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, folder, sender_jid, chat_jid, role, content, source, created_at
		FROM inbox WHERE folder = ? AND id > ? AND dropped_at IS NULL ORDER BY id LIMIT ?`, folder, after, limitArg(limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []InboxMessage
	for rows.Next() {
		var m InboxMessage
		if err := rows.Scan(&m.ID, &m.Folder, &m.SenderJID, &m.ChatJID, &m.Role, &m.Content, &m.Source, &m.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// PendingInbox returns up to limit (0: all) of folder's messages past its
// cursor, oldest first. Messages of an open inbox run are pending until it
// finishes.
func (s *Store) PendingInbox(ctx context.Context, folder string, limit int) ([]InboxMessage, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: pending inbox of %q: %w", folder, err)
	}
	defer tx.Rollback()
	c, err := getCursor(ctx, tx, folder)
	if err != nil {
		return nil, fmt.Errorf("store: pending inbox of %q: %w", folder, err)
	}
	msgs, err := pendingInbox(ctx, tx, folder, c.LastDoneID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: pending inbox of %q: %w", folder, err)
	}
	return msgs, nil
}

// CreateInboxRun makes the next run over folder's inbox, atomically with the
// checks that make every message run at most once at a time: in one
// transaction it returns nil, nil (making nothing) when the folder is parked,
// its backoff has not elapsed, an inbox run of the folder is still queued or
// running, or no message is pending. Otherwise it passes up to limit (0: all)
// pending messages, oldest first, to build, and queues the run build returns,
// as CreateRun would, with InboxFirst and InboxLast set to the first and last
// message's ids and Attempt set to the cursor's Retries + 1. An error from
// build aborts the transaction and is returned.
//
// Together with FinishRun's cursor update this means: a message is covered by
// at most one open run; a crash before the commit leaves nothing behind and a
// crash after it leaves a queued run, never a second one.
func (s *Store) CreateInboxRun(ctx context.Context, folder string, limit int, build func(pending []InboxMessage) (Run, error)) (*Run, error) {
	if folder == "" {
		return nil, fmt.Errorf("store: create inbox run: folder: %w: empty", ErrInvalid)
	}
	var made *Run
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := s.nowMS()
		c, err := getCursor(ctx, tx, folder)
		if err != nil {
			return err
		}
		if c.Parked() || c.NextAttemptAt > now {
			return nil
		}
		var open int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs WHERE folder = ?
			AND inbox_last IS NOT NULL AND state IN ('queued', 'running')`, folder).Scan(&open); err != nil {
			return err
		}
		if open > 0 {
			return nil
		}
		pending, err := pendingInbox(ctx, tx, folder, c.LastDoneID, limit)
		if err != nil || len(pending) == 0 {
			return err
		}
		r, err := build(pending)
		if err != nil {
			return err
		}
		if r.Folder != "" && r.Folder != folder {
			return fmt.Errorf("run: folder: %w: %q is not %q", ErrInvalid, r.Folder, folder)
		}
		if r.Kind != "" && r.Kind != KindTurn {
			return fmt.Errorf("run: kind: %w: an inbox run is a turn, not %q", ErrInvalid, r.Kind)
		}
		r.Folder, r.Kind = folder, KindTurn
		r.InboxFirst, r.InboxLast = pending[0].ID, pending[len(pending)-1].ID
		r.Attempt = c.Retries + 1
		if err := checkNewRun(&r); err != nil {
			return err
		}
		if err := insertRun(ctx, tx, &r, now); err != nil {
			return err
		}
		made, err = getRun(ctx, tx, r.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: create inbox run for %q: %w", folder, err)
	}
	return made, nil
}

const cursorColumns = `folder, last_done_id, retries, last_error, next_attempt_at, parked_reason, parked_at, updated_at`

func scanCursor(row interface{ Scan(...any) error }) (Cursor, error) {
	var (
		c        Cursor
		parkedAt sql.NullInt64
	)
	err := row.Scan(&c.Folder, &c.LastDoneID, &c.Retries, &c.LastError, &c.NextAttemptAt, &c.ParkedReason, &parkedAt, &c.UpdatedAt)
	c.ParkedAt = parkedAt.Int64
	return c, err
}

// getCursor returns folder's cursor; a folder without one is at the start.
func getCursor(ctx context.Context, q querier, folder string) (Cursor, error) {
	c, err := scanCursor(q.QueryRowContext(ctx, `SELECT `+cursorColumns+` FROM cursors WHERE folder = ?`, folder))
	if errors.Is(err, sql.ErrNoRows) {
		return Cursor{Folder: folder}, nil
	}
	return c, err
}

// GetCursor returns folder's inbox cursor. A folder that never had one is at
// the start (LastDoneID 0); that is not an error.
func (s *Store) GetCursor(ctx context.Context, folder string) (Cursor, error) {
	c, err := getCursor(ctx, s.db, folder)
	if err != nil {
		return Cursor{}, fmt.Errorf("store: get cursor of %q: %w", folder, err)
	}
	return c, nil
}

// ListCursors returns every folder's cursor, by folder: where parked inboxes
// and their reasons are found.
func (s *Store) ListCursors(ctx context.Context) ([]Cursor, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+cursorColumns+` FROM cursors ORDER BY folder`)
	if err != nil {
		return nil, fmt.Errorf("store: list cursors: %w", err)
	}
	defer rows.Close()
	var out []Cursor
	for rows.Next() {
		c, err := scanCursor(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list cursors: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list cursors: %w", err)
	}
	return out, nil
}

// applyCursorUpdate applies u to folder's cursor; upTo is the last message id
// CursorAdvance marks handled. It returns the cursor as it now is.
func applyCursorUpdate(ctx context.Context, q querier, folder string, upTo int64, u CursorUpdate, now int64) (Cursor, error) {
	c, err := getCursor(ctx, q, folder)
	if err != nil {
		return Cursor{}, err
	}
	switch u.Op {
	case CursorNone:
		return c, nil
	case CursorAdvance:
		c.LastDoneID = max(c.LastDoneID, upTo)
		c.Retries, c.LastError, c.NextAttemptAt = 0, "", 0
	case CursorRetry:
		c.Retries++
		c.LastError = u.Reason
		if c.Retries > u.MaxRetries {
			c.ParkedReason = fmt.Sprintf("gave up after %d retries: %s", u.MaxRetries, u.Reason)
			c.ParkedAt, c.NextAttemptAt = now, 0
		} else {
			c.NextAttemptAt = now + u.Backoff.Milliseconds()
		}
	case CursorPark:
		c.LastError, c.ParkedReason, c.ParkedAt, c.NextAttemptAt = u.Reason, u.Reason, now, 0
	}
	c.UpdatedAt = now
	_, err = q.ExecContext(ctx, `INSERT INTO cursors (`+cursorColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (folder) DO UPDATE SET last_done_id = excluded.last_done_id, retries = excluded.retries,
		last_error = excluded.last_error, next_attempt_at = excluded.next_attempt_at,
		parked_reason = excluded.parked_reason, parked_at = excluded.parked_at, updated_at = excluded.updated_at`,
		c.Folder, c.LastDoneID, c.Retries, c.LastError, c.NextAttemptAt, c.ParkedReason, nullInt(c.ParkedAt), c.UpdatedAt)
	return c, err
}

// Unpark lets inbox runs of folder resume at once: it clears the parked
// reason, the retry count, the last error and any backoff. The pending
// messages are not touched.
func (s *Store) Unpark(ctx context.Context, folder string) (Cursor, error) {
	var c Cursor
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		c, err = getCursor(ctx, tx, folder)
		if err != nil {
			return err
		}
		if c.UpdatedAt == 0 {
			return nil // no cursor row: nothing to unpark
		}
		c.Retries, c.LastError, c.NextAttemptAt, c.ParkedReason, c.ParkedAt = 0, "", 0, "", 0
		c.UpdatedAt = s.nowMS()
		_, err = tx.ExecContext(ctx, `UPDATE cursors SET retries = 0, last_error = '', next_attempt_at = 0,
			parked_reason = '', parked_at = NULL, updated_at = ? WHERE folder = ?`, c.UpdatedAt, folder)
		return err
	})
	if err != nil {
		return Cursor{}, fmt.Errorf("store: unpark %q: %w", folder, err)
	}
	return c, nil
}

// PendingFolders lists, in name order, the folders whose inbox holds messages past their
// cursor that could be run now: not parked, no backoff pending, no inbox run open.
func (s *Store) PendingFolders(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `
SELECT DISTINCT i.folder FROM inbox i
LEFT JOIN cursors c ON c.folder = i.folder
WHERE i.id > COALESCE(c.last_done_id, 0)
  AND i.dropped_at IS NULL
  AND COALESCE(c.parked_reason, '') = ''
  AND COALESCE(c.next_attempt_at, 0) <= ?
  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.folder = i.folder AND r.inbox_first IS NOT NULL AND r.state IN ('queued', 'running'))
ORDER BY i.folder`, s.nowMS())
	if err != nil {
		return nil, fmt.Errorf("store: pending folders: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var f string
		if err := rows.Scan(&f); err != nil {
			return nil, fmt.Errorf("store: pending folders: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// Park stops inbox runs of folder until Unpark, showing reason. The queue parks through
// FinishRun; this is the same state for tests of what a parked folder looks like from the
// API and the command line.
func (s *Store) Park(ctx context.Context, folder, reason string) (Cursor, error) {
	c, err := s.updateCursor(ctx, folder, 0, CursorUpdate{Op: CursorPark, Reason: reason})
	if err != nil {
		return Cursor{}, fmt.Errorf("store: park %q: %w", folder, err)
	}
	return c, nil
}

// updateCursor applies u to folder's cursor in its own transaction.
func (s *Store) updateCursor(ctx context.Context, folder string, upTo int64, u CursorUpdate) (Cursor, error) {
	if folder == "" {
		return Cursor{}, fmt.Errorf("folder: %w: empty", ErrInvalid)
	}
	if err := checkCursorUpdate(u); err != nil {
		return Cursor{}, err
	}
	u.Reason = s.redact(u.Reason)
	var c Cursor
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		c, err = applyCursorUpdate(ctx, tx, folder, upTo, u, s.nowMS())
		return err
	})
	return c, err
}

// DropInbox drops folder's pending message id on the word of by (the operator): it is kept,
// with by and the time, and no turn gets it. The folder's retries, backoff and parked
// state, which were that message's, are cleared, so its next messages run. A message that
// is no pending one of folder is ErrNotFound; one an open inbox run answers, or dropped
// already, ErrConflict.
func (s *Store) DropInbox(ctx context.Context, folder string, id int64, by string) (Cursor, error) {
	var c Cursor
	err := s.write(ctx, func(tx *sql.Tx) error {
		cur, err := getCursor(ctx, tx, folder)
		if err != nil {
			return err
		}
		var dropped sql.NullInt64
		err = tx.QueryRowContext(ctx, `SELECT dropped_at FROM inbox WHERE folder = ? AND id = ? AND id > ?`, folder, id, cur.LastDoneID).Scan(&dropped)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("message %d: %w: no pending message of %s", id, ErrNotFound, folder)
		case err != nil:
			return err
		case dropped.Valid:
			return fmt.Errorf("message %d: %w: dropped already", id, ErrConflict)
		}
		var run string
		err = tx.QueryRowContext(ctx, `SELECT id FROM runs WHERE folder = ? AND state IN ('queued', 'running') AND ? BETWEEN inbox_first AND inbox_last`, folder, id).Scan(&run)
		switch {
		case err == nil:
			return fmt.Errorf("message %d: %w: run %s answers it; kill the run first", id, ErrConflict, run)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		now := s.nowMS()
		if _, err := tx.ExecContext(ctx, `UPDATE inbox SET dropped_at = ?, dropped_by = ? WHERE id = ?`, now, s.redact(by), id); err != nil {
			return err
		}
		c = cur
		c.Retries, c.LastError, c.NextAttemptAt, c.ParkedReason, c.ParkedAt, c.UpdatedAt = 0, "", 0, "", 0, now
		_, err = tx.ExecContext(ctx, `UPDATE cursors SET retries = 0, last_error = '', next_attempt_at = 0,
			parked_reason = '', parked_at = NULL, updated_at = ? WHERE folder = ?`, now, folder)
		return err
	})
	if err != nil {
		return Cursor{}, fmt.Errorf("store: drop inbox message of %q: %w", folder, err)
	}
	return c, nil
}
