package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// execute runs one run to its end and records how it ended, or puts it back in the queue
// (no input, or no engine), or leaves it to be adopted (detached, or orphaned).
func (q *Queue) execute(ctx context.Context, run *store.Run, adoptContainer string) {
	log := q.log.With(logging.FieldRunID, run.ID, logging.FieldFolder, run.Folder)
	made := func() {}
	q.mu.Lock()
	if fl := q.inflight[run.ID]; fl != nil && fl.made != nil {
		made = fl.made
	}
	q.mu.Unlock()
	defer made()
	f, err := groupfolder.Parse(run.Folder)
	if err != nil {
		q.finish(ctx, run, runner.Result{Failure: runner.FailMisconfig, Terminal: true,
			Output: contract.Output{Status: contract.StatusFatal, Error: err.Error()}}, log)
		return
	}
	// A kill that came before the run was in flight here (against the previous daemon, or
	// between the store's start and this one) found nothing to cancel: the store has it.
	if now, err := q.cfg.Store.GetRun(ctx, run.ID); err == nil && now.KillRequestedAt != 0 {
		q.Kill(run.ID)
	}
	if ctx.Err() != nil {
		q.finish(ctx, run, q.killedBeforeStart(ctx, run, f, adoptContainer), log)
		return
	}
	var in RunInput
	if len(run.Input) > 0 {
		if err := json.Unmarshal(run.Input, &in); err != nil {
			q.finish(ctx, run, misconfig("stored input: %v", err), log)
			return
		}
	}
	req := turn.Request{
		RunID: run.ID, Folder: f, TaskID: run.TaskID, Messages: in.Messages,
		SessionID: in.SessionID, SenderJID: in.SenderJID, ChatJID: in.ChatJID,
		Timeout: time.Duration(run.TimeoutMS) * time.Millisecond, Isolated: run.Kind == store.KindTask,
		Recorded: true, Wake: func(string) { q.Wake() },
		Queued: time.UnixMilli(run.CreatedAt), Picked: time.UnixMilli(run.StartedAt),
	}
	if adoptContainer != "" {
		req.Adopt = &turn.Adoption{Container: adoptContainer, StartedAt: time.UnixMilli(run.StartedAt),
			InputSent: run.InputSentAt != 0}
	}
	if adoptContainer == "" {
		if err := q.fence.waitDescendants(ctx, f); err != nil {
			q.finish(ctx, run, q.killedBeforeStart(ctx, run, f, adoptContainer), log)
			return
		}
	}
	// The container's name: the runner's (set before any stderr line), or the adopted one,
	// which takes steering only once its MCP server, sidecars and gateways are back.
	container := adoptContainer
	res, err := q.cfg.Turns.Run(ctx, req, q.cfg.Runner, turn.Watch{
		Detach: q.detach,
		OnReady: func() {
			if adoptContainer == "" {
				return
			}
			q.setContainer(run.ID, adoptContainer)
			log.Info("turn adopted: its servers are back and it takes steering", logging.FieldContainer, adoptContainer)
		},
		OnCreated: func(name, id string) {
			container = name
			q.setContainer(run.ID, id)
			if err := q.cfg.Store.SetContainer(context.WithoutCancel(ctx), run.ID, name); err != nil {
				log.Error("record container", logging.FieldContainer, name, "err", err)
			}
			log.Info("turn started", logging.FieldContainer, name)
		},
		OnStderr: func(line string) {
			log.Info(line, logging.FieldStream, "stderr", logging.FieldContainer, container)
		},
		OnPhases: func(p turn.Phases) {
			if err := q.cfg.Store.SetPhases(context.WithoutCancel(ctx), run.ID, storePhases(p)); err != nil {
				log.Error("record turn phases", "err", err)
			}
		},
		// What a later adoption needs to tell an agent that never got its input from one
		// that may have acted on it.
		OnInput: func() {
			made()
			if err := q.cfg.Store.MarkInputSent(context.WithoutCancel(ctx), run.ID); err != nil {
				log.Error("record input sent", "err", err)
			}
		},
	})
	if err != nil {
		q.finish(ctx, run, killedOr(ctx, misconfig("%v", err)), log)
		return
	}
	if res.Failure == runner.FailDetached {
		log.Info("turn detached: the daemon is stopping; the next start adopts it", logging.FieldContainer, res.Container)
		return
	}
	if res.Failure == runner.FailNoInput && run.Attempt <= q.cfg.RetryMax {
		// Nothing the agent did depended on the turn: run it again from the start, in a
		// new container. A kill requested meanwhile refuses the requeue and ends it below.
		if err := q.cfg.Store.RequeueRun(context.WithoutCancel(ctx), run.ID); err == nil {
			log.Warn("the turn's input never reached the agent: run requeued", "attempt", run.Attempt, logging.FieldContainer, res.Container, "err", res.Output.Error)
			return
		}
	}
	if res.Failure == runner.FailEngine && container == "" && ctx.Err() != nil {
		res = killedOr(ctx, res)
	}
	if res.Failure == runner.FailEngine {
		up := q.cfg.CheckEngine(context.WithoutCancel(ctx))
		switch {
		case container != "" && !up:
			// The container exists and may well run on: the run stays running, and its
			// container is adopted once the engine answers again.
			q.mu.Lock()
			if fl := q.inflight[run.ID]; fl != nil {
				fl.orphan = container
			}
			q.mu.Unlock()
			log.Warn("engine unavailable: the run's container is adopted when it is back", logging.FieldContainer, container, "err", res.Output.Error)
			return
		case container == "" && (!up || run.Attempt <= q.cfg.RetryMax):
			// No container was made, so nothing ran: put the run back. The engine may
			// already be back by now (it failed while the engine was away), and while it
			// stays away the queue starts nothing; a failure that repeats with the engine
			// up ends the run after RetryMax attempts.
			if err := q.cfg.Store.RequeueRun(context.WithoutCancel(ctx), run.ID); err == nil {
				log.Warn("engine unavailable: run requeued", "attempt", run.Attempt, "err", res.Output.Error)
				return
			}
		}
	}
	q.finish(ctx, run, res, log)
}

// setContainer is what steering signals for the run in flight: the container's id, or the
// adopted container's name.
func (q *Queue) setContainer(id, container string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if fl := q.inflight[id]; fl != nil {
		fl.container = container
	}
}

// killedBeforeStart ends a run killed before it was in flight here without preparing it:
// a new one never gets a container; an adopted container is stopped, collected and removed.
func (q *Queue) killedBeforeStart(ctx context.Context, run *store.Run, f groupfolder.Folder, adoptContainer string) runner.Result {
	killed := killedOr(ctx, runner.Result{})
	if adoptContainer == "" {
		return killed
	}
	res, err := q.cfg.Runner.Adopt(ctx, runner.Turn{RunID: run.ID, Folder: f}, adoptContainer, time.UnixMilli(run.StartedAt))
	if err != nil || res.Failure == runner.FailNoInput {
		return killed
	}
	return res
}

// killedOr is res, unless the run was killed (ctx is cancelled only by Kill): a failure
// while the turn was being prepared is then the kill's doing, and the run ends killed.
func killedOr(ctx context.Context, res runner.Result) runner.Result {
	if ctx.Err() == nil {
		return res
	}
	return runner.Result{Failure: runner.FailKilled,
		Output: contract.Output{Status: contract.StatusFatal, Error: "run killed on request before its container started"}}
}

// storePhases are p in the store's milliseconds.
func storePhases(p turn.Phases) store.Phases {
	return store.Phases{PrepareMS: p.Prepare.Milliseconds(), SidecarsMS: p.Sidecars.Milliseconds(),
		CreateMS: p.Create.Milliseconds(), StartMS: p.Start.Milliseconds(), RunMS: p.Run.Milliseconds(),
		FinishMS: p.Finish.Milliseconds()}
}

func misconfig(format string, args ...any) runner.Result {
	return runner.Result{Failure: runner.FailMisconfig, Terminal: true,
		Output: contract.Output{Status: contract.StatusFatal, Error: fmt.Sprintf(format, args...)}}
}
