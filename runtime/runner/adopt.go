package runner

import (
	"context"
	"errors"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/runtime/engine"
)

// Adopt takes over a run whose container a previous daemon left running (or exited): it
// supervises it to the end of its timeout, counted from startedAt, collects its output from
// the engine's log, removes it and returns the Result as Run would have.
func (r *Runner) Adopt(ctx context.Context, t Turn, container string, startedAt time.Time) (Result, error) {
	res := Result{RunID: t.RunID, Container: container}
	timeout := r.timeout(t)
	dirs, err := r.cfg.Layout.Paths(t.Folder)
	if err != nil {
		return res, err
	}
	tr := &turnRun{r: r, t: t, log: r.turnLog(t), res: &res, dirs: dirs, started: startedAt, stamp: r.stamp(startedAt), id: container}
	// A kill already requested (ctx cancelled) still needs the container found and stopped.
	st, err := r.cfg.Engine.Inspect(context.WithoutCancel(ctx), container)
	if err != nil {
		if errors.Is(err, engine.ErrNoSuchContainer) {
			tr.fail(FailLost, false, "container %s vanished while the daemon was away", container)
			res.Duration = time.Since(startedAt)
			tr.writeLog()
			return res, nil
		}
		return res, err
	}
	tr.note("adopted after a daemon restart")
	defer tr.remove(ctx)
	if neverStarted(st) {
		// The daemon stopped between creating and starting it: no agent ever ran.
		tr.fail(FailNoInput, false, "the container was created but never started (%s)", st.Status)
		res.Duration = time.Since(startedAt)
		tr.writeLog()
		return res, nil
	}
	cause, w := tr.supervise(ctx, timeout, startedAt, nil)
	if cause == FailDetached {
		return res, nil
	}
	capture := &contract.Capture{}
	if err := r.cfg.Engine.Logs(ctx, container, capture, tr.stderrWriter()); err != nil {
		tr.note("read logs: %v", err)
	}
	tr.classify(cause, w, capture, 0, timeout, t.InputSent)
	res.Duration = time.Since(startedAt)
	tr.writeLog()
	return res, nil
}

// neverStarted reports whether st is a container that was created and never started.
func neverStarted(st engine.State) bool {
	return !st.Running && (st.StartedAt.IsZero() || unstarted(st.Status))
}
