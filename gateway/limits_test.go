package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// blockingUpstream reads each request's body whole into nothing, says so on arrived and
// answers only once release is closed (or the request is gone).
func blockingUpstream(t *testing.T) (up *url.URL, arrived <-chan struct{}, release func()) {
	t.Helper()
	arrive := make(chan struct{}, 64)
	gate := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrive <- struct{}{}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"message","model":"m","content":[],"usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(func() { release(); srv.Close() })
	up, _ = url.Parse(srv.URL)
	return up, arrive, release
}

// patientClient is unixClient whose requests ask "Expect: 100-continue" and wait for it:
// a body the gateway refuses unread is never sent, and the refusal is read whole.
func patientClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		ExpectContinueTimeout: time.Minute,
	}}
}

// messageBody is a Messages request body of size bytes, made as it is read.
func messageBody(size int) io.Reader {
	head, tail := `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"`, `"}]}`
	return io.MultiReader(strings.NewReader(head),
		io.LimitReader(repeatReader('a'), int64(size-len(head)-len(tail))), strings.NewReader(tail))
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// outcome is how one request of a burst ended: 0 when it reached the upstream.
type outcome struct {
	code int
	msg  string
}

// burst sends n requests of size bytes at once and returns, once each has either reached
// the upstream or been answered otherwise, the outcomes, and a wait for the rest, which
// return once the upstream is released.
func burst(t *testing.T, c *http.Client, arrived <-chan struct{}, n, size int) (got []outcome, wait func() []outcome) {
	t.Helper()
	answered := make(chan outcome, n)
	var wg sync.WaitGroup
	var late []outcome
	var mu sync.Mutex
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, "http://model/v1/messages", messageBody(size))
			req.ContentLength = int64(size)
			req.Header.Set("X-Api-Key", "arz-this-turns-token-0123456789")
			req.Header.Set("Expect", "100-continue")
			resp, err := c.Do(req)
			if err != nil {
				answered <- outcome{-1, err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			o := outcome{resp.StatusCode, string(b)}
			if o.code == http.StatusOK {
				mu.Lock()
				late = append(late, o)
				mu.Unlock()
				return
			}
			answered <- o
		})
	}
	for range n {
		select {
		case <-arrived:
			got = append(got, outcome{})
		case o := <-answered:
			got = append(got, o)
		}
	}
	return got, func() []outcome { wg.Wait(); return late }
}

// tally counts the outcomes that reached the upstream and the refusals, checking that each
// refusal is a 429 in the API's shape that names want.
func tally(t *testing.T, got []outcome, want string) (forwarded, refused int) {
	t.Helper()
	for _, o := range got {
		if o.code == 0 {
			forwarded++
			continue
		}
		typ, msg := apiErrorOf(t, o.msg)
		if o.code != http.StatusTooManyRequests || typ != "rate_limit_error" || !strings.Contains(msg, want) {
			t.Errorf("refused with %d %s %q, want 429 rate_limit_error naming %q", o.code, typ, msg, want)
		}
		refused++
	}
	return forwarded, refused
}

// state is what p holds now: requests in flight and buffered body bytes.
func (p *Pool) state() (requests, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests, p.bytes
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestModelBoundsBufferedBodies: 16 parallel 30 MB request bodies of one turn raised the
// daemon's heap by their whole size (each read whole while the others waited for the
// upstream). The turn's gateway holds at most TurnBodyBytes of bodies: the third request
// that would exceed it is refused with a 429 naming the limit, and the live heap grows by
// what is held, not by what was sent.
func TestModelBoundsBufferedBodies(t *testing.T) {
	up, arrived, release := blockingUpstream(t)
	m, _, _ := startModel(t, up, nil)
	c := patientClient(m.cfg.SocketPath)
	const n, size = 16, 30 << 20
	before := liveHeap()
	got, wait := burst(t, c, arrived, n, size)
	grown := int64(liveHeap()) - int64(before)
	requests, bytes := m.pools[0].state()
	forwarded, refused := tally(t, got, "this turn's limit of 64 MiB")
	t.Logf("%d bodies of %d MiB at once: %d forwarded, %d refused; the gateway holds %d MiB, the live heap grew by %d MiB",
		n, size>>20, forwarded, refused, bytes>>20, grown>>20)
	if forwarded != TurnBodyBytes/size || requests != int64(forwarded) || bytes != int64(forwarded*size) {
		t.Errorf("%d forwarded, %d requests and %d bytes held; want %d requests of %d bytes", forwarded, requests, bytes, TurnBodyBytes/size, size)
	}
	if grown > TurnBodyBytes+16<<20 {
		t.Errorf("the live heap grew by %d MiB with %d MiB of bodies held: memory scales with the requests", grown>>20, bytes>>20)
	}
	release()
	if late := wait(); len(late) != forwarded {
		t.Errorf("%d of the %d forwarded requests were answered", len(late), forwarded)
	}
	// A response ends once its handler has returned: it holds nothing any more.
	if requests, bytes := m.pools[0].state(); requests != 0 || bytes != 0 {
		t.Errorf("the turn still holds %d requests and %d bytes after they ended", requests, bytes)
	}
}

// TestModelBoundsRequestsInFlight: a turn has at most TurnRequests requests in flight, and
// the turns that share a Pool at most its requests together; one more is refused with a
// 429 that names whose limit it is.
func TestModelBoundsRequestsInFlight(t *testing.T) {
	t.Run("turn", func(t *testing.T) {
		up, arrived, release := blockingUpstream(t)
		m, _, _ := startModel(t, up, nil)
		got, wait := burst(t, patientClient(m.cfg.SocketPath), arrived, TurnRequests+4, 1024)
		forwarded, refused := tally(t, got, fmt.Sprintf("this turn's limit of %d model requests in flight", TurnRequests))
		if forwarded != TurnRequests || refused != 4 {
			t.Errorf("%d forwarded, %d refused; want %d, 4", forwarded, refused, TurnRequests)
		}
		release()
		wait()
	})
	t.Run("shared", func(t *testing.T) {
		up, arrived, release := blockingUpstream(t)
		shared := NewPool(3, SharedBodyBytes)
		a, _, _ := startModel(t, up, func(c *ModelConfig) { c.Shared = shared })
		b, _, _ := startModel(t, up, func(c *ModelConfig) { c.Shared = shared })
		gotA, waitA := burst(t, patientClient(a.cfg.SocketPath), arrived, 2, 1024)
		gotB, waitB := burst(t, patientClient(b.cfg.SocketPath), arrived, 2, 1024)
		forwardedA, _ := tally(t, gotA, "")
		forwardedB, refusedB := tally(t, gotB, "the model gateway's (all turns together) limit of 3 model requests in flight")
		if forwardedA != 2 || forwardedB != 1 || refusedB != 1 {
			t.Errorf("turn a: %d forwarded; turn b: %d forwarded, %d refused; want 2; 1, 1", forwardedA, forwardedB, refusedB)
		}
		release()
		waitA()
		waitB()
	})
}

// TestModelRequestBodyOfUnknownLength: a body sent without its length is read as its
// buffer grows, up to MaxRequestBytes; one byte more is a 413.
func TestModelRequestBodyOfUnknownLength(t *testing.T) {
	up, arrived, release := blockingUpstream(t)
	release()
	m, c, _ := startModel(t, up, nil)
	for _, tc := range []struct {
		size int
		code int
	}{{200 << 10, 200}, {MaxRequestBytes, 200}, {MaxRequestBytes + 1, 413}} {
		req, _ := http.NewRequest(http.MethodPost, "http://model/v1/messages", messageBody(tc.size))
		req.ContentLength = -1
		req.Header.Set("X-Api-Key", "arz-this-turns-token-0123456789")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || tc.code == 413 && errorType(t, string(b)) != "request_too_large" {
			t.Errorf("%d bytes: %d %s, want %d", tc.size, resp.StatusCode, b, tc.code)
		}
		if tc.code == 200 {
			<-arrived
		}
	}
	if requests, bytes := m.pools[0].state(); requests != 0 || bytes != 0 {
		t.Errorf("the turn still holds %d requests and %d bytes", requests, bytes)
	}
}
