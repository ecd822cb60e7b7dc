package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/store"
)

// killingQueue is the queue's part of a kill: the run's container stops a moment after
// the kill is asked, and its turn ends.
type killingQueue struct {
	stillQueue
	st    *store.Store
	ended chan struct{}
}

func (q *killingQueue) Kill(id string) bool {
	go func() {
		time.Sleep(200 * time.Millisecond)
		q.st.FinishRun(context.Background(), id, store.Outcome{State: store.RunKilled, Status: store.StatusError, Failure: store.FailureKilled})
		close(q.ended)
	}()
	return true
}

func (q *killingQueue) Ended(string) (<-chan struct{}, func()) { return q.ended, func() {} }

// TestRunsKill: `runs kill` prints the run once the kill is done (killed, ended), not as
// it was when the kill was asked.
func TestRunsKill(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	socket := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.New(st, &killingQueue{st: st, ended: make(chan struct{})}, okHealth{}, slog.New(slog.NewTextHandler(io.Discard, nil)))}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	if _, err := st.CreateRun(ctx, store.Run{Folder: "main"}); err != nil {
		t.Fatal(err)
	}
	run, err := st.StartNext(ctx, 1)
	if err != nil || run == nil {
		t.Fatalf("start: %v %v", run, err)
	}
	stdout, stderr, code := runCLI(t, []string{"runs", "kill", run.ID, "--socket", socket})
	var got apiwire.Run
	if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || got.State != "killed" || got.EndedAt == "" {
		t.Errorf("runs kill: exit %d, state %q ended %q (%v), want the run killed and ended\n%s%s", code, got.State, got.EndedAt, err, stdout, stderr)
	}
}
