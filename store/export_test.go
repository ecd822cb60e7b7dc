package store

// Methods only tests call: they set up or inspect states that the daemon reaches through
// other paths (FinishRun, the queue), so they are not part of the store's API.

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// AdvanceCursor marks folder's messages up to toID handled, outside any run
// (an operator skipping them, say). The cursor never moves back. toID must be
// the id of one of folder's inbox messages (ErrInvalid), and no inbox run of
// the folder may be open (ErrConflict): that run's FinishRun moves the cursor.
func (s *Store) AdvanceCursor(ctx context.Context, folder string, toID int64) (Cursor, error) {
	var c Cursor
	err := s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM inbox WHERE folder = ? AND id = ?`, folder, toID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("to id: %w: %d is not a message of %q", ErrInvalid, toID, folder)
		}
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs WHERE folder = ?
			AND inbox_last IS NOT NULL AND state IN ('queued', 'running')`, folder).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: an inbox run of %q is open", ErrConflict, folder)
		}
		var err error
		c, err = applyCursorUpdate(ctx, tx, folder, toID, CursorUpdate{Op: CursorAdvance}, s.nowMS())
		return err
	})
	if err != nil {
		return Cursor{}, fmt.Errorf("store: advance cursor of %q: %w", folder, err)
	}
	return c, nil
}

// RecordFailure is CursorRetry outside FinishRun: it counts a failed attempt
// at folder's pending messages, records reason, and delays the next attempt
// by backoff, or parks the folder once Retries exceeds maxRetries.
func (s *Store) RecordFailure(ctx context.Context, folder, reason string, backoff time.Duration, maxRetries int) (Cursor, error) {
	c, err := s.updateCursor(ctx, folder, 0, CursorUpdate{Op: CursorRetry, Reason: reason, Backoff: backoff, MaxRetries: maxRetries})
	if err != nil {
		return Cursor{}, fmt.Errorf("store: record failure of %q: %w", folder, err)
	}
	return c, nil
}

// DeleteGroup removes folder's registration: ErrNotFound if there is none,
// ErrConflict while groups name it as their parent. Its runs, inbox, session,
// grants, routes and tasks are kept.
func (s *Store) DeleteGroup(ctx context.Context, folder string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM groups WHERE folder = ?`, folder)
		if isForeignKeyViolation(err) {
			return fmt.Errorf("group %q: %w: it has child groups", folder, ErrConflict)
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("group %q: %w", folder, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: delete %w", err)
	}
	return nil
}

// DeleteTask deletes the task with the given id, or reports ErrNotFound. Its
// runs are kept and still name it.
func (s *Store) DeleteTask(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM tasks WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: delete task %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: task %q: %w", id, ErrNotFound)
	}
	return nil
}
