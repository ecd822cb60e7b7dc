package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// GroupRemoval is what removing a group does (RemoveGroup) or would do (PlanGroupRemoval).
// A group with Descendants or OpenRuns is not removed: they block it (Blocked).
type GroupRemoval struct {
	Folder string
	// Descendants are the registered groups below it; each is removed first.
	Descendants []string
	// OpenRuns are its queued and running runs; each is killed, or ends, first.
	OpenRuns []string
	// Runs is how many of its runs ended: they are kept, as history, until retention
	// prunes them.
	Runs int
	// Pending are the ids of its inbox messages no turn answered yet: dropped (kept, marked
	// dropped with who and when) and given to no turn.
	Pending []int64
	// Routes are the ids of the routes that target it or that it added: deleted.
	Routes []int64
	// Tasks are the ids of its scheduled tasks: deleted, so they fire no more.
	Tasks []string
	// Outbox is how many of its outbound messages are not delivered yet: kept and
	// delivered as usual.
	Outbox int
}

// Blocked says why the group cannot be removed now, or "" when it can.
func (g *GroupRemoval) Blocked() string {
	var why []string
	if len(g.Descendants) > 0 {
		why = append(why, fmt.Sprintf("it has groups below it (%s): remove them first", strings.Join(g.Descendants, ", ")))
	}
	if len(g.OpenRuns) > 0 {
		why = append(why, fmt.Sprintf("runs of it are queued or running (%s): kill them or let them end first", strings.Join(g.OpenRuns, ", ")))
	}
	return strings.Join(why, "; ")
}

// PlanGroupRemoval says what RemoveGroup(folder) would do now, removing nothing. An
// unregistered folder is ErrNotFound.
func (s *Store) PlanGroupRemoval(ctx context.Context, folder string) (*GroupRemoval, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: plan removal of group %q: %w", folder, err)
	}
	defer tx.Rollback()
	g, err := planGroupRemoval(ctx, tx, folder)
	if err != nil {
		return nil, fmt.Errorf("store: plan removal of group %q: %w", folder, err)
	}
	return g, nil
}

// RemoveGroup removes the registered group folder on the word of by (the operator), in one
// write, as the returned GroupRemoval says: its registration, grants, session and inbox
// cursor go, its pending inbox messages are dropped, its routes and tasks deleted; its
// ended runs and its outbox stay. A group that has descendants or open runs is ErrConflict
// and nothing changes (the returned GroupRemoval says why: Blocked); an unregistered
// folder is ErrNotFound. The store holds no file: the group's directories are the
// caller's to keep or remove.
func (s *Store) RemoveGroup(ctx context.Context, folder, by string) (*GroupRemoval, error) {
	var g *GroupRemoval
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if g, err = planGroupRemoval(ctx, tx, folder); err != nil {
			return err
		}
		if why := g.Blocked(); why != "" {
			return fmt.Errorf("%w: %s", ErrConflict, why)
		}
		now := s.nowMS()
		for _, q := range []struct {
			query string
			args  []any
		}{
			{`UPDATE inbox SET dropped_at = ?, dropped_by = ? WHERE folder = ? AND id > COALESCE((SELECT last_done_id FROM cursors WHERE folder = ?), 0) AND dropped_at IS NULL`,
				[]any{now, s.redact(by), folder, folder}},
			{`DELETE FROM routes WHERE target = ? OR owner = ?`, []any{folder, folder}},
			{`DELETE FROM tasks WHERE folder = ?`, []any{folder}},
			{`DELETE FROM grant_sets WHERE folder = ?`, []any{folder}},
			{`DELETE FROM sessions WHERE folder = ?`, []any{folder}},
			{`DELETE FROM cursors WHERE folder = ?`, []any{folder}},
			{`DELETE FROM groups WHERE folder = ?`, []any{folder}},
		} {
			if _, err := tx.ExecContext(ctx, q.query, q.args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, ErrConflict) {
			g = nil
		}
		return g, fmt.Errorf("store: remove group %q: %w", folder, err)
	}
	return g, nil
}

func planGroupRemoval(ctx context.Context, q querier, folder string) (*GroupRemoval, error) {
	if _, err := getGroup(ctx, q, folder); err != nil {
		return nil, err
	}
	g := &GroupRemoval{Folder: folder}
	var err error
	if g.Descendants, err = queryColumn[string](ctx, q, `SELECT folder FROM groups WHERE substr(folder, 1, length(?) + 1) = ? || '/' ORDER BY folder`, folder, folder); err != nil {
		return nil, err
	}
	if g.OpenRuns, err = queryColumn[string](ctx, q, `SELECT id FROM runs WHERE folder = ? AND state IN ('queued', 'running') ORDER BY seq`, folder); err != nil {
		return nil, err
	}
	if g.Tasks, err = queryColumn[string](ctx, q, `SELECT id FROM tasks WHERE folder = ? ORDER BY id`, folder); err != nil {
		return nil, err
	}
	if g.Pending, err = queryColumn[int64](ctx, q, `SELECT id FROM inbox WHERE folder = ? AND dropped_at IS NULL
		AND id > COALESCE((SELECT last_done_id FROM cursors WHERE folder = ?), 0) ORDER BY id`, folder, folder); err != nil {
		return nil, err
	}
	if g.Routes, err = queryColumn[int64](ctx, q, `SELECT id FROM routes WHERE target = ? OR owner = ? ORDER BY id`, folder, folder); err != nil {
		return nil, err
	}
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE folder = ? AND state NOT IN ('queued', 'running')`, folder).Scan(&g.Runs); err != nil {
		return nil, err
	}
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE folder = ? AND state <> 'delivered'`, folder).Scan(&g.Outbox); err != nil {
		return nil, err
	}
	return g, nil
}

// queryColumn is the one column of query's rows; [] when there are none.
func queryColumn[T any](ctx context.Context, q querier, query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
