package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// Group is a registered group. Folder is the group's folder name (validated
// by package groupfolder, not here); Parent is "" for a root group.
type Group struct {
	Folder      string
	Parent      string
	Name        string
	Description string
	// ContainerConfig is the group's container configuration as a JSON
	// object (additional_mounts, timeout, network, memory, cpus, pids,
	// sidecars). The store keeps it verbatim; its readers give it meaning.
	ContainerConfig json.RawMessage
	CreatedAt       int64 // unix ms
	UpdatedAt       int64 // unix ms
}

const groupColumns = `folder, parent, name, description, container_config, created_at, updated_at`

func scanGroup(row interface{ Scan(...any) error }) (*Group, error) {
	var (
		g      Group
		parent sql.NullString
		config string
	)
	if err := row.Scan(&g.Folder, &parent, &g.Name, &g.Description, &config, &g.CreatedAt, &g.UpdatedAt); err != nil {
		return nil, err
	}
	g.Parent = parent.String
	g.ContainerConfig = json.RawMessage(config)
	return &g, nil
}

func getGroup(ctx context.Context, q querier, folder string) (*Group, error) {
	g, err := scanGroup(q.QueryRowContext(ctx, `SELECT `+groupColumns+` FROM groups WHERE folder = ?`, folder))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("group %q: %w", folder, ErrNotFound)
	}
	return g, err
}

// checkGroup validates g for op ("create", "upsert") and makes an empty
// ContainerConfig {}.
func checkGroup(op string, g *Group) error {
	switch {
	case g.Folder == "":
		return fmt.Errorf("store: %s group: folder: %w: empty", op, ErrInvalid)
	case g.Parent == g.Folder:
		return fmt.Errorf("store: %s group %q: parent: %w: a group cannot be its own parent", op, g.Folder, ErrInvalid)
	}
	if len(g.ContainerConfig) == 0 {
		g.ContainerConfig = json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(g.ContainerConfig, &obj); err != nil || obj == nil {
		return fmt.Errorf("store: %s group %q: container_config: %w: not a JSON object", op, g.Folder, ErrInvalid)
	}
	return nil
}

// CreateGroup registers g, in one write that leaves a group already
// registered for g.Folder as it is: that is ErrConflict. An empty
// ContainerConfig is stored as {}; any other must be a JSON object. A Parent
// that is not registered is ErrNotFound.
func (s *Store) CreateGroup(ctx context.Context, g Group) (*Group, error) {
	if err := checkGroup("create", &g); err != nil {
		return nil, err
	}
	var out *Group
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := s.nowMS()
		res, err := tx.ExecContext(ctx, `INSERT INTO groups (`+groupColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (folder) DO NOTHING`,
			g.Folder, nullString(g.Parent), g.Name, g.Description, string(g.ContainerConfig), now, now)
		if isForeignKeyViolation(err) {
			return fmt.Errorf("parent group %q: %w", g.Parent, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmp.Or(err, fmt.Errorf("%w: the group is already registered", ErrConflict))
		}
		out, err = getGroup(ctx, tx, g.Folder)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: create group %q: %w", g.Folder, err)
	}
	return out, nil
}

// UpsertGroup registers g or updates the registered group of g.Folder,
// keeping its CreatedAt. An empty ContainerConfig is stored as {}; any other
// must be a JSON object. A Parent that is not registered is ErrNotFound.
func (s *Store) UpsertGroup(ctx context.Context, g Group) (*Group, error) {
	if err := checkGroup("upsert", &g); err != nil {
		return nil, err
	}
	var out *Group
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := s.nowMS()
		_, err := tx.ExecContext(ctx, `INSERT INTO groups (`+groupColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (folder) DO UPDATE SET parent = excluded.parent, name = excluded.name,
			description = excluded.description, container_config = excluded.container_config,
			updated_at = excluded.updated_at`,
			g.Folder, nullString(g.Parent), g.Name, g.Description, string(g.ContainerConfig), now, now)
		if isForeignKeyViolation(err) {
			return fmt.Errorf("parent group %q: %w", g.Parent, ErrNotFound)
		}
		if err != nil {
			return err
		}
		out, err = getGroup(ctx, tx, g.Folder)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: upsert group %q: %w", g.Folder, err)
	}
	return out, nil
}

// GetGroup returns the group registered for folder, or ErrNotFound.
func (s *Store) GetGroup(ctx context.Context, folder string) (*Group, error) {
	g, err := getGroup(ctx, s.db, folder)
	if err != nil {
		return nil, fmt.Errorf("store: get %w", err)
	}
	return g, nil
}

// ListGroups returns every registered group, by folder.
func (s *Store) ListGroups(ctx context.Context) ([]Group, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+groupColumns+` FROM groups ORDER BY folder`)
	if err != nil {
		return nil, fmt.Errorf("store: list groups: %w", err)
	}
	defer rows.Close()
	var out []Group
	for rows.Next() {
		g, err := scanGroup(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list groups: %w", err)
		}
		out = append(out, *g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list groups: %w", err)
	}
	return out, nil
}

func setSession(ctx context.Context, q querier, folder, sessionID string, now int64) error {
	_, err := q.ExecContext(ctx, `INSERT INTO sessions (folder, session_id, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (folder) DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at`,
		folder, sessionID, now)
	return err
}

// GetSession returns folder's agent session id, "" when it has none.
func (s *Store) GetSession(ctx context.Context, folder string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT session_id FROM sessions WHERE folder = ?`, folder).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: get session of %q: %w", folder, err)
	}
	return id, nil
}

// SetSession makes sessionID (not empty) folder's agent session id.
func (s *Store) SetSession(ctx context.Context, folder, sessionID string) error {
	switch {
	case folder == "":
		return fmt.Errorf("store: set session: folder: %w: empty", ErrInvalid)
	case sessionID == "":
		return fmt.Errorf("store: set session of %q: session id: %w: empty (use ClearSession)", folder, ErrInvalid)
	}
	if err := setSession(ctx, s.db, folder, s.redact(sessionID), s.nowMS()); err != nil {
		return fmt.Errorf("store: set session of %q: %w", folder, err)
	}
	return nil
}

// ClearSession forgets folder's agent session, so its next turn starts a new
// one. It also wins over the folder's running turn (the one that usually asks
// for it): the session id that turn ends with is not saved (see FinishRun).
// Clearing a folder without a session is not an error.
func (s *Store) ClearSession(ctx context.Context, folder string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE folder = ?`, folder); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE runs SET session_cleared = 1 WHERE folder = ? AND state = 'running'`, folder)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: clear session of %q: %w", folder, err)
	}
	return nil
}

// SetGrants replaces folder's grant rules, in order, atomically. The rules
// are kept verbatim (package ipc parses them); none may be empty. An empty
// list is stored as such: the folder then has no rules, which is not the
// same as never having had any (see GetGrants).
func (s *Store) SetGrants(ctx context.Context, folder string, rules []string) error {
	if folder == "" {
		return fmt.Errorf("store: set grants: folder: %w: empty", ErrInvalid)
	}
	for i, r := range rules {
		if r == "" {
			return fmt.Errorf("store: set grants of %q: rules[%d]: %w: empty", folder, i, ErrInvalid)
		}
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM grants WHERE folder = ?`, folder); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO grant_sets (folder, updated_at) VALUES (?, ?)
			ON CONFLICT (folder) DO UPDATE SET updated_at = excluded.updated_at`, folder, s.nowMS()); err != nil {
			return err
		}
		for i, r := range rules {
			if _, err := tx.ExecContext(ctx, `INSERT INTO grants (folder, seq, rule) VALUES (?, ?, ?)`, folder, i, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: set grants of %q: %w", folder, err)
	}
	return nil
}

// GetGrants returns folder's grant rules in order: ErrNotFound when they were
// never set (or were cleared), so the caller applies its defaults, and an
// empty, non-nil slice when they were set to none.
func (s *Store) GetGrants(ctx context.Context, folder string) ([]string, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: get grants of %q: %w", folder, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM grant_sets WHERE folder = ?`, folder).Scan(&n); err != nil {
		return nil, fmt.Errorf("store: get grants of %q: %w", folder, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("store: grants of %q: %w", folder, ErrNotFound)
	}
	rows, err := tx.QueryContext(ctx, `SELECT rule FROM grants WHERE folder = ? ORDER BY seq`, folder)
	if err != nil {
		return nil, fmt.Errorf("store: get grants of %q: %w", folder, err)
	}
	defer rows.Close()
	rules := []string{}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			return nil, fmt.Errorf("store: get grants of %q: %w", folder, err)
		}
		rules = append(rules, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: get grants of %q: %w", folder, err)
	}
	return rules, nil
}

// ClearGrants forgets folder's grant rules, so GetGrants reports ErrNotFound
// (defaults apply) again. Clearing a folder without rules is not an error.
func (s *Store) ClearGrants(ctx context.Context, folder string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM grant_sets WHERE folder = ?`, folder); err != nil {
		return fmt.Errorf("store: clear grants of %q: %w", folder, err)
	}
	return nil
}
