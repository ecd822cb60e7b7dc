package store

import (
	"context"
	"database/sql"
	"fmt"
)

// Route delivers inbound chat messages that its Match expression matches to
// the Target folder's inbox. Routes are tried in (Seq, ID) order. The store
// keeps Match verbatim; package ipc parses and evaluates it.
type Route struct {
	ID        int64 // assigned by the store
	Seq       int64
	Match     string // "key=glob ..." terms; "" matches every message
	Target    string // folder
	CreatedAt int64  // unix ms
}

const routeColumns = `id, seq, match, target, created_at`

func queryRoutes(ctx context.Context, q querier, query string, args ...any) ([]Route, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Route
	for rows.Next() {
		var r Route
		if err := rows.Scan(&r.ID, &r.Seq, &r.Match, &r.Target, &r.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func insertRoute(ctx context.Context, q querier, r *Route, now int64) error {
	r.CreatedAt = now
	return q.QueryRowContext(ctx, `INSERT INTO routes (seq, match, target, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
		r.Seq, r.Match, r.Target, now).Scan(&r.ID)
}

// ListRoutes returns every route in matching order (Seq, then ID).
func (s *Store) ListRoutes(ctx context.Context) ([]Route, error) {
	rs, err := queryRoutes(ctx, s.db, `SELECT `+routeColumns+` FROM routes ORDER BY seq, id`)
	if err != nil {
		return nil, fmt.Errorf("store: list routes: %w", err)
	}
	return rs, nil
}

// ListRoutesUnder returns, in matching order, the routes whose target is
// folder or one of its descendants (a target beginning with folder + "/").
func (s *Store) ListRoutesUnder(ctx context.Context, folder string) ([]Route, error) {
	rs, err := queryRoutes(ctx, s.db, `SELECT `+routeColumns+` FROM routes WHERE `+underClause("target")+` ORDER BY seq, id`, underArgs(folder)...)
	if err != nil {
		return nil, fmt.Errorf("store: list routes under %q: %w", folder, err)
	}
	return rs, nil
}

// GetRoute returns the route with the given id, or ErrNotFound.
func (s *Store) GetRoute(ctx context.Context, id int64) (*Route, error) {
	rs, err := queryRoutes(ctx, s.db, `SELECT `+routeColumns+` FROM routes WHERE id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("store: get route %d: %w", id, err)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("store: route %d: %w", id, ErrNotFound)
	}
	return &rs[0], nil
}

// AddRoute adds r (its ID and CreatedAt are assigned) and returns it.
func (s *Store) AddRoute(ctx context.Context, r Route) (*Route, error) {
	if r.Target == "" {
		return nil, fmt.Errorf("store: add route: target: %w: empty", ErrInvalid)
	}
	if err := insertRoute(ctx, s.db, &r, s.nowMS()); err != nil {
		return nil, fmt.Errorf("store: add route: %w", err)
	}
	return &r, nil
}

// DeleteRoute deletes the route with the given id, or reports ErrNotFound.
func (s *Store) DeleteRoute(ctx context.Context, id int64) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM routes WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: delete route %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: route %d: %w", id, ErrNotFound)
	}
	return nil
}

// ReplaceRoutesUnder atomically replaces the routes whose target is folder or
// a descendant of it with routes, and returns the new ones (IDs assigned);
// other routes are untouched. Every new route must target folder or a
// descendant, or the call is ErrInvalid and nothing changes: a route set here
// must stay visible and replaceable from here.
func (s *Store) ReplaceRoutesUnder(ctx context.Context, folder string, routes []Route) ([]Route, error) {
	if folder == "" {
		return nil, fmt.Errorf("store: replace routes: folder: %w: empty", ErrInvalid)
	}
	for i, r := range routes {
		if !under(r.Target, folder) {
			return nil, fmt.Errorf("store: replace routes under %q: routes[%d].target: %w: %q is not %q or below it", folder, i, ErrInvalid, r.Target, folder)
		}
	}
	out := make([]Route, len(routes))
	copy(out, routes)
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM routes WHERE `+underClause("target"), underArgs(folder)...); err != nil {
			return err
		}
		now := s.nowMS()
		for i := range out {
			if err := insertRoute(ctx, tx, &out[i], now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: replace routes under %q: %w", folder, err)
	}
	return out, nil
}

// under reports whether target is folder or one of its descendants; the Go
// twin of underClause.
func under(target, folder string) bool {
	return target == folder || len(target) > len(folder) && target[:len(folder)] == folder && target[len(folder)] == '/'
}
