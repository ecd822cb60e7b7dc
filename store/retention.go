package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
)

// Keep is one retention rule: a row goes when it is older than Before (unix ms; 0 turns
// the age rule off) or beyond the newest Count of its folder (0 turns the count rule off).
type Keep struct {
	Before int64
	Count  int
}

// PruneRules are the rules of one Prune.
type PruneRules struct {
	Runs, Inbox, Outbox Keep
	DryRun              bool // count what would go, remove nothing
}

// Pruned counts the rows a Prune removed (or, dry, would remove).
type Pruned struct {
	Runs, Inbox, Outbox int64
}

// The rows each rule may remove, as "id" columns of a subquery with its arguments: the
// age rule (?1 > 0 and older than ?1) or the count rule (?2 > 0 and beyond the newest ?2).
// What a queued or running turn needs is never among them: runs that have not ended,
// inbox messages past their folder's cursor (pending) or within a queued or running run's
// range, whatever the rules say.
const (
	prunableRuns = `SELECT id FROM (SELECT id, state, COALESCE(ended_at, created_at) AS at,
			ROW_NUMBER() OVER (PARTITION BY folder ORDER BY seq DESC) AS n FROM runs)
		WHERE state IN ('exited', 'error', 'killed') AND ((?1 > 0 AND at < ?1) OR (?2 > 0 AND n > ?2))`
	prunableInbox = `SELECT id FROM (SELECT id, folder, created_at AS at,
			ROW_NUMBER() OVER (PARTITION BY folder ORDER BY id DESC) AS n FROM inbox) AS i
		WHERE ((?1 > 0 AND at < ?1) OR (?2 > 0 AND n > ?2))
		AND id <= COALESCE((SELECT last_done_id FROM cursors c WHERE c.folder = i.folder), 0)
		AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.folder = i.folder AND r.state IN ('queued', 'running')
			AND r.inbox_first IS NOT NULL AND i.id BETWEEN r.inbox_first AND r.inbox_last)`
	prunableOutbox = `SELECT id FROM (SELECT id, state, created_at AS at,
			ROW_NUMBER() OVER (PARTITION BY folder ORDER BY id DESC) AS n FROM outbox)
		WHERE state <> 'pending' AND ((?1 > 0 AND at < ?1) OR (?2 > 0 AND n > ?2))`
)

// Prune removes, in one transaction, the finished runs (with their egress
// counts), the consumed inbox messages and the outbox items its rules let go. Inbox and
// outbox ids are never reused, so a cursor or a caller's since-id stays meaningful.
func (s *Store) Prune(ctx context.Context, r PruneRules) (Pruned, error) {
	for name, k := range map[string]Keep{"runs": r.Runs, "inbox": r.Inbox, "outbox": r.Outbox} {
		if k.Before < 0 || k.Count < 0 {
			return Pruned{}, fmt.Errorf("store: prune: %s: %w: negative rule", name, ErrInvalid)
		}
	}
	var p Pruned
	err := s.write(ctx, func(tx *sql.Tx) error {
		for _, t := range []struct {
			table, ids string
			keep       Keep
			n          *int64
		}{
			{"runs", prunableRuns, r.Runs, &p.Runs},
			{"inbox", prunableInbox, r.Inbox, &p.Inbox},
			{"outbox", prunableOutbox, r.Outbox, &p.Outbox},
		} {
			if t.keep == (Keep{}) {
				continue
			}
			if r.DryRun {
				if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM (`+t.ids+`)`, t.keep.Before, t.keep.Count).Scan(t.n); err != nil {
					return fmt.Errorf("%s: %w", t.table, err)
				}
				continue
			}
			res, err := tx.ExecContext(ctx, `DELETE FROM `+t.table+` WHERE id IN (`+t.ids+`)`, t.keep.Before, t.keep.Count)
			if err != nil {
				return fmt.Errorf("%s: %w", t.table, err)
			}
			*t.n, _ = res.RowsAffected()
		}
		return nil
	})
	if err != nil {
		return Pruned{}, fmt.Errorf("store: prune: %w", err)
	}
	return p, nil
}

// Compacted is what Compact found and did.
type Compacted struct {
	BytesBefore, BytesAfter int64 // the database's pages in use and free
	Vacuumed                bool
}

// Compact gives the space of removed rows back to the file system when it is at least a
// quarter of the database (VACUUM), and empties the write-ahead log.
func (s *Store) Compact(ctx context.Context) (Compacted, error) {
	var c Compacted
	size := func() (int64, int64, error) {
		var pages, free, pageSize int64
		err := s.db.QueryRowContext(ctx, `SELECT p.page_count, f.freelist_count, s.page_size
			FROM pragma_page_count() p, pragma_freelist_count() f, pragma_page_size() s`).Scan(&pages, &free, &pageSize)
		return pages * pageSize, free * pageSize, err
	}
	total, free, err := size()
	if err != nil {
		return c, fmt.Errorf("store: compact: %w", err)
	}
	c.BytesBefore, c.BytesAfter = total, total
	if free > 0 && free*4 >= total {
		if _, err := s.db.ExecContext(ctx, `VACUUM`); err != nil {
			return c, fmt.Errorf("store: compact: vacuum: %w", err)
		}
		c.Vacuumed = true
		if c.BytesAfter, _, err = size(); err != nil {
			return c, fmt.Errorf("store: compact: %w", err)
		}
	}
	if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return c, fmt.Errorf("store: compact: checkpoint: %w", err)
	}
	return c, nil
}

// Backup writes a consistent copy of the database to path, a new file of mode 0600 (an
// existing one is ErrConflict): one read transaction copies it, while writers go on.
func (s *Store) Backup(ctx context.Context, path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("store: backup: %s: %w: the file exists", path, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	f.Close()
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		os.Remove(path)
		return fmt.Errorf("store: backup to %s: %w", path, err)
	}
	// VACUUM INTO does not sync what it wrote.
	if f, err = os.Open(path); err == nil {
		err = f.Sync()
		f.Close()
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("store: backup: sync %s: %w", path, err)
	}
	return nil
}

// Verify checks that the database file at path is sound (PRAGMA quick_check) without
// changing it.
func Verify(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro")
	if err != nil {
		return fmt.Errorf("store: verify %s: %w", path, err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&res); err != nil {
		return fmt.Errorf("store: verify %s: %w", path, err)
	}
	if res != "ok" {
		return fmt.Errorf("store: verify %s: %s", path, res)
	}
	return nil
}
