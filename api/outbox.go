package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/arizuko/arizukod/store"
)

// Delivery defaults ([delivery] in arizukod.toml).
const (
	DefaultVisibility  = 60 * time.Second
	DefaultMaxAttempts = 5
	// MaxOutboxWait bounds GET /v1/outbox's wait.
	MaxOutboxWait = 60 * time.Second
	// maxOutboxLimit bounds GET /v1/outbox's limit and an ack's ids.
	maxOutboxLimit = 1000
	maxErrorBytes  = 4096
)

// OutboxRow is a row of the outbox stream on the wire (GET /v1/outbox and friends).
type OutboxRow struct {
	ID          int64  `json:"id"`
	Folder      string `json:"folder"`
	RunID       string `json:"runId"`
	Kind        string `json:"kind"` // message, reply, document, result or notice
	Target      string `json:"target"`
	Platform    string `json:"platform"` // target's part before its first ':'
	Content     string `json:"content"`
	DocPath     string `json:"docPath"`
	DocName     string `json:"docName"`
	CreatedAt   int64  `json:"createdAt"` // unix ms
	State       string `json:"state"`     // pending, delivered or parked
	Attempts    int    `json:"attempts"`
	LeaseUntil  int64  `json:"leaseUntil"` // unix ms; 0 when not leased
	LastError   string `json:"lastError"`
	DeliveredAt int64  `json:"deliveredAt"` // unix ms; 0 until acked
}

// WireOutbox is it on the wire.
func WireOutbox(it store.OutboxItem) OutboxRow {
	return OutboxRow{ID: it.ID, Folder: it.Folder, RunID: it.RunID, Kind: string(it.Kind), Target: it.Target,
		Platform: it.Platform, Content: it.Content, DocPath: it.DocPath, DocName: it.DocName, CreatedAt: it.CreatedAt,
		State: string(it.State), Attempts: it.Attempts, LeaseUntil: it.LeaseUntil, LastError: it.LastError,
		DeliveredAt: it.DeliveredAt}
}

func wireOutboxList(items []store.OutboxItem) []OutboxRow {
	out := make([]OutboxRow, 0, len(items))
	for _, it := range items {
		out = append(out, WireOutbox(it))
	}
	return out
}

// OutboxList is the body of GET /v1/outbox.
type OutboxList struct {
	// Lease is the token of the lease that handed the pending rows out: acknowledging or
	// failing them takes it (AckRequest.Lease, FailRequest.Lease), and only this answer
	// carries it. It is left out when no row was leased (a listing, or nothing pending).
	Lease string      `json:"lease,omitempty"`
	Items []OutboxRow `json:"items"`
}

// AckRequest is the body of POST /v1/outbox/ack.
type AckRequest struct {
	Lease string  `json:"lease"` // the token of the lease that handed the rows out
	IDs   []int64 `json:"ids"`
}

// AckResponse answers POST /v1/outbox/ack.
type AckResponse struct {
	Acked int `json:"acked"`
}

// FailRequest is the body of POST /v1/outbox/fail.
type FailRequest struct {
	Lease string `json:"lease"` // the token of the lease that handed the row out
	ID    int64  `json:"id"`
	Error string `json:"error"`
	// RetryAfter keeps the row from coming again for this long (default 0: at once).
	RetryAfter Duration `json:"retryAfter,omitempty"`
}

// leasePolicy is the server's delivery policy, with the defaults for what is unset.
func (s *Server) leasePolicy() store.LeasePolicy {
	var p store.LeasePolicy
	if set := s.delivery.Load(); set != nil {
		p = *set
	}
	if p.Visibility <= 0 {
		p.Visibility = DefaultVisibility
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	return p
}

// outboxFilter reads the stream's filters: after, folder, chat, platform, limit.
func outboxFilter(w http.ResponseWriter, r *http.Request) (store.OutboxFilter, bool) {
	var f store.OutboxFilter
	after, ok := queryInt(w, r, "after", 0, 0, 1<<62)
	if !ok {
		return f, false
	}
	limit, ok := queryInt(w, r, "limit", 100, 1, maxOutboxLimit)
	if !ok {
		return f, false
	}
	f.After, f.Limit = after, int(limit)
	q := r.URL.Query()
	if v := q.Get("folder"); v != "" {
		folder, err := parseFolder(v)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "folder", "%v", err)
			return f, false
		}
		f.Folder = string(folder)
	}
	f.Chat = q.Get("chat")
	if !jidField(w, "chat", f.Chat) {
		return f, false
	}
	f.Platform = q.Get("platform")
	if len(f.Platform) > 64 || strings.ContainsFunc(f.Platform, func(c rune) bool { return c == ':' || unicode.IsControl(c) || unicode.IsSpace(c) }) {
		writeErr(w, http.StatusBadRequest, "platform", "platform: %q is not a platform (the part of a chat before its ':', like tg)", f.Platform)
		return f, false
	}
	return f, true
}

func (s *Server) streamOutbox(w http.ResponseWriter, r *http.Request) {
	f, ok := outboxFilter(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxOutboxWait {
			writeErr(w, http.StatusBadRequest, "wait", "wait: %q is not a duration from 0s to %s (like 30s)", v, MaxOutboxWait)
			return
		}
		wait = d
	}
	var (
		lease store.OutboxLease
		err   error
	)
	switch state := q.Get("state"); state {
	case "", "pending":
		ctx, cancel := context.WithCancel(r.Context())
		go func() {
			select {
			case <-s.stopping:
				cancel()
			case <-ctx.Done():
			}
		}()
		lease, err = s.store.WaitOutbox(ctx, f, s.leasePolicy(), wait)
		cancel()
		if err != nil && r.Context().Err() == nil && ctx.Err() != nil {
			lease, err = store.OutboxLease{}, nil // the daemon stops: an empty answer, the gateway asks again
		}
	case "parked", "delivered", "all":
		if state == "all" {
			state = ""
		}
		lease.Items, err = s.store.ListOutboxState(r.Context(), store.OutboxState(state), f)
	default:
		writeErr(w, http.StatusBadRequest, "state", "state: %q is not pending, parked, delivered or all", state)
		return
	}
	if err != nil {
		if r.Context().Err() != nil {
			return // the caller went away
		}
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, OutboxList{Lease: lease.Token, Items: wireOutboxList(lease.Items)})
}

// Close makes long polls of GET /v1/outbox answer at once with what they have (nothing),
// so that a daemon that stops does not wait for them; the daemon calls it when its HTTP
// server shuts down.
func (s *Server) Close() {
	s.stopOnce.Do(func() { close(s.stopping) })
}

func (s *Server) ackOutbox(w http.ResponseWriter, r *http.Request) {
	var req AckRequest
	if !decode(w, r, &req) {
		return
	}
	if !leaseField(w, req.Lease) {
		return
	}
	switch {
	case len(req.IDs) == 0:
		writeErr(w, http.StatusBadRequest, "ids", "ids: at least one id is required")
		return
	case len(req.IDs) > maxOutboxLimit:
		writeErr(w, http.StatusBadRequest, "ids", "ids: %d ids, at most %d in one ack", len(req.IDs), maxOutboxLimit)
		return
	}
	for i, id := range req.IDs {
		if id <= 0 {
			writeErr(w, http.StatusBadRequest, fmt.Sprintf("ids[%d]", i), "ids[%d]: %d is not an outbox id", i, id)
			return
		}
	}
	n, err := s.store.AckOutbox(r.Context(), req.Lease, req.IDs)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeErr(w, http.StatusNotFound, "ids", "%v: nothing was acked; ack the others again without it", err)
		return
	case errors.Is(err, store.ErrNotLeaseHolder):
		writeErr(w, http.StatusConflict, "lease", "lease %q: %v: nothing was acked; ack only the rows this lease handed out", req.Lease, err)
		return
	case err != nil:
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, AckResponse{Acked: n})
}

func (s *Server) failOutbox(w http.ResponseWriter, r *http.Request) {
	var req FailRequest
	if !decode(w, r, &req) {
		return
	}
	if !leaseField(w, req.Lease) {
		return
	}
	switch {
	case req.ID <= 0:
		writeErr(w, http.StatusBadRequest, "id", "id: required, the outbox row that failed")
		return
	case strings.TrimSpace(req.Error) == "":
		writeErr(w, http.StatusBadRequest, "error", "error: required, why the delivery failed")
		return
	case len(req.Error) > maxErrorBytes:
		writeErr(w, http.StatusBadRequest, "error", "error: %d bytes, at most %d", len(req.Error), maxErrorBytes)
		return
	case req.RetryAfter < 0 || time.Duration(req.RetryAfter) > 24*time.Hour:
		writeErr(w, http.StatusBadRequest, "retryAfter", "retryAfter: must be from 0s to 24h")
		return
	}
	it, err := s.store.FailOutbox(r.Context(), req.Lease, req.ID, req.Error, time.Duration(req.RetryAfter), s.leasePolicy())
	if errors.Is(err, store.ErrNotLeaseHolder) {
		writeErr(w, http.StatusConflict, "lease", "lease %q: %v: fail only a row this lease handed out", req.Lease, err)
		return
	}
	if !s.outboxErr(w, r, "id", err) {
		return
	}
	writeJSON(w, http.StatusOK, WireOutbox(*it))
}

// leaseField checks an ack's or a failure's lease token: it is required.
func leaseField(w http.ResponseWriter, token string) bool {
	switch {
	case token == "":
		writeErr(w, http.StatusBadRequest, "lease", "lease: required: the token GET /v1/outbox answered with the rows (its \"lease\")")
		return false
	case len(token) > 64 || strings.ContainsFunc(token, func(c rune) bool { return unicode.IsControl(c) || unicode.IsSpace(c) }):
		writeErr(w, http.StatusBadRequest, "lease", "lease: not a lease token (at most 64 bytes, no spaces)")
		return false
	}
	return true
}

// outboxErr answers err of a call about one row; it reports whether there was none.
func (s *Server) outboxErr(w http.ResponseWriter, r *http.Request, field string, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, store.ErrNotFound):
		writeErr(w, http.StatusNotFound, field, "%s: no such outbox row", field)
	case errors.Is(err, store.ErrConflict):
		writeErr(w, http.StatusConflict, field, "%v", err)
	default:
		s.internal(w, r, err)
	}
	return false
}

func outboxID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		writeErr(w, http.StatusBadRequest, "id", "id: %q is not an outbox id (a positive whole number)", v)
		return 0, false
	}
	return id, true
}

func (s *Server) getOutbox(w http.ResponseWriter, r *http.Request) {
	id, ok := outboxID(w, r)
	if !ok {
		return
	}
	it, err := s.store.GetOutbox(r.Context(), id)
	if !s.outboxErr(w, r, "id", err) {
		return
	}
	writeJSON(w, http.StatusOK, WireOutbox(*it))
}

func (s *Server) retryOutbox(w http.ResponseWriter, r *http.Request) {
	id, ok := outboxID(w, r)
	if !ok {
		return
	}
	it, err := s.store.RetryOutbox(r.Context(), id)
	if !s.outboxErr(w, r, "id", err) {
		return
	}
	writeJSON(w, http.StatusOK, WireOutbox(*it))
}
