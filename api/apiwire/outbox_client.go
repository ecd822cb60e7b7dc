package apiwire

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// OutboxQuery is what GET /v1/outbox takes. Zero fields are left out.
type OutboxQuery struct {
	After    int64
	Wait     time.Duration // long-poll up to this long when nothing is there (at most MaxOutboxWait)
	Folder   string
	Chat     string
	Platform string
	Limit    int
	// State "" (or "pending") leases; "parked", "delivered" or "all" only lists.
	State string
}

func (q OutboxQuery) values() url.Values {
	v := url.Values{}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Wait > 0 {
		v.Set("wait", q.Wait.String())
	}
	for k, s := range map[string]string{"folder": q.Folder, "chat": q.Chat, "platform": q.Platform, "state": q.State} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// LeaseOutbox asks GET /v1/outbox for rows: pending ones are leased under the answer's
// Lease token (acknowledge them with AckOutbox, or FailOutbox, giving it), others only
// listed.
func (c *Client) LeaseOutbox(ctx context.Context, q OutboxQuery) (OutboxList, error) {
	var out OutboxList
	path := "/v1/outbox"
	if v := q.values().Encode(); v != "" {
		path += "?" + v
	}
	err := c.Do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// AckOutbox marks rows the lease handed out delivered and returns how many it acked.
func (c *Client) AckOutbox(ctx context.Context, lease string, ids ...int64) (int, error) {
	var out AckResponse
	err := c.Do(ctx, http.MethodPost, "/v1/outbox/ack", AckRequest{Lease: lease, IDs: ids}, &out)
	return out.Acked, err
}

// FailOutbox reports that delivering row id, which the lease handed out, failed; the row
// comes again (or is parked after [delivery] max_attempts).
func (c *Client) FailOutbox(ctx context.Context, lease string, id int64, reason string) (OutboxRow, error) {
	var out OutboxRow
	err := c.Do(ctx, http.MethodPost, "/v1/outbox/fail", FailRequest{Lease: lease, ID: id, Error: reason}, &out)
	return out, err
}

// GetOutbox returns one row with its delivery state.
func (c *Client) GetOutbox(ctx context.Context, id int64) (OutboxRow, error) {
	var out OutboxRow
	err := c.Do(ctx, http.MethodGet, "/v1/outbox/"+strconv.FormatInt(id, 10), nil, &out)
	return out, err
}

// RetryOutbox makes a parked row pending again.
func (c *Client) RetryOutbox(ctx context.Context, id int64) (OutboxRow, error) {
	var out OutboxRow
	err := c.Do(ctx, http.MethodPost, "/v1/outbox/"+strconv.FormatInt(id, 10)+"/retry", nil, &out)
	return out, err
}
