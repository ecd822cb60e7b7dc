package queue

import (
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/store"
)

// TestOutcome pins the cursor rule of seed 000: ok and error advance, fatal retries with
// backoff, misconfiguration parks, a kill counts as handled; runs not made from the inbox
// never touch the cursor.
func TestOutcome(t *testing.T) {
	inbox := &store.Run{InboxFirst: 1, InboxLast: 2}
	api := &store.Run{}
	task := &store.Run{Kind: store.KindTask, TaskID: "t1"}
	out := func(s contract.Status) contract.Output { return contract.Output{Status: s, NewSessionID: "s2"} }
	cases := []struct {
		name     string
		run      *store.Run
		res      runner.Result
		state    store.RunState
		status   store.Status
		op       store.CursorOp
		saveSess bool
		wantFail store.Failure
		wantTerm bool
	}{
		{"ok advances", inbox, runner.Result{Output: out(contract.StatusOK)}, store.RunExited, store.StatusOK, store.CursorAdvance, true, "", false},
		{"error advances", inbox, runner.Result{Output: out(contract.StatusError)}, store.RunExited, store.StatusError, store.CursorAdvance, true, "", false},
		{"fatal retries", inbox, runner.Result{Output: out(contract.StatusFatal)}, store.RunError, store.StatusFatal, store.CursorRetry, false, "", false},
		{"no output retries", inbox, runner.Result{Failure: runner.FailNoOutput, Output: out(contract.StatusFatal)}, store.RunError, store.StatusFatal, store.CursorRetry, false, "no-output", false},
		{"misconfig parks", inbox, runner.Result{Failure: runner.FailMisconfig, Terminal: true, Output: out(contract.StatusFatal)}, store.RunError, store.StatusFatal, store.CursorPark, false, store.FailureMisconfig, true},
		{"kill advances", inbox, runner.Result{Failure: runner.FailKilled, Output: out(contract.StatusFatal)}, store.RunKilled, store.StatusFatal, store.CursorAdvance, false, store.FailureKilled, false},
		{"timeout with an answer", inbox, runner.Result{Failure: runner.FailTimeout, Output: out(contract.StatusOK)}, store.RunExited, store.StatusOK, store.CursorAdvance, true, store.FailureTimeout, false},
		{"oom retries", inbox, runner.Result{Failure: runner.FailOOM, Output: out(contract.StatusFatal)}, store.RunError, store.StatusFatal, store.CursorRetry, false, store.FailureOOM, false},
		{"api run has no cursor", api, runner.Result{Output: out(contract.StatusOK)}, store.RunExited, store.StatusOK, store.CursorNone, true, "", false},
		{"task keeps no session", task, runner.Result{Output: out(contract.StatusOK)}, store.RunExited, store.StatusOK, store.CursorNone, false, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := outcome(c.run, c.res, 5, time.Minute)
			if o.State != c.state || o.Status != c.status || o.Cursor.Op != c.op || o.SaveSession != c.saveSess || o.Failure != c.wantFail || o.Terminal != c.wantTerm {
				t.Fatalf("outcome = %+v", o)
			}
			if c.op == store.CursorRetry && (o.Cursor.Backoff != time.Minute || o.Cursor.MaxRetries != 5) {
				t.Fatalf("retry without backoff: %+v", o.Cursor)
			}
		})
	}
}

func TestRetryBackoffDoubles(t *testing.T) {
	q := &Queue{cfg: Config{RetryBackoff: 10 * time.Second}}
	for attempt, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 4: 80 * time.Second, 30: time.Hour} {
		if got := q.retryBackoff(attempt); got != want {
			t.Errorf("attempt %d: backoff %s, want %s", attempt, got, want)
		}
	}
}
