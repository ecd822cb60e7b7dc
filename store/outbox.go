package store

import (
	"context"
	"database/sql"
	"fmt"
)

// OutboxKind says which tool put an item in the outbox.
type OutboxKind string

// Outbox kinds.
const (
	OutboxMessage  OutboxKind = "message"  // send_message
	OutboxReply    OutboxKind = "reply"    // send_reply
	OutboxDocument OutboxKind = "document" // send_document
)

// OutboxItem is something a group's agent sent out.
type OutboxItem struct {
	ID        int64 // increasing, assigned by the store
	Folder    string
	RunID     string // the run that sent it; "" if none
	Kind      OutboxKind
	Target    string // the chat JID or other destination
	Content   string
	DocPath   string // OutboxDocument only, and required there
	DocName   string // OutboxDocument only
	CreatedAt int64  // unix ms
}

// AppendOutbox stores it and returns it with ID and CreatedAt set. A RunID
// that names no run is ErrNotFound.
func (s *Store) AppendOutbox(ctx context.Context, it OutboxItem) (*OutboxItem, error) {
	switch {
	case it.Folder == "":
		return nil, fmt.Errorf("store: append outbox: folder: %w: empty", ErrInvalid)
	case it.Kind != OutboxMessage && it.Kind != OutboxReply && it.Kind != OutboxDocument:
		return nil, fmt.Errorf("store: append outbox: kind: %w: %q is not message, reply or document", ErrInvalid, it.Kind)
	case it.Kind == OutboxDocument && it.DocPath == "":
		return nil, fmt.Errorf("store: append outbox: doc path: %w: empty for a document", ErrInvalid)
	case it.Kind != OutboxDocument && (it.DocPath != "" || it.DocName != ""):
		return nil, fmt.Errorf("store: append outbox: doc path: %w: set for a %s", ErrInvalid, it.Kind)
	}
	it.Content = s.redact(it.Content)
	it.CreatedAt = s.nowMS()
	err := s.db.QueryRowContext(ctx, `INSERT INTO outbox (folder, run_id, kind, target, content, doc_path, doc_name, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, it.Folder, nullString(it.RunID), it.Kind, it.Target, it.Content,
		nullString(it.DocPath), nullString(it.DocName), it.CreatedAt).Scan(&it.ID)
	if isForeignKeyViolation(err) {
		return nil, fmt.Errorf("store: append outbox: run %q: %w", it.RunID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: append outbox of %q: %w", it.Folder, err)
	}
	return &it, nil
}

// ListOutbox returns up to limit (0: all) of folder's outbox items with ids
// above sinceID, oldest first.
func (s *Store) ListOutbox(ctx context.Context, folder string, sinceID int64, limit int) ([]OutboxItem, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, folder, run_id, kind, target, content, doc_path, doc_name, created_at
		FROM outbox WHERE folder = ? AND id > ? ORDER BY id LIMIT ?`, folder, sinceID, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("store: list outbox of %q: %w", folder, err)
	}
	defer rows.Close()
	var out []OutboxItem
	for rows.Next() {
		var (
			it                    OutboxItem
			runID, docPath, docNm sql.NullString
		)
		if err := rows.Scan(&it.ID, &it.Folder, &runID, &it.Kind, &it.Target, &it.Content, &docPath, &docNm, &it.CreatedAt); err != nil {
			return nil, fmt.Errorf("store: list outbox of %q: %w", folder, err)
		}
		it.RunID, it.DocPath, it.DocName = runID.String, docPath.String, docNm.String
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list outbox of %q: %w", folder, err)
	}
	return out, nil
}
