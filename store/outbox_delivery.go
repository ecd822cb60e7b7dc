package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ErrNotLeaseHolder: an outbox row is acknowledged, failed or handed back under a lease
// token that does not hold it (another consumer leased it, or it was failed or retried
// since). It comes with ErrConflict.
var ErrNotLeaseHolder = errors.New("not held by this lease")

// OutboxLease is what one lease handed out: the rows and the token that acknowledges, fails
// or hands back exactly those rows (AckOutbox, FailOutbox, ReleaseOutbox). Only the consumer
// that leased them learns it: a listing or another lease never shows it.
type OutboxLease struct {
	Token string // "" when no row was handed out
	Items []OutboxItem
}

// maxLeaseToken bounds a token a caller presents.
const maxLeaseToken = 64

// checkLeaseToken refuses a missing or oversized token.
func checkLeaseToken(token string) error {
	switch {
	case token == "":
		return fmt.Errorf("lease: %w: empty: give the token the lease handed the rows out with", ErrInvalid)
	case len(token) > maxLeaseToken:
		return fmt.Errorf("lease: %w: longer than %d bytes", ErrInvalid, maxLeaseToken)
	}
	return nil
}

// leaseHolder checks that row id is held by token: ErrNotFound for a missing row,
// ErrConflict with ErrNotLeaseHolder for a row leased to another consumer or to none.
func leaseHolder(ctx context.Context, q querier, id int64, token string) (OutboxItem, error) {
	var holder string
	it, err := scanOutbox(q.QueryRowContext(ctx, `SELECT `+outboxColumns+`, lease_token FROM outbox WHERE id = ?`, id), &holder)
	if errors.Is(err, sql.ErrNoRows) {
		return it, fmt.Errorf("id %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return it, err
	}
	if holder != token {
		return it, fmt.Errorf("id %d: %w: %w (it is %s; another consumer leased it, or it was failed or retried since)", id, ErrConflict, ErrNotLeaseHolder, it.State)
	}
	return it, nil
}

// OutboxFilter selects outbox items for LeaseOutbox, WaitOutbox and ListOutboxState. Zero
// fields match everything.
type OutboxFilter struct {
	Folder   string
	Chat     string // the target
	Platform string
	After    int64 // only ids above this
	Limit    int   // at most this many; 0 for no bound
}

func (f OutboxFilter) matches(it OutboxItem) bool {
	return it.ID > f.After && (f.Folder == "" || f.Folder == it.Folder) &&
		(f.Chat == "" || f.Chat == it.Target) && (f.Platform == "" || f.Platform == it.Platform)
}

// where is f as SQL conditions on the outbox row o, with their arguments.
func (f OutboxFilter) where() (string, []any) {
	cond, args := "o.id > ?", []any{f.After}
	for _, c := range []struct{ col, v string }{{"o.folder", f.Folder}, {"o.target", f.Chat}, {"o.platform", f.Platform}} {
		if c.v != "" {
			cond += " AND " + c.col + " = ?"
			args = append(args, c.v)
		}
	}
	return cond, args
}

// LeasePolicy is how leased rows come back.
type LeasePolicy struct {
	// Visibility hides a leased row from other leases for this long unless it is acked
	// or failed first.
	Visibility time.Duration
	// MaxAttempts parks a row, when a consumer fails it or its lease passes unacknowledged,
	// once it was handed out this many times.
	MaxAttempts int
}

func (p LeasePolicy) check() error {
	switch {
	case p.Visibility <= 0:
		return fmt.Errorf("visibility: %w: %s is not positive", ErrInvalid, p.Visibility)
	case p.MaxAttempts < 1:
		return fmt.Errorf("max attempts: %w: %d is less than 1", ErrInvalid, p.MaxAttempts)
	}
	return nil
}

// LeaseOutbox hands out pending rows matching f whose lease is free, oldest first, and
// leases them under a new token: each gets Attempts+1 and is not handed out again for
// p.Visibility unless it is acked (AckOutbox) or failed (FailOutbox) first. A chat's rows go out in order: a row
// is not handed out while an older pending row of the same target is leased. Before that,
// in the same transaction, rows whose lease passed without an ack after p.MaxAttempts
// deliveries are parked: a row that crashes every consumer stops coming back.
func (s *Store) LeaseOutbox(ctx context.Context, f OutboxFilter, p LeasePolicy) (OutboxLease, error) {
	out, _, err := s.leaseOutbox(ctx, f, p)
	return out, err
}

// leaseOutbox is LeaseOutbox that also returns when the next matching lease passes (unix
// ms; 0 for none).
func (s *Store) leaseOutbox(ctx context.Context, f OutboxFilter, p LeasePolicy) (OutboxLease, int64, error) {
	if err := p.check(); err != nil {
		return OutboxLease{}, 0, fmt.Errorf("store: lease outbox: %w", err)
	}
	var (
		out    []OutboxItem
		next   int64
		parked []OutboxItem
	)
	token := rand.Text()
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := s.nowMS()
		var err error
		parked, err = queryOutbox(ctx, tx, `UPDATE outbox SET state = 'parked', lease_until = 0,
			last_error = 'not acknowledged after ' || attempts || ' deliveries' ||
				CASE WHEN last_error = '' THEN '' ELSE ': ' || last_error END
			WHERE state = 'pending' AND lease_until > 0 AND lease_until <= ? AND attempts >= ?
			RETURNING `+outboxColumns, now, p.MaxAttempts)
		if err != nil {
			return err
		}
		cond, args := f.where()
		out, err = queryOutbox(ctx, tx, `UPDATE outbox SET attempts = attempts + 1, lease_until = ?, lease_token = ?
			WHERE id IN (SELECT o.id FROM outbox o WHERE o.state = 'pending' AND o.lease_until <= ? AND `+cond+`
				AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.state = 'pending' AND e.target = o.target
					AND e.id < o.id AND e.lease_until > ?)
				ORDER BY o.id LIMIT ?)
			RETURNING `+outboxColumns,
			append(append([]any{now + p.Visibility.Milliseconds(), token, now}, args...), now, limitArg(f.Limit))...)
		if err != nil {
			return err
		}
		cond, args = f.where()
		return tx.QueryRowContext(ctx, `SELECT COALESCE(MIN(o.lease_until), 0) FROM outbox o
			WHERE o.state = 'pending' AND o.lease_until > ? AND `+cond, append([]any{now}, args...)...).Scan(&next)
	})
	if err != nil {
		return OutboxLease{}, 0, fmt.Errorf("store: lease outbox: %w", err)
	}
	// RETURNING gives the rows in no promised order.
	sortOutbox(out)
	s.outbox.notify(false, parked...)
	if len(out) == 0 {
		return OutboxLease{}, next, nil
	}
	return OutboxLease{Token: token, Items: out}, next, nil
}

func sortOutbox(items []OutboxItem) {
	for i := 1; i < len(items); i++ {
		for j := i; j > 0 && items[j].ID < items[j-1].ID; j-- {
			items[j], items[j-1] = items[j-1], items[j]
		}
	}
}

// WaitOutbox is LeaseOutbox that, when nothing is there, waits up to wait for a row that
// could match (an append, an ack or failure that frees a chat, a lease that passes) and
// leases again; it returns no rows when wait passes first. It does not poll: appends and
// state changes wake the waiters they could match.
func (s *Store) WaitOutbox(ctx context.Context, f OutboxFilter, p LeasePolicy, wait time.Duration) (OutboxLease, error) {
	deadline := time.Now().Add(wait)
	for {
		w := s.outbox.watch(f)
		lease, next, err := s.leaseOutbox(ctx, f, p)
		left := time.Until(deadline)
		if err != nil || len(lease.Items) > 0 || left <= 0 {
			s.outbox.unwatch(w)
			return lease, err
		}
		if next > 0 {
			left = min(left, time.Duration(next-s.nowMS())*time.Millisecond+time.Millisecond)
		}
		t := time.NewTimer(left)
		select {
		case <-w.c:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		s.outbox.unwatch(w)
		if err := ctx.Err(); err != nil {
			return OutboxLease{}, fmt.Errorf("store: wait outbox: %w", err)
		}
	}
}

// AckOutbox marks the rows delivered, which the lease token handed out; acking a delivered
// row again under the same token is fine, and so is a late ack of a row whose lease passed
// while no other lease took it. An id that names no row is ErrNotFound, one the token does
// not hold ErrConflict with ErrNotLeaseHolder; either way nothing is acked. It returns how
// many rows it acked (the ids' count).
func (s *Store) AckOutbox(ctx context.Context, token string, ids []int64) (int, error) {
	if err := checkLeaseToken(token); err != nil {
		return 0, fmt.Errorf("store: ack outbox: %w", err)
	}
	var acked []OutboxItem
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := s.nowMS()
		acked = acked[:0]
		for _, id := range ids {
			items, err := queryOutbox(ctx, tx, `UPDATE outbox SET state = 'delivered', lease_until = 0,
				delivered_at = COALESCE(delivered_at, ?) WHERE id = ? AND lease_token = ? RETURNING `+outboxColumns, now, id, token)
			if err != nil {
				return err
			}
			if len(items) == 0 {
				_, err := leaseHolder(ctx, tx, id, token)
				return cmp.Or(err, fmt.Errorf("id %d: %w: %w", id, ErrConflict, ErrNotLeaseHolder))
			}
			acked = append(acked, items...)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: ack outbox: %w", err)
	}
	s.outbox.notify(false, acked...)
	return len(ids), nil
}

// FailOutbox records that delivering row id, which the lease token handed out, failed with
// reason; the lease ends. The row is parked with that reason once it was handed out
// p.MaxAttempts times; otherwise it is hidden until retryAfter passes (0: it comes again at
// once). A row not pending is ErrConflict, one the token does not hold ErrConflict with
// ErrNotLeaseHolder, a missing one ErrNotFound.
func (s *Store) FailOutbox(ctx context.Context, token string, id int64, reason string, retryAfter time.Duration, p LeasePolicy) (*OutboxItem, error) {
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("store: fail outbox row %d: %w", id, err)
	}
	if err := checkLeaseToken(token); err != nil {
		return nil, fmt.Errorf("store: fail outbox row %d: %w", id, err)
	}
	if strings.TrimSpace(reason) == "" {
		return nil, fmt.Errorf("store: fail outbox row %d: error: %w: empty", id, ErrInvalid)
	}
	if retryAfter < 0 {
		return nil, fmt.Errorf("store: fail outbox row %d: retry after: %w: %s is negative", id, ErrInvalid, retryAfter)
	}
	reason = s.redact(reason)
	var out OutboxItem
	err := s.write(ctx, func(tx *sql.Tx) error {
		it, err := leaseHolder(ctx, tx, id, token)
		if err != nil {
			return err
		}
		if it.State != OutboxPending {
			return fmt.Errorf("id %d: %w: it is %s", id, ErrConflict, it.State)
		}
		now := s.nowMS()
		state, lease := OutboxPending, now+retryAfter.Milliseconds()
		if retryAfter == 0 {
			lease = 0
		}
		if it.Attempts >= p.MaxAttempts {
			state, lease = OutboxParked, 0
			reason = fmt.Sprintf("failed %d times: %s", it.Attempts, reason)
		}
		out, err = scanOutbox(tx.QueryRowContext(ctx, `UPDATE outbox SET state = ?, lease_until = ?, last_error = ?,
			lease_token = '' WHERE id = ? RETURNING `+outboxColumns, state, lease, reason, id))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: fail outbox: %w", err)
	}
	s.outbox.notify(false, out)
	return &out, nil
}

// ReleaseOutbox hands rows the lease token holds back without counting the lease as an
// attempt: a consumer that leased them but never tried them (it stopped, or an older row
// of the batch failed). Rows not pending, or not held by the token, are left alone.
func (s *Store) ReleaseOutbox(ctx context.Context, token string, ids []int64) error {
	if err := checkLeaseToken(token); err != nil {
		return fmt.Errorf("store: release outbox: %w", err)
	}
	var released []OutboxItem
	err := s.write(ctx, func(tx *sql.Tx) error {
		released = released[:0]
		for _, id := range ids {
			items, err := queryOutbox(ctx, tx, `UPDATE outbox SET lease_until = 0, attempts = MAX(attempts - 1, 0), lease_token = ''
				WHERE id = ? AND state = 'pending' AND lease_until > 0 AND lease_token = ? RETURNING `+outboxColumns, id, token)
			if err != nil {
				return err
			}
			released = append(released, items...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: release outbox: %w", err)
	}
	s.outbox.notify(false, released...)
	return nil
}

// RetryOutbox makes a parked row pending again with no attempts. A row not parked is
// ErrConflict, a missing one ErrNotFound.
func (s *Store) RetryOutbox(ctx context.Context, id int64) (*OutboxItem, error) {
	var out OutboxItem
	err := s.write(ctx, func(tx *sql.Tx) error {
		it, err := getOutbox(ctx, tx, id)
		if err != nil {
			return err
		}
		if it.State != OutboxParked {
			return fmt.Errorf("id %d: %w: it is %s, only a parked row is retried", id, ErrConflict, it.State)
		}
		out, err = scanOutbox(tx.QueryRowContext(ctx, `UPDATE outbox SET state = 'pending', attempts = 0, lease_until = 0,
			lease_token = '' WHERE id = ? RETURNING `+outboxColumns, id))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: retry outbox: %w", err)
	}
	s.outbox.notify(false, out)
	return &out, nil
}

func getOutbox(ctx context.Context, q querier, id int64) (OutboxItem, error) {
	it, err := scanOutbox(q.QueryRowContext(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return it, fmt.Errorf("id %d: %w", id, ErrNotFound)
	}
	return it, err
}

// GetOutbox returns row id; a missing one is ErrNotFound.
func (s *Store) GetOutbox(ctx context.Context, id int64) (*OutboxItem, error) {
	it, err := getOutbox(ctx, s.db, id)
	if err != nil {
		return nil, fmt.Errorf("store: get outbox: %w", err)
	}
	return &it, nil
}

// ListOutboxState returns the rows matching f in state ("" for every state), oldest
// first, without leasing them.
func (s *Store) ListOutboxState(ctx context.Context, state OutboxState, f OutboxFilter) ([]OutboxItem, error) {
	cond, args := f.where()
	switch state {
	case "":
	case OutboxPending, OutboxDelivered, OutboxParked:
		cond += " AND o.state = ?"
		args = append(args, state)
	default:
		return nil, fmt.Errorf("store: list outbox: state: %w: %q is not pending, delivered or parked", ErrInvalid, state)
	}
	out, err := queryOutbox(ctx, s.db, `SELECT `+outboxColumns+` FROM outbox o WHERE `+cond+` ORDER BY o.id LIMIT ?`,
		append(args, limitArg(f.Limit))...)
	if err != nil {
		return nil, fmt.Errorf("store: list outbox: %w", err)
	}
	return out, nil
}

// OutboxBacklog is how many rows are pending: not yet acknowledged nor parked.
func (s *Store) OutboxBacklog(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox WHERE state = 'pending'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: outbox backlog: %w", err)
	}
	return n, nil
}

// outboxWatch wakes the waiters of WaitOutbox whose filter a changed row could match.
type outboxWatch struct {
	mu      sync.Mutex
	waiters map[*outboxWaiter]struct{}
}

type outboxWaiter struct {
	f OutboxFilter
	c chan struct{} // closed when woken
}

func (w *outboxWatch) watch(f OutboxFilter) *outboxWaiter {
	wt := &outboxWaiter{f: f, c: make(chan struct{})}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiters == nil {
		w.waiters = map[*outboxWaiter]struct{}{}
	}
	w.waiters[wt] = struct{}{}
	return wt
}

func (w *outboxWatch) unwatch(wt *outboxWaiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiters, wt)
}

// notify wakes, once each, the waiters that one of items could concern: for new rows
// (appended) those whose filter matches one; for rows whose state changed (acked, failed,
// released, parked, retried) those that could lease a row of the same chat, which the
// change may have freed.
func (w *outboxWatch) notify(appended bool, items ...OutboxItem) {
	if len(items) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for wt := range w.waiters {
		for _, it := range items {
			sameChat := (wt.f.Chat == "" || wt.f.Chat == it.Target) && (wt.f.Platform == "" || wt.f.Platform == it.Platform)
			if appended && wt.f.matches(it) || !appended && sameChat {
				close(wt.c)
				delete(w.waiters, wt)
				break
			}
		}
	}
}
