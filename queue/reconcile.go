package queue

import (
	"context"

	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/runtime/engine"
)

// reconcile runs once the engine first answers. The runs the store says are running were
// detached from or orphaned by a previous daemon: each is adopted by its container (still
// running or exited) or recorded as lost. Every other container of this instance is a
// leftover and is removed.
func (q *Queue) reconcile(ctx context.Context) error {
	runs, err := q.cfg.Store.ListRunning(ctx)
	if err != nil {
		return err
	}
	adopt := map[string]bool{}
	for _, r := range runs {
		if r.Container != "" {
			adopt[r.Container] = true
		}
	}
	removed, err := q.cfg.Runner.RemoveLeftovers(ctx, func(c engine.Container) bool { return adopt[c.Name] })
	if err != nil {
		return err
	}
	if len(removed) > 0 {
		q.log.Info("removed leftover containers", "count", len(removed))
	}
	for i := range runs {
		run := &runs[i]
		if run.Container == "" && run.KillRequestedAt != 0 {
			// Killed before its container was made: it ends killed as it starts (a
			// requeue would refuse it, and reconciling would never finish).
			q.start(ctx, run, "")
			continue
		}
		if run.Container == "" {
			// It died before its container was made: run it again from the start.
			if err := q.cfg.Store.RequeueRun(ctx, run.ID); err != nil {
				return err
			}
			q.log.Info("run requeued: the previous daemon stopped before its container existed", logging.FieldRunID, run.ID, logging.FieldFolder, run.Folder)
			continue
		}
		q.log.Info("adopting run", logging.FieldRunID, run.ID, logging.FieldFolder, run.Folder, logging.FieldContainer, run.Container)
		q.start(ctx, run, run.Container)
	}
	return nil
}
