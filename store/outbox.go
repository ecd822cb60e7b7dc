package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// OutboxKind says what put an item in the outbox.
type OutboxKind string

// Outbox kinds.
const (
	OutboxMessage  OutboxKind = "message"  // send_message
	OutboxReply    OutboxKind = "reply"    // send_reply
	OutboxDocument OutboxKind = "document" // send_document
	OutboxResult   OutboxKind = "result"   // the final answer of an inbox turn (FinishRun)
	OutboxNotice   OutboxKind = "notice"   // a short note to the chat: the folder parked, a budget reached
)

func (k OutboxKind) valid() bool {
	switch k {
	case OutboxMessage, OutboxReply, OutboxDocument, OutboxResult, OutboxNotice:
		return true
	}
	return false
}

// OutboxState is where an outbox item is in its delivery.
type OutboxState string

// Outbox states.
const (
	OutboxPending   OutboxState = "pending"   // not yet acknowledged by a consumer
	OutboxDelivered OutboxState = "delivered" // acknowledged (AckOutbox)
	OutboxParked    OutboxState = "parked"    // failed too often; LastError says why, RetryOutbox resumes it
)

// OutboxItem is something a group's agent (or, for results and notices, its turn) sent out,
// with its delivery state.
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
	// Platform is Target's part before its first ':' ("" without one), set by the store.
	Platform    string
	State       OutboxState
	Attempts    int    // how often it was handed out (LeaseOutbox) since it was last made pending
	LeaseUntil  int64  // unix ms: hidden from leases until then; 0 when free
	LastError   string // the last failure a consumer reported, or why it was parked
	DeliveredAt int64  // unix ms; 0 until acknowledged
}

// platformOf is the part of a target before its first ':'.
func platformOf(target string) string {
	if p, _, ok := strings.Cut(target, ":"); ok {
		return p
	}
	return ""
}

// AppendOutbox stores it as pending and returns it with ID, CreatedAt and Platform set,
// waking the waiters it could match (WaitOutbox). A RunID that names no run is ErrNotFound.
func (s *Store) AppendOutbox(ctx context.Context, it OutboxItem) (*OutboxItem, error) {
	out, err := appendOutbox(ctx, s.db, it, s.nowMS(), s.redact)
	if err != nil {
		return nil, fmt.Errorf("store: append outbox: %w", err)
	}
	s.outbox.notify(true, *out)
	return out, nil
}

func appendOutbox(ctx context.Context, q querier, it OutboxItem, now int64, redact func(string) string) (*OutboxItem, error) {
	switch {
	case it.Folder == "":
		return nil, fmt.Errorf("folder: %w: empty", ErrInvalid)
	case !it.Kind.valid():
		return nil, fmt.Errorf("kind: %w: %q is not message, reply, document, result or notice", ErrInvalid, it.Kind)
	case it.Kind == OutboxDocument && it.DocPath == "":
		return nil, fmt.Errorf("doc path: %w: empty for a document", ErrInvalid)
	case it.Kind != OutboxDocument && (it.DocPath != "" || it.DocName != ""):
		return nil, fmt.Errorf("doc path: %w: set for a %s", ErrInvalid, it.Kind)
	}
	it.Content = redact(it.Content)
	it.CreatedAt = now
	it.Platform = platformOf(it.Target)
	it.State, it.Attempts, it.LeaseUntil, it.LastError, it.DeliveredAt = OutboxPending, 0, 0, "", 0
	err := q.QueryRowContext(ctx, `INSERT INTO outbox (folder, run_id, kind, target, content, doc_path, doc_name, created_at, platform)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, it.Folder, nullString(it.RunID), it.Kind, it.Target, it.Content,
		nullString(it.DocPath), nullString(it.DocName), it.CreatedAt, it.Platform).Scan(&it.ID)
	if isForeignKeyViolation(err) {
		return nil, fmt.Errorf("run %q: %w", it.RunID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("of %q: %w", it.Folder, err)
	}
	return &it, nil
}

const outboxColumns = `id, folder, run_id, kind, target, content, doc_path, doc_name, created_at,
	platform, state, attempts, lease_until, last_error, delivered_at`

// scanOutbox reads a row of outboxColumns, followed by the columns of more, if any.
func scanOutbox(row interface{ Scan(...any) error }, more ...any) (OutboxItem, error) {
	var (
		it                    OutboxItem
		runID, docPath, docNm sql.NullString
		deliveredAt           sql.NullInt64
	)
	err := row.Scan(append([]any{&it.ID, &it.Folder, &runID, &it.Kind, &it.Target, &it.Content, &docPath, &docNm, &it.CreatedAt,
		&it.Platform, &it.State, &it.Attempts, &it.LeaseUntil, &it.LastError, &deliveredAt}, more...)...)
	it.RunID, it.DocPath, it.DocName, it.DeliveredAt = runID.String, docPath.String, docNm.String, deliveredAt.Int64
	return it, err
}

func queryOutbox(ctx context.Context, q querier, query string, args ...any) ([]OutboxItem, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []OutboxItem
	for rows.Next() {
		it, err := scanOutbox(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// ListOutbox returns up to limit (0: all) of folder's outbox items with ids
// above sinceID, oldest first, whatever their delivery state.
func (s *Store) ListOutbox(ctx context.Context, folder string, sinceID int64, limit int) ([]OutboxItem, error) {
	out, err := queryOutbox(ctx, s.db, `SELECT `+outboxColumns+` FROM outbox WHERE folder = ? AND id > ? ORDER BY id LIMIT ?`,
		folder, sinceID, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("store: list outbox of %q: %w", folder, err)
	}
	return out, nil
}
