package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
)

// maxNoticeBytes bounds the reason quoted in a notice.
const maxNoticeBytes = 300

// runEndOutbox appends, in FinishRun's transaction, what the end of inbox run r tells its
// chat: the run's result (kind result) when it ended ok with one and the group's
// container_config does not say "deliver_result": false, and a notice when the folder got
// parked (cur is the cursor after the run) or the gateway refused a request for a budget.
// All go to the chat of the last of the run's messages that has one; a run whose messages
// name no chat, or a run not made from the inbox, appends nothing. o's texts are redacted
// already.
func (s *Store) runEndOutbox(ctx context.Context, tx *sql.Tx, r *Run, o Outcome, cur Cursor, now int64) ([]OutboxItem, error) {
	if r.InboxLast == 0 {
		return nil, nil
	}
	var chat string
	err := tx.QueryRowContext(ctx, `SELECT chat_jid FROM inbox WHERE folder = ? AND id BETWEEN ? AND ?
		AND chat_jid != '' ORDER BY id DESC LIMIT 1`, r.Folder, r.InboxFirst, r.InboxLast).Scan(&chat)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rows []OutboxItem
	add := func(kind OutboxKind, content string) error {
		it, err := appendOutbox(ctx, tx, OutboxItem{Folder: r.Folder, RunID: r.ID, Kind: kind, Target: chat, Content: content}, now, s.redact)
		if err == nil {
			rows = append(rows, *it)
		}
		return err
	}
	if o.State == RunExited && o.Status == StatusOK && strings.TrimSpace(o.Result) != "" {
		deliver, err := deliverResult(ctx, tx, r.Folder)
		if err != nil {
			return nil, err
		}
		if deliver {
			if err := add(OutboxResult, o.Result); err != nil {
				return nil, err
			}
		}
	}
	if strings.HasPrefix(r.Usage.Refused, "budget reached") {
		if err := add(OutboxNotice, "The agent stopped early: "+clip(r.Usage.Refused)); err != nil {
			return nil, err
		}
	}
	if cur.Parked() && (o.Cursor.Op == CursorPark || o.Cursor.Op == CursorRetry) {
		if err := add(OutboxNotice, "The agent is paused after a failure and will not answer until an operator resumes it: "+clip(cur.ParkedReason)); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// deliverResult reads the group's container_config "deliver_result" (default true; the
// turn package validates the key when the group is stored).
func deliverResult(ctx context.Context, tx *sql.Tx, folder string) (bool, error) {
	var raw string
	err := tx.QueryRowContext(ctx, `SELECT container_config FROM groups WHERE folder = ?`, folder).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	var c struct {
		DeliverResult *bool `json:"deliver_result"`
	}
	if json.Unmarshal([]byte(raw), &c) != nil || c.DeliverResult == nil {
		return true, nil
	}
	return *c.DeliverResult, nil
}

func clip(s string) string {
	if len(s) <= maxNoticeBytes {
		return s
	}
	cut := maxNoticeBytes
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}
