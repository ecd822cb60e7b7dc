package delivery_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/delivery"
	"github.com/arizuko/arizukod/store"
)

// receiver is a webhook receiver on a unix socket that checks each push's signature and
// fails the first failFirst pushes (and every push of rows whose content is "poison").
type receiver struct {
	secret    []byte
	failFirst int

	mu     sync.Mutex
	pushes int
	got    []apiwire.OutboxRow
	bad    []string
	change chan struct{}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var row apiwire.OutboxRow
	rc.mu.Lock()
	defer func() {
		rc.mu.Unlock()
		select {
		case rc.change <- struct{}{}:
		default:
		}
	}()
	rc.pushes++
	if sig := r.Header.Get(delivery.HeaderSignature); sig != delivery.Sign(rc.secret, body) {
		rc.bad = append(rc.bad, "bad signature "+sig)
	}
	if err := json.Unmarshal(body, &row); err != nil || r.Header.Get(delivery.HeaderID) != strconv.FormatInt(row.ID, 10) {
		rc.bad = append(rc.bad, "bad body "+string(body))
	}
	if rc.pushes <= rc.failFirst || row.Content == "poison" {
		http.Error(w, "down for maintenance", http.StatusInternalServerError)
		return
	}
	rc.got = append(rc.got, row)
}

func (rc *receiver) wait(t *testing.T, done func() bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		rc.mu.Lock()
		ok := done()
		rc.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-rc.change:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("receiver: %d pushes, got %+v", rc.pushes, rc.got)
		}
	}
}

// TestWebhook: rows reach a unix-socket receiver signed, in order and once each, through
// a receiver that fails at first; a row it always refuses is parked with its answer; a
// filter keeps other folders' rows out.
func TestWebhook(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	secretFile := filepath.Join(dir, "secret")
	os.WriteFile(secretFile, []byte("s3cret\nignored\n"), 0o600)
	rc := &receiver{secret: []byte("s3cret"), failFirst: 3, change: make(chan struct{}, 1)}
	sock := filepath.Join(dir, "hook.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rc}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	hook := config.Webhook{URL: "unix:" + sock, SecretFile: secretFile, Folder: "main", Timeout: 5 * time.Second,
		Backoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	policy := store.LeasePolicy{Visibility: time.Minute, MaxAttempts: 5}
	p, err := delivery.New(st, []config.Webhook{hook}, policy, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	var want []int64
	for i, it := range []store.OutboxItem{
		{Folder: "main", Target: "tg:1", Content: "one"},
		{Folder: "other", Target: "tg:1", Content: "not for this hook"},
		{Folder: "main", Target: "tg:2", Content: "poison"},
		{Folder: "main", Target: "tg:1", Content: "two"},
		{Folder: "main", Target: "tg:3", Content: "three"},
	} {
		it.Kind = store.OutboxMessage
		got, err := st.AppendOutbox(ctx, it)
		if err != nil {
			t.Fatal(err)
		}
		if i != 1 && i != 2 {
			want = append(want, got.ID)
		}
	}
	rc.wait(t, func() bool { return len(rc.got) >= len(want) })
	poison := want[0] + 2
	for {
		it, err := st.GetOutbox(ctx, poison)
		if err != nil {
			t.Fatal(err)
		}
		if it.State == store.OutboxParked {
			if it.Attempts != 5 || it.LastError == "" {
				t.Errorf("parked row %+v, want 5 attempts and the receiver's answer", it)
			}
			break
		}
		rc.wait(t, func() bool { return true })
	}
	cancel()
	wg.Wait()
	ctx = context.Background()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) > 0 {
		t.Errorf("receiver saw %q", rc.bad)
	}
	var ids []int64
	for _, r := range rc.got {
		ids = append(ids, r.ID)
	}
	// The chat tg:1 gets its rows in order; every row arrives once.
	seen := map[int64]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("row %d arrived twice: %v", id, ids)
		}
		seen[id] = true
	}
	if len(ids) != len(want) || !seen[want[0]] || !seen[want[1]] || !seen[want[2]] {
		t.Errorf("receiver got %v, want each of %v once", ids, want)
	}
	for i, r := range rc.got {
		if r.Target == "tg:1" && r.Content == "two" && (i == 0 || rc.got[0].Content != "one") {
			t.Errorf("tg:1 out of order: %+v", rc.got)
		}
	}
	for _, id := range want {
		if it, _ := st.GetOutbox(ctx, id); it.State != store.OutboxDelivered {
			t.Errorf("row %d is %s after its push, want delivered", id, it.State)
		}
	}
	if it, _ := st.GetOutbox(ctx, want[0]+1); it.State != store.OutboxPending || it.Attempts != 0 {
		t.Errorf("the other folder's row: %+v, want untouched", it)
	}
}

func TestNewRefusesMissingSecret(t *testing.T) {
	_, err := delivery.New(nil, []config.Webhook{{URL: "unix:/x.sock", SecretFile: filepath.Join(t.TempDir(), "none")}},
		store.LeasePolicy{}, slog.Default())
	if err == nil || !strings.Contains(err.Error(), "webhook[0].secret_file") {
		t.Errorf("err = %v, want it to name webhook[0].secret_file", err)
	}
}
