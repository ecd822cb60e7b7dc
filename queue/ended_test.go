package queue_test

import (
	"fmt"
	"testing"

	"github.com/arizuko/arizukod/contract"
)

// TestEndedWakesOnlyItsRun: of 200 callers waiting each for a run, the end of one run wakes
// its waiter only; every wait given back leaves nothing behind.
func TestEndedWakesOnlyItsRun(t *testing.T) {
	fx := newFixture(t, options{}, "main")
	id := fx.submit("main", "hello")
	ids := []string{id}
	for i := range 199 {
		ids = append(ids, fmt.Sprintf("run-waiting-%d", i))
	}
	ended := make([]<-chan struct{}, len(ids))
	releases := make([]func(), len(ids))
	for i, w := range ids {
		ended[i], releases[i] = fx.q.Ended(w)
	}
	// A second waiter of the same run shares its channel.
	again, releaseAgain := fx.q.Ended(id)
	if fx.q.Waiting() != len(ids) {
		t.Fatalf("%d runs waited for, want %d", fx.q.Waiting(), len(ids))
	}
	c := fx.next()
	c.create()
	c.exit(contract.StatusOK, "hi")
	<-ended[0]
	<-again
	woken := 0
	for i := range ids {
		select {
		case <-ended[i]:
			woken++
		default:
		}
	}
	if woken != 1 {
		t.Fatalf("the end of one run woke %d of %d waiters, want 1", woken, len(ids))
	}
	for _, release := range releases {
		release()
	}
	releaseAgain()
	if n := fx.q.Waiting(); n != 0 {
		t.Fatalf("%d runs still waited for after every wait was given back", n)
	}
}
