package store

import (
	"context"
	"database/sql"
	"fmt"
)

// AddUsage adds u to the run's model usage: its counts are added, its Model, Refused and
// UpstreamError, when not empty, replace the stored ones. Its tokens are added to its
// folder's usage of u.Model in the current quarter hour too (ModelUsage). The gateway calls it as each response ends,
// so the usage is stored before the agent can read the response's last byte.
func (s *Store) AddUsage(ctx context.Context, runID string, u Usage) error {
	if u.Requests < 0 || u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 || u.CacheWrite1hTokens < 0 {
		return fmt.Errorf("store: add usage of run %q: %w: negative count", runID, ErrInvalid)
	}
	if u.CacheWrite1hTokens > u.CacheWriteTokens {
		return fmt.Errorf("store: add usage of run %q: %w: more 1-hour cache writes than cache writes", runID, ErrInvalid)
	}
	u.Model, u.Refused, u.UpstreamError = s.redact(u.Model), s.redact(u.Refused), s.redact(u.UpstreamError)
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET
			model_requests = model_requests + ?,
			model = CASE WHEN ? = '' THEN model ELSE ? END,
			input_tokens = input_tokens + ?,
			output_tokens = output_tokens + ?,
			cache_read_tokens = cache_read_tokens + ?,
			cache_write_tokens = cache_write_tokens + ?,
			cache_write_1h_tokens = cache_write_1h_tokens + ?,
			model_refused = CASE WHEN ? = '' THEN model_refused ELSE ? END,
			model_error = CASE WHEN ? = '' THEN model_error ELSE ? END
			WHERE id = ?`,
			u.Requests, u.Model, u.Model, u.InputTokens, u.OutputTokens, u.CacheReadTokens,
			u.CacheWriteTokens, u.CacheWrite1hTokens, u.Refused, u.Refused, u.UpstreamError, u.UpstreamError, runID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("run %q: %w", runID, ErrNotFound)
		}
		if u.InputTokens+u.OutputTokens+u.CacheReadTokens+u.CacheWriteTokens == 0 {
			return nil
		}
		now := s.nowMS()
		_, err = tx.ExecContext(ctx, `INSERT INTO model_usage (folder, model, bucket, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cache_write_1h_tokens)
			SELECT folder, ?, ?, ?, ?, ?, ?, ? FROM runs WHERE id = ?
			ON CONFLICT (folder, bucket, model) DO UPDATE SET input_tokens = input_tokens + excluded.input_tokens,
				output_tokens = output_tokens + excluded.output_tokens, cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
				cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
				cache_write_1h_tokens = cache_write_1h_tokens + excluded.cache_write_1h_tokens`,
			u.Model, now-now%UsageBucket, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CacheWrite1hTokens, runID)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: add usage: %w", err)
	}
	return nil
}

// SubtreeTokens is the sum of input, output and cache-write tokens of the runs of folder
// and of every folder below it ("main/research" is below "main", "mainx" is not)
// created at or after since (unix ms): what a daily token budget of folder counts.
func (s *Store) SubtreeTokens(ctx context.Context, folder string, since int64) (int64, error) {
	var n int64
	// The folders below "main" are those from "main/" up to "main0": '0' follows '/'.
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(input_tokens + output_tokens + cache_write_tokens), 0)
		FROM runs WHERE (folder = ? OR (folder >= ? AND folder < ?)) AND created_at >= ?`,
		folder, folder+"/", folder+"0", since).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: tokens of the subtree of %q: %w", folder, err)
	}
	return n, nil
}

// UsageBucket is the span of a row of model usage, in ms: a quarter hour, so that the
// days and months of every time zone (whose offsets are whole quarter hours) start at a
// bucket's start.
const UsageBucket = 15 * 60 * 1000

// ModelUsage is the tokens the turns of Folder used of Model; CacheWrite1hTokens are
// those of CacheWriteTokens written to the 1-hour cache.
type ModelUsage struct {
	Folder, Model                                                string
	InputTokens, OutputTokens, CacheReadTokens, CacheWriteTokens int64
	CacheWrite1hTokens                                           int64
}

// ModelUsage sums the model usage of folder and of every folder below it ("" for every
// folder) from from to before to (unix ms, each rounded down to its quarter hour), per
// folder and model, ordered by folder and model.
func (s *Store) ModelUsage(ctx context.Context, folder string, from, to int64) ([]ModelUsage, error) {
	q := `SELECT folder, model, SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), SUM(cache_write_tokens),
		SUM(cache_write_1h_tokens) FROM model_usage WHERE bucket >= ? AND bucket < ?`
	args := []any{from - from%UsageBucket, to - to%UsageBucket}
	if folder != "" {
		q += ` AND ` + underClause("folder")
		args = append(args, underArgs(folder)...)
	}
	rows, err := s.db.QueryContext(ctx, q+` GROUP BY folder, model ORDER BY folder, model`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: model usage of %q: %w", folder, err)
	}
	defer rows.Close()
	var out []ModelUsage
	for rows.Next() {
		var u ModelUsage
		if err := rows.Scan(&u.Folder, &u.Model, &u.InputTokens, &u.OutputTokens, &u.CacheReadTokens, &u.CacheWriteTokens, &u.CacheWrite1hTokens); err != nil {
			return nil, fmt.Errorf("store: model usage of %q: %w", folder, err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// NoteBudget records that the notice of folder's budget for period (its start in unix
// ms) at percent was sent, and says whether it is the first: each is sent once.
func (s *Store) NoteBudget(ctx context.Context, folder, period string, start int64, percent int) (bool, error) {
	var first bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO budget_notices (folder, period, period_start, percent, sent_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, folder, period, start, percent, s.nowMS())
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		first = n == 1
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: note the budget notice of %q: %w", folder, err)
	}
	return first, nil
}

// Egress is what one run moved through the egress proxy to one host:port.
type Egress struct {
	Host      string
	Requests  int64
	BytesUp   int64
	BytesDown int64
	Refused   int64
}

// AddEgress adds e's counts to the run's row for e.Host.
func (s *Store) AddEgress(ctx context.Context, runID string, e Egress) error {
	if e.Host == "" {
		return fmt.Errorf("store: add egress of run %q: host: %w: empty", runID, ErrInvalid)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO run_egress (run_id, host, requests, bytes_up, bytes_down, refused)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (run_id, host) DO UPDATE SET requests = requests + excluded.requests,
				bytes_up = bytes_up + excluded.bytes_up, bytes_down = bytes_down + excluded.bytes_down,
				refused = refused + excluded.refused`,
			runID, s.redact(e.Host), e.Requests, e.BytesUp, e.BytesDown, e.Refused)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: add egress: %w", err)
	}
	return nil
}

// RunEgress lists the run's egress per host, by host.
func (s *Store) RunEgress(ctx context.Context, runID string) ([]Egress, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT host, requests, bytes_up, bytes_down, refused
		FROM run_egress WHERE run_id = ? ORDER BY host`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: egress of run %q: %w", runID, err)
	}
	defer rows.Close()
	var out []Egress
	for rows.Next() {
		var e Egress
		if err := rows.Scan(&e.Host, &e.Requests, &e.BytesUp, &e.BytesDown, &e.Refused); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
