package queue

import (
	"context"
	"log/slog"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/store"
)

// finish records the end of a run with its cursor and session, and logs it.
func (q *Queue) finish(ctx context.Context, run *store.Run, res runner.Result, log *slog.Logger) {
	ctx = context.WithoutCancel(ctx)
	o := outcome(run, res, q.cfg.RetryMax, q.retryBackoff(run.Attempt))
	var code *int
	if res.Container != "" && res.Failure != runner.FailLost && res.Failure != runner.FailEngine {
		c := res.ExitCode
		code = &c
	}
	o.ExitCode = code
	final, err := q.cfg.Store.FinishRun(ctx, run.ID, o)
	if err != nil {
		log.Error("record run end", "err", err)
		return
	}
	attrs := []any{
		logging.FieldContainer, res.Container,
		logging.FieldStatus, string(o.Status),
		logging.FieldState, string(final.State),
		logging.FieldExitCode, res.ExitCode,
		logging.FieldDurationMS, res.Duration.Milliseconds(),
	}
	if o.Failure != "" {
		attrs = append(attrs, logging.FieldFailure, string(o.Failure))
	}
	if o.Error != "" {
		attrs = append(attrs, logging.FieldError, o.Error)
	}
	if u := final.Usage; u.Requests > 0 || u.Refused != "" {
		attrs = append(attrs, logging.FieldModel, u.Model, logging.FieldModelRequests, u.Requests,
			logging.FieldInputTokens, u.InputTokens, logging.FieldOutputTokens, u.OutputTokens,
			logging.FieldCacheReadTokens, u.CacheReadTokens, logging.FieldCacheWriteTokens, u.CacheWriteTokens)
		if u.Refused != "" {
			attrs = append(attrs, logging.FieldModelRefused, u.Refused)
		}
	}
	if o.Status == store.StatusOK {
		log.Info("turn finished", attrs...)
	} else {
		log.Warn("turn failed", attrs...)
	}
}

func (q *Queue) retryBackoff(attempt int) time.Duration {
	d := q.cfg.RetryBackoff
	for i := 1; i < attempt && d < time.Hour; i++ {
		d *= 2
	}
	return min(d, time.Hour)
}

// outcome maps a runner Result to what the store records, with the cursor rule of seed
// 000: ok and error advance the cursor, fatal rolls it back for a retry with backoff,
// misconfiguration parks the folder (a retry would not help), a kill counts as handled.
func outcome(run *store.Run, res runner.Result, retryMax int, backoff time.Duration) store.Outcome {
	o := store.Outcome{
		Status:       store.Status(res.Output.Status),
		Failure:      storeFailure(res.Failure),
		Terminal:     res.Terminal,
		Error:        res.Output.Error,
		Result:       res.Output.Result,
		NewSessionID: res.Output.NewSessionID,
		SaveSession:  run.Kind != store.KindTask && res.Output.Status != contract.StatusFatal,
	}
	switch {
	case res.Failure == runner.FailKilled:
		o.State = store.RunKilled
	case res.Failure != runner.FailNone && res.Failure != runner.FailTimeout || res.Output.Status == contract.StatusFatal:
		o.State = store.RunError
	default:
		o.State = store.RunExited
	}
	if o.Status == "" {
		o.Status = store.StatusFatal
	}
	if run.InboxFirst == 0 {
		return o
	}
	switch {
	case res.Failure == runner.FailKilled, o.Status == store.StatusOK, o.Status == store.StatusError:
		o.Cursor = store.CursorUpdate{Op: store.CursorAdvance}
	case res.Terminal:
		o.Cursor = store.CursorUpdate{Op: store.CursorPark, Reason: o.Error}
	default:
		o.Cursor = store.CursorUpdate{Op: store.CursorRetry, Reason: o.Error, Backoff: backoff, MaxRetries: retryMax}
	}
	return o
}

func storeFailure(f runner.Failure) store.Failure {
	switch f {
	case runner.FailNone:
		return store.FailureNone
	case runner.FailTimeout:
		return store.FailureTimeout
	case runner.FailOOM:
		return store.FailureOOM
	case runner.FailMisconfig:
		return store.FailureMisconfig
	case runner.FailKilled:
		return store.FailureKilled
	case runner.FailLost:
		return store.FailureLost
	case runner.FailNoOutput, runner.FailBadOutput, runner.FailNoInput, runner.FailModel:
		return store.Failure(f)
	}
	return store.FailureEngine
}
