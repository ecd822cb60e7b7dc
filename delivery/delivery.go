// Package delivery pushes outbox rows to the operator's webhooks ([[webhook]] in
// arizukod.toml). One worker per webhook leases the pending rows matching its filters
// through the store's lease state (the same one GET /v1/outbox hands out), POSTs each as
// the JSON row of the API, signed with X-Arizuko-Signature: sha256=HMAC-SHA256(secret,
// body), acknowledges it on a 2xx answer and otherwise records the failure, retrying with
// a doubling backoff until the store parks the row after max_attempts.
//
// It owns the push and its retries. It must not touch runs, the queue, engines or the
// rows' content, and sends nothing off the machine: the configuration admits only
// loopback and unix-socket receivers.
package delivery

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/store"
)

// Headers of a push.
const (
	HeaderSignature = "X-Arizuko-Signature" // sha256=HEX of the body
	HeaderID        = "X-Arizuko-Outbox-Id" // the row's id: the receiver's idempotency key
	HeaderAttempt   = "X-Arizuko-Attempt"   // 1 for the first try
)

// leaseWait is how long a worker's lease waits for rows before it asks again.
const leaseWait = 30 * time.Second

// Store is what the workers need of the store.
type Store interface {
	WaitOutbox(ctx context.Context, f store.OutboxFilter, p store.LeasePolicy, wait time.Duration) (store.OutboxLease, error)
	AckOutbox(ctx context.Context, token string, ids []int64) (int, error)
	FailOutbox(ctx context.Context, token string, id int64, reason string, retryAfter time.Duration, p store.LeasePolicy) (*store.OutboxItem, error)
	ReleaseOutbox(ctx context.Context, token string, ids []int64) error
}

// Pusher runs one worker per webhook.
type Pusher struct {
	st      Store
	policy  store.LeasePolicy
	workers []*worker
	log     *slog.Logger
}

type worker struct {
	hook   config.Webhook
	secret []byte
	client *http.Client
	target string // the URL requested
}

// New reads each webhook's secret (the first line of its secret_file, which must not be
// empty) and returns the pusher; an unreadable secret is an error naming the webhook.
func New(st Store, hooks []config.Webhook, policy store.LeasePolicy, log *slog.Logger) (*Pusher, error) {
	p := &Pusher{st: st, policy: policy, log: log}
	for i, h := range hooks {
		secret, err := readSecret(h.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("webhook[%d].secret_file: %w", i, err)
		}
		w := &worker{hook: h, secret: secret, target: h.URL}
		tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 1}
		if sock := h.Unix(); sock != "" {
			w.target = "http://localhost/"
			tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			}
		} else {
			// Never through a proxy: the receiver is on this machine.
			tr.Proxy = nil
		}
		w.client = &http.Client{Transport: tr, Timeout: h.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		p.workers = append(p.workers, w)
	}
	return p, nil
}

func readSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	line = strings.TrimSpace(line)
	if line == "" {
		return nil, fmt.Errorf("%s: the first line is empty: write the shared secret there", path)
	}
	return []byte(line), nil
}

// Secrets are the webhooks' shared secrets, in the order of the webhooks: the daemon
// redacts them.
func (p *Pusher) Secrets() []string {
	out := make([]string, len(p.workers))
	for i, w := range p.workers {
		out[i] = string(w.secret)
	}
	return out
}

// Sign is the X-Arizuko-Signature value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Run runs the workers until ctx ends.
func (p *Pusher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range p.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.run(ctx, w)
		}()
	}
	wg.Wait()
}

func (p *Pusher) run(ctx context.Context, w *worker) {
	log := p.log.With("webhook", w.hook.URL)
	f := store.OutboxFilter{Folder: w.hook.Folder, Platform: w.hook.Platform, Limit: 100}
	for ctx.Err() == nil {
		lease, err := p.st.WaitOutbox(ctx, f, p.policy, leaseWait)
		if err != nil {
			if ctx.Err() == nil {
				log.Error("webhook: leasing outbox rows", "err", err)
				sleep(ctx, w.hook.Backoff)
			}
			continue
		}
		if pause := p.push(ctx, w, lease, log); pause > 0 {
			sleep(ctx, pause)
		}
	}
}

// push delivers the leased rows in order. At the first failure it records it, hands the
// rest back untried and returns how long to pause: the receiver is likely down for all of
// them.
func (p *Pusher) push(ctx context.Context, w *worker, lease store.OutboxLease, log *slog.Logger) time.Duration {
	items := lease.Items
	for i, it := range items {
		if ctx.Err() != nil {
			p.release(lease.Token, items[i:], log)
			return 0
		}
		// A push under way finishes (within the webhook's timeout) when the daemon stops,
		// so a row the receiver took is acked, not sent again by the next daemon.
		err := w.post(context.WithoutCancel(ctx), it)
		if err == nil {
			if _, err := p.st.AckOutbox(context.WithoutCancel(ctx), lease.Token, []int64{it.ID}); err != nil {
				log.Error("webhook: acking a delivered row", "outbox_id", it.ID, "err", err)
			}
			continue
		}
		delay := backoff(w.hook.Backoff, w.hook.MaxBackoff, it.Attempts)
		failed, ferr := p.st.FailOutbox(context.WithoutCancel(ctx), lease.Token, it.ID, err.Error(), delay, p.policy)
		switch {
		case ferr != nil:
			log.Error("webhook: recording a failed delivery", "outbox_id", it.ID, "err", ferr)
		case failed.State == store.OutboxParked:
			log.Error("webhook: outbox row parked", "outbox_id", it.ID, "attempts", it.Attempts, "err", err)
		default:
			log.Warn("webhook: delivery failed; retrying", "outbox_id", it.ID, "attempt", it.Attempts, "retry_in", delay, "err", err)
		}
		p.release(lease.Token, items[i+1:], log)
		return delay
	}
	return 0
}

func (p *Pusher) release(token string, items []store.OutboxItem, log *slog.Logger) {
	if len(items) == 0 {
		return
	}
	ids := make([]int64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.st.ReleaseOutbox(ctx, token, ids); err != nil {
		log.Error("webhook: handing back untried rows", "err", err)
	}
}

// backoff is first doubled for each attempt after the first, at most most.
func backoff(first, most time.Duration, attempt int) time.Duration {
	d := first
	for i := 1; i < attempt && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// Row is an outbox item as every gateway gets it: pushed here to a webhook, or pulled
// from the API's outbox stream, which renders its rows with this too.
func Row(it store.OutboxItem) apiwire.OutboxRow {
	return apiwire.OutboxRow{ID: it.ID, Folder: it.Folder, RunID: it.RunID, Kind: string(it.Kind), Target: it.Target,
		Platform: it.Platform, Content: it.Content, DocPath: it.DocPath, DocName: it.DocName, CreatedAt: it.CreatedAt,
		State: string(it.State), Attempts: it.Attempts, LeaseUntil: it.LeaseUntil, LastError: it.LastError,
		DeliveredAt: it.DeliveredAt}
}

// post sends one row; any answer but a 2xx is an error saying what came back.
func (w *worker) post(ctx context.Context, it store.OutboxItem) error {
	body, err := json.Marshal(Row(it))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "arizukod-webhook")
	req.Header.Set(HeaderSignature, Sign(w.secret, body))
	req.Header.Set(HeaderID, strconv.FormatInt(it.ID, 10))
	req.Header.Set(HeaderAttempt, strconv.Itoa(it.Attempts))
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook %s: %w", w.hook.URL, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook %s answered %s: %s", w.hook.URL, resp.Status, strings.TrimSpace(string(answer)))
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
