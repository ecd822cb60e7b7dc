package store

import (
	"context"
	"database/sql"
	"fmt"
)

// Route delivers inbound chat messages that its Match expression matches to
// the Target folder's inbox. Routes are tried in (Seq, ID) order, in layers by
// Owner: the operator's first, then those of the group a message reached. The
// store keeps Match verbatim; package ipc parses and evaluates it.
type Route struct {
	ID        int64 // assigned by the store
	Seq       int64
	Match     string // "key=glob ..." terms; "" matches every message
	Target    string // folder
	Owner     string // "" for the operator's routes, else the folder of the group that added it
	CreatedAt int64  // unix ms
}

const routeColumns = `id, seq, match, target, owner, created_at`

func queryRoutes(ctx context.Context, q querier, query string, args ...any) ([]Route, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Route
	for rows.Next() {
		var r Route
		if err := rows.Scan(&r.ID, &r.Seq, &r.Match, &r.Target, &r.Owner, &r.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func insertRoute(ctx context.Context, q querier, r *Route, now int64) error {
	r.CreatedAt = now
	return q.QueryRowContext(ctx, `INSERT INTO routes (seq, match, target, owner, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id`,
		r.Seq, r.Match, r.Target, r.Owner, now).Scan(&r.ID)
}

// ListRoutes returns every route in matching order (Seq, then ID).
func (s *Store) ListRoutes(ctx context.Context) ([]Route, error) {
	rs, err := queryRoutes(ctx, s.db, `SELECT `+routeColumns+` FROM routes ORDER BY seq, id`)
	if err != nil {
		return nil, fmt.Errorf("store: list routes: %w", err)
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

// ReplaceOwnedRoutes atomically replaces the routes owner added whose target
// is owner or a descendant of it with routes, which get owner as their Owner,
// and returns the new ones (IDs assigned). Every other route is untouched: the
// operator's, other groups', and owner's own routes to folders outside its
// subtree. Every new route must target owner or a descendant, or the call is
// ErrInvalid and nothing changes. owner must not be empty: the operator's
// routes are not replaced this way.
func (s *Store) ReplaceOwnedRoutes(ctx context.Context, owner string, routes []Route) ([]Route, error) {
	if owner == "" {
		return nil, fmt.Errorf("store: replace routes: owner: %w: empty", ErrInvalid)
	}
	for i, r := range routes {
		if !under(r.Target, owner) {
			return nil, fmt.Errorf("store: replace routes of %q: routes[%d].target: %w: %q is not %q or below it", owner, i, ErrInvalid, r.Target, owner)
		}
	}
	out := make([]Route, len(routes))
	copy(out, routes)
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM routes WHERE owner = ? AND `+underClause("target"), append([]any{owner}, underArgs(owner)...)...); err != nil {
			return err
		}
		now := s.nowMS()
		for i := range out {
			out[i].Owner = owner
			if err := insertRoute(ctx, tx, &out[i], now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: replace routes of %q: %w", owner, err)
	}
	return out, nil
}

// under reports whether target is folder or one of its descendants; the Go
// twin of underClause.
func under(target, folder string) bool {
	return target == folder || len(target) > len(folder) && target[:len(folder)] == folder && target[len(folder)] == '/'
}
