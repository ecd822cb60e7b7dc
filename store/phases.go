package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// Phases are how long the parts of a run's turn took, in milliseconds (turn.Phases): the
// wait in the queue is the run's StartedAt less its CreatedAt.
type Phases struct {
	PrepareMS  int64 `json:"prepare"`
	SidecarsMS int64 `json:"sidecars"`
	CreateMS   int64 `json:"create"`
	StartMS    int64 `json:"start"`
	RunMS      int64 `json:"run"`
	FinishMS   int64 `json:"finish"`
}

// SetPhases records the phases of the run's turn, replacing an earlier attempt's.
func (s *Store) SetPhases(ctx context.Context, id string, p Phases) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("store: phases of run %q: %w", id, err)
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET phases = ? WHERE id = ?`, string(b), id)
		if err != nil {
			return fmt.Errorf("store: phases of run %q: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: phases of run %q: %w", id, ErrNotFound)
		}
		return nil
	})
}

// RunPhases is what SetPhases recorded for the run; nil when nothing was.
func (s *Store) RunPhases(ctx context.Context, id string) (*Phases, error) {
	var text string
	err := s.db.QueryRowContext(ctx, `SELECT phases FROM runs WHERE id = ?`, id).Scan(&text)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("store: phases of run %q: %w", id, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("store: phases of run %q: %w", id, err)
	case text == "":
		return nil, nil
	}
	var p Phases
	if err := json.Unmarshal([]byte(text), &p); err != nil {
		return nil, fmt.Errorf("store: phases of run %q: %w", id, err)
	}
	return &p, nil
}
