package queue

import (
	"context"
	"sync"

	"github.com/arizuko/arizukod/groupfolder"
)

// fence keeps an ancestor's agent from running while a descendant's container is being
// made. An ancestor's container has the descendant's group folder inside its own
// /workspace, read-write, so its agent could swap that folder for a symlink; the engine
// resolves a bind mount's source by path when it makes the container, after the daemon's
// last look (groupfolder.Layout.Ensure). So the two never overlap:
//
//   - a run does not start while one of an ancestor folder runs (store.StartNext);
//   - a folder's container is made (a run's, until its agent has its input, or a prepared
//     one) only while no ancestor's run is in flight here, inside the fence;
//   - a run waits for the containers of its descendants being made inside the fence to be
//     made before its own is started.
type fence struct {
	mu       sync.Mutex
	mounting map[groupfolder.Folder]int
	changed  chan struct{} // closed and replaced when a folder leaves
}

func newFence() *fence {
	return &fence{mounting: map[groupfolder.Folder]int{}, changed: make(chan struct{})}
}

// enter marks f's container as being made; the returned func (safe to call more than
// once) marks it made.
func (fe *fence) enter(f groupfolder.Folder) func() {
	fe.mu.Lock()
	fe.mounting[f]++
	fe.mu.Unlock()
	return sync.OnceFunc(func() {
		fe.mu.Lock()
		if fe.mounting[f]--; fe.mounting[f] == 0 {
			delete(fe.mounting, f)
		}
		close(fe.changed)
		fe.changed = make(chan struct{})
		fe.mu.Unlock()
	})
}

// waitDescendants waits until no container of a folder below f is being made.
func (fe *fence) waitDescendants(ctx context.Context, f groupfolder.Folder) error {
	for {
		fe.mu.Lock()
		busy := false
		for g := range fe.mounting {
			if f.IsAncestorOf(g) {
				busy = true
				break
			}
		}
		changed := fe.changed
		fe.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-changed:
		}
	}
}

// ancestorInFlight says whether a run of a folder above f is in flight. Call with q.mu
// held.
func (q *Queue) ancestorInFlight(f groupfolder.Folder) bool {
	for _, fl := range q.inflight {
		if fl.folder.IsAncestorOf(f) {
			return true
		}
	}
	return false
}
