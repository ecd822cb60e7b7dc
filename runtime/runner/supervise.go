package runner

import (
	"context"
	"errors"
	"time"

	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/runtime/engine"
)

// supervise waits for the container to exit, writing the _close sentinel at the soft
// deadline and stopping it at the hard one, both counted from started. It returns why the
// runner ended the container, if it did, and the final state.
func (tr *turnRun) supervise(ctx context.Context, timeout time.Duration, started time.Time, streamEnd <-chan struct{}) (Failure, waitResult) {
	e := tr.r.cfg.Engine
	bg := context.WithoutCancel(ctx)
	wctx, cancelWait := context.WithCancel(bg)
	defer cancelWait()
	waited := make(chan waitResult, 1)
	go func() {
		st, err := e.Wait(wctx, tr.id)
		waited <- waitResult{st, err}
	}()
	soft := time.NewTimer(max(0, time.Until(started.Add(QueryTimeout(timeout)))))
	hard := time.NewTimer(max(0, time.Until(started.Add(timeout))))
	defer soft.Stop()
	defer hard.Stop()
	for {
		select {
		case w := <-waited:
			return FailNone, w
		case <-streamEnd:
			// The output ends when the agent exits: a few quick inspects see the exit sooner
			// than the engine's wait, which libpod 4.3 polls every 250 ms.
			streamEnd = nil
			if st, ok := tr.exitedAfterStream(bg); ok {
				return FailNone, waitResult{state: st}
			}
		case <-soft.C:
			tr.note("soft deadline: wrote %s", CloseSentinel)
			if err := tr.r.writeClose(tr.t.Folder); err != nil {
				tr.log.Warn("write close sentinel", logging.FieldContainer, tr.res.Container, "err", err)
			}
		case <-hard.C:
			tr.note("hard deadline after %s: stopping", timeout)
			tr.stop(bg, tr.id)
			return FailTimeout, <-waited
		case <-ctx.Done():
			tr.note("killed: %v", context.Cause(ctx))
			tr.stop(bg, tr.id)
			return FailKilled, <-waited
		case <-tr.t.Detach:
			tr.note("detached: the container keeps running")
			tr.res.Failure = FailDetached
			return FailDetached, waitResult{}
		}
	}
}

// exitedAfterStream inspects the container a few times over about 60 ms and returns its
// state once it is no longer running. An agent that closed its output and keeps running is
// left to Wait.
func (tr *turnRun) exitedAfterStream(ctx context.Context) (engine.State, bool) {
	for delay := time.Duration(0); delay <= 32*time.Millisecond; delay = max(2*time.Millisecond, 2*delay) {
		time.Sleep(delay)
		st, err := tr.r.cfg.Engine.Inspect(ctx, tr.id)
		if err != nil {
			return engine.State{}, false
		}
		if !st.Running && st.Status != "created" {
			return st, true
		}
	}
	return engine.State{}, false
}

type waitResult struct {
	state engine.State
	err   error
}

// stop asks the container to stop with grace, then kills it; removal follows in Run.
func (tr *turnRun) stop(ctx context.Context, id string) {
	e := tr.r.cfg.Engine
	sctx, cancel := context.WithTimeout(ctx, tr.r.cfg.StopGrace+15*time.Second)
	defer cancel()
	if err := e.Stop(sctx, id, tr.r.cfg.StopGrace); err != nil && !errors.Is(err, engine.ErrNoSuchContainer) {
		tr.note("stop failed: %v; killing", err)
		if err := e.Signal(ctx, id, "SIGKILL"); err != nil {
			tr.note("kill failed: %v", err)
		}
	}
}
