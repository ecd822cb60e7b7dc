package gateway

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// What the model gateways hold in memory is bounded: every request body is read once,
// into one buffer, and a request holds its place and its body's bytes in its turn's Pool
// and in the shared one until it has ended. A request over a bound is refused with 413
// (its body alone is too large) or 429 (the bound is full now; the agent's SDK retries).
const (
	// MaxRequestBytes bounds one request body, the Messages API's own limit.
	MaxRequestBytes = 32 << 20
	// TurnRequests and TurnBodyBytes bound one turn's requests in flight and the request
	// bytes its gateway holds: two bodies of the largest size.
	TurnRequests  = 16
	TurnBodyBytes = 2 * MaxRequestBytes
	// SharedRequests and SharedBodyBytes are the bounds the daemon's turns share.
	SharedRequests  = 128
	SharedBodyBytes = 256 << 20
)

// Pool bounds what the model gateways that take from it hold at once: requests in flight
// and the bytes of their buffered request bodies. Each turn's gateway has its own; the
// daemon's gateways share one more (ModelConfig.Shared).
type Pool struct {
	whose                 string // "this turn's", for a refusal that names the bound
	maxRequests, maxBytes int64

	mu              sync.Mutex
	requests, bytes int64
}

// NewPool is the pool the model gateways of a daemon share, with its bounds.
func NewPool(requests, bytes int64) *Pool {
	return &Pool{whose: "the model gateway's (all turns together)", maxRequests: requests, maxBytes: bytes}
}

// errLimit is a bound that is full; its text names it.
type errLimit struct{ msg string }

func (e *errLimit) Error() string { return e.msg }

// errTooLarge is a request body over MaxRequestBytes.
var errTooLarge = fmt.Errorf("the request body exceeds the gateway's limit of %d MiB (%d bytes)", MaxRequestBytes>>20, MaxRequestBytes)

// take adds requests and bytes to what p holds, all or nothing.
func (p *Pool) take(requests, bytes int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.requests+requests > p.maxRequests:
		return &errLimit{fmt.Sprintf("%s limit of %d model requests in flight is reached; retry once one has ended", p.whose, p.maxRequests)}
	case p.bytes+bytes > p.maxBytes:
		return &errLimit{fmt.Sprintf("the request bodies in flight would exceed %s limit of %d MiB; retry once a request has ended", p.whose, p.maxBytes>>20)}
	}
	p.requests += requests
	p.bytes += bytes
	return nil
}

func (p *Pool) give(requests, bytes int64) {
	p.mu.Lock()
	p.requests -= requests
	p.bytes -= bytes
	p.mu.Unlock()
}

// hold is what one request holds in its pools: its place and its body's bytes.
type hold struct {
	pools []*Pool
	bytes int64
}

// admit takes a request's place in every pool, all or nothing.
func admit(pools []*Pool) (*hold, error) {
	h := &hold{pools: pools}
	if err := h.take(1, 0); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *hold) take(requests, bytes int64) error {
	for i, p := range h.pools {
		if err := p.take(requests, bytes); err != nil {
			for _, q := range h.pools[:i] {
				q.give(requests, bytes)
			}
			return err
		}
	}
	h.bytes += bytes
	return nil
}

func (h *hold) give(bytes int64) {
	for _, p := range h.pools {
		p.give(0, bytes)
	}
	h.bytes -= bytes
}

// release gives back everything the request held.
func (h *hold) release() {
	for _, p := range h.pools {
		p.give(1, h.bytes)
	}
	h.bytes = 0
}

// readBody reads a request body once, holding its bytes in h before they are read: all
// of them when the request says its length, else each size its buffer grows to.
func readBody(r *http.Request, h *hold) ([]byte, error) {
	if r.ContentLength > MaxRequestBytes {
		return nil, errTooLarge
	}
	if r.ContentLength >= 0 {
		if err := h.take(0, r.ContentLength); err != nil {
			return nil, err
		}
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
		return body, nil
	}
	var body []byte
	for {
		if len(body) == cap(body) {
			// The buffer is full: a byte more, if there is one, makes it grow.
			var one [1]byte
			if _, err := io.ReadFull(r.Body, one[:]); errors.Is(err, io.EOF) {
				return body, nil
			} else if err != nil {
				return nil, fmt.Errorf("reading the request body: %w", err)
			}
			if len(body) == MaxRequestBytes {
				return nil, errTooLarge
			}
			size := min(max(2*cap(body), 64<<10), MaxRequestBytes)
			if err := h.take(0, int64(size)); err != nil {
				return nil, err
			}
			grown := make([]byte, len(body), size)
			copy(grown, body)
			h.give(int64(cap(body)))
			body = append(grown, one[0])
		}
		n, err := r.Body.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if errors.Is(err, io.EOF) {
			return body, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
	}
}
