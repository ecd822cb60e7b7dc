package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Project is the git repository a group works on (package project gives it meaning).
// Repo is the repository's real path on the host, as the operator's path resolved.
type Project struct {
	Folder    string
	Repo      string
	CreatedAt int64 // unix ms
}

// SetProject gives folder's group the repository repo, replacing the one it had. With
// branch not empty it records that arizukod made branch in repo for folder (BranchOwner),
// in the same write. A folder that is no registered group is ErrNotFound.
func (s *Store) SetProject(ctx context.Context, folder, repo, branch string) error {
	if folder == "" || repo == "" {
		return fmt.Errorf("store: set project: folder and repo: %w: empty", ErrInvalid)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := s.nowMS()
		_, err := tx.ExecContext(ctx, `INSERT INTO group_projects (folder, repo, created_at) VALUES (?, ?, ?)
			ON CONFLICT (folder) DO UPDATE SET repo = excluded.repo, created_at = excluded.created_at`, folder, repo, now)
		if isForeignKeyViolation(err) {
			return fmt.Errorf("group %q: %w", folder, ErrNotFound)
		}
		if err != nil || branch == "" {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO project_branches (repo, branch, folder, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (repo, branch) DO NOTHING`, repo, branch, folder, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: set project of %q: %w", folder, err)
	}
	return nil
}

// GetProject is folder's project, or ErrNotFound.
func (s *Store) GetProject(ctx context.Context, folder string) (Project, error) {
	p := Project{Folder: folder}
	err := s.db.QueryRowContext(ctx, `SELECT repo, created_at FROM group_projects WHERE folder = ?`, folder).Scan(&p.Repo, &p.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return p, fmt.Errorf("store: project of %q: %w", folder, ErrNotFound)
	}
	if err != nil {
		return p, fmt.Errorf("store: get project of %q: %w", folder, err)
	}
	return p, nil
}

// ClearProject takes folder's project away (its branches stay recorded), or is
// ErrNotFound when it has none.
func (s *Store) ClearProject(ctx context.Context, folder string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM group_projects WHERE folder = ?`, folder)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fmt.Errorf("project: %w", ErrNotFound))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: clear project of %q: %w", folder, err)
	}
	return nil
}

// BranchOwner is the folder arizukod made branch in repo for, or ErrNotFound when it made
// no such branch.
func (s *Store) BranchOwner(ctx context.Context, repo, branch string) (string, error) {
	var folder string
	err := s.db.QueryRowContext(ctx, `SELECT folder FROM project_branches WHERE repo = ? AND branch = ?`, repo, branch).Scan(&folder)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("store: branch %s of %s: %w", branch, repo, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("store: branch %s of %s: %w", branch, repo, err)
	}
	return folder, nil
}

// RunningRuns are the ids of folder's runs that are running now.
func (s *Store) RunningRuns(ctx context.Context, folder string) ([]string, error) {
	ids, err := queryColumn[string](ctx, s.db, `SELECT id FROM runs WHERE folder = ? AND state = 'running' ORDER BY seq`, folder)
	if err != nil {
		return nil, fmt.Errorf("store: running runs of %q: %w", folder, err)
	}
	return ids, nil
}
