package queue

import (
	"context"
	"testing"
	"time"

	"github.com/arizuko/arizukod/groupfolder"
)

// TestFenceWaitsForDescendants: an ancestor waits while a descendant's container is being
// made, and only for descendants.
func TestFenceWaitsForDescendants(t *testing.T) {
	fe := newFence()
	made := fe.enter("main/research")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	for _, f := range []groupfolder.Folder{"main/research", "mainly", "other", "main/other"} {
		if err := fe.waitDescendants(ctx, f); err != nil {
			t.Errorf("%s waited for main/research: %v", f, err)
		}
	}
	if err := fe.waitDescendants(ctx, "main"); err == nil {
		t.Fatal("main did not wait for main/research being made")
	}
	done := make(chan error, 1)
	go func() { done <- fe.waitDescendants(context.Background(), "main") }()
	made()
	made() // a second call is a no-op
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(fe.mounting) != 0 {
		t.Fatalf("mounting left: %v", fe.mounting)
	}
}
