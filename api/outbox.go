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

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/delivery"
	"github.com/arizuko/arizukod/store"
)

// Delivery defaults ([delivery] in arizukod.toml).
const (
	DefaultVisibility  = 60 * time.Second
	DefaultMaxAttempts = 5
	// maxOutboxLimit bounds GET /v1/outbox's limit and an ack's ids.
	maxOutboxLimit = 1000
	maxErrorBytes  = 4096
)

func wireOutboxList(items []store.OutboxItem) []apiwire.OutboxRow {
	out := make([]apiwire.OutboxRow, 0, len(items))
	for _, it := range items {
		out = append(out, delivery.Row(it))
	}
	return out
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
		if err != nil || d < 0 || d > apiwire.MaxOutboxWait {
			writeErr(w, http.StatusBadRequest, "wait", "wait: %q is not a duration from 0s to %s (like 30s)", v, apiwire.MaxOutboxWait)
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
	writeJSON(w, http.StatusOK, apiwire.OutboxList{Lease: lease.Token, Items: wireOutboxList(lease.Items)})
}

// Close makes long polls of GET /v1/outbox answer at once with what they have (nothing),
// so that a daemon that stops does not wait for them; the daemon calls it when its HTTP
// server shuts down.
func (s *Server) Close() {
	s.stopOnce.Do(func() { close(s.stopping) })
}

func (s *Server) ackOutbox(w http.ResponseWriter, r *http.Request) {
	var req apiwire.AckRequest
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
	writeJSON(w, http.StatusOK, apiwire.AckResponse{Acked: n})
}

func (s *Server) failOutbox(w http.ResponseWriter, r *http.Request) {
	var req apiwire.FailRequest
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
	writeJSON(w, http.StatusOK, delivery.Row(*it))
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
	writeJSON(w, http.StatusOK, delivery.Row(*it))
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
	writeJSON(w, http.StatusOK, delivery.Row(*it))
}
