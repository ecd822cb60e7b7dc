package queue

import (
	"context"
	"slices"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/store"
)

// dispatch makes inbox runs and starts what the store lets start.
func (q *Queue) dispatch(ctx context.Context) {
	if !q.cfg.EngineUp() {
		return
	}
	q.adoptOrphans(ctx)
	q.cfg.Runner.RetryRemovals(ctx)
	q.makeInboxRuns(ctx)
	for ctx.Err() == nil {
		run, err := q.cfg.Store.StartNext(ctx, q.cfg.MaxRunning)
		if err != nil {
			q.log.Error("start next run", "err", err)
			return
		}
		if run == nil {
			return
		}
		q.cfg.OnChange()
		q.start(ctx, run, "")
	}
}

// adoptOrphans adopts the containers of the runs the engine dropped while it was away.
func (q *Queue) adoptOrphans(ctx context.Context) {
	q.mu.Lock()
	orphans := q.orphans
	q.orphans = map[string]string{}
	q.mu.Unlock()
	for id, container := range orphans {
		run, err := q.cfg.Store.GetRun(ctx, id)
		if err != nil {
			q.log.Error("adopt after the engine came back", logging.FieldRunID, id, "err", err)
			continue
		}
		q.log.Info("adopting run after the engine came back", logging.FieldRunID, id, logging.FieldFolder, run.Folder, logging.FieldContainer, container)
		q.start(ctx, run, container)
	}
}

// start runs one run in its own goroutine; container is set when adopting.
func (q *Queue) start(ctx context.Context, run *store.Run, container string) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := groupfolder.Folder(run.Folder)
	fl := &flight{cancel: cancel, folder: f}
	if container == "" {
		// Inside the fence before the next run is taken: an ancestor's run started after
		// this one waits for this container to be made.
		fl.made = q.fence.enter(f)
	}
	q.mu.Lock()
	q.inflight[run.ID] = fl
	q.mu.Unlock()
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		defer cancel()
		q.execute(rctx, run, container)
		q.mu.Lock()
		if fl := q.inflight[run.ID]; fl != nil && fl.orphan != "" {
			q.orphans[run.ID] = fl.orphan
		}
		delete(q.inflight, run.ID)
		close(q.changed)
		q.changed = make(chan struct{})
		if w := q.ended[run.ID]; w != nil {
			close(w.ch)
			delete(q.ended, run.ID)
		}
		q.mu.Unlock()
		q.cfg.OnChange()
		q.Wake()
		if run.Kind == store.KindTurn {
			q.prepare(ctx, f)
		}
	}()
}

// prepare has f's next container made ahead, unless the queue is stopping or a run of an
// ancestor folder is in flight (see fence).
func (q *Queue) prepare(ctx context.Context, f groupfolder.Folder) {
	if q.cfg.Prepare <= 0 || ctx.Err() != nil {
		return
	}
	q.mu.Lock()
	busy := q.ancestorInFlight(f)
	var made func()
	if !busy {
		made = q.fence.enter(f)
	}
	q.mu.Unlock()
	if busy {
		q.log.Debug("not preparing the next container while an ancestor's turn runs", logging.FieldFolder, string(f))
		return
	}
	defer made()
	if err := q.cfg.Turns.Prepare(ctx, f, q.cfg.Runner); err != nil {
		q.log.Warn("preparing the next container", logging.FieldFolder, string(f), "err", err)
	}
}

// prepareRecent prepares the containers of the folders that ran last, in the background.
func (q *Queue) prepareRecent(ctx context.Context) {
	if q.cfg.Prepare <= 0 {
		return
	}
	folders, err := q.cfg.Store.RecentFolders(ctx, q.cfg.Prepare)
	if err != nil {
		q.log.Warn("preparing containers", "err", err)
		return
	}
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		// The least recent first: the bounds keep the containers made last, and the warm
		// agents (runtime/runner) are to be the most recently active folders'.
		for _, name := range slices.Backward(folders) {
			if f, err := groupfolder.Parse(name); err == nil {
				q.prepare(ctx, f)
			}
		}
	}()
}
