package turn

import (
	"cmp"
	"errors"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/tracing"
)

// Phases are how long the parts of a turn took, as Watch.OnPhases hears them when it is
// over; a part it did not reach is 0.
type Phases struct {
	// Prepare: the plan, directories, prompt, session and grants, and the services.
	Prepare time.Duration
	// Sidecars: of Prepare, starting the group's sidecars.
	Sidecars time.Duration
	// Create: from the runner's call until the container existed (or the prepared one was
	// taken).
	Create time.Duration
	// Start: attaching to it, starting it, until its input was written whole.
	Start time.Duration
	// Run: from then until the runner had the result (the agent's run, its exit, the run
	// log).
	Run time.Duration
	// Finish: stopping the services.
	Finish time.Duration
}

// clock notes when the phases of one turn end, and tells its trace.
type clock struct {
	tt                    *tracing.Turn
	begin, prepared, call time.Time
	created, input, ran   time.Time
	sidecars              time.Duration
}

// phase ends a phase that began at start and tells the trace.
func (c *clock) phase(name string, start time.Time, err error) time.Time {
	now := time.Now()
	c.tt.Phase(name, start, now, err)
	return now
}

func since(end, start time.Time) time.Duration {
	if end.IsZero() || start.IsZero() {
		return 0
	}
	return end.Sub(start)
}

// phases are the durations the clock noted; finished is when the services were stopped.
func (c *clock) phases(finished time.Time) Phases {
	p := Phases{Prepare: since(c.prepared, c.begin), Sidecars: c.sidecars,
		Create: since(c.created, c.call), Start: since(c.input, c.created)}
	last := c.input
	if last.IsZero() {
		last = c.created
	}
	p.Run = since(c.ran, last)
	p.Finish = since(finished, c.ran)
	return p
}

// failed is why a turn failed, or nil: a detached turn is not over, and did not fail.
func failed(res runner.Result, err error) error {
	switch {
	case err != nil:
		return err
	case res.Failure == runner.FailDetached:
		return nil
	case res.Failure != runner.FailNone || res.Output.Status == contract.StatusFatal:
		return errors.New(cmp.Or(res.Output.Error, string(res.Failure)))
	}
	return nil
}

// end closes the trace with res.
func (c *clock) end(res runner.Result, err error) {
	e := tracing.TurnEnd{Container: res.Container, Status: string(res.Output.Status), Failure: string(res.Failure),
		ExitCode: res.ExitCode, Err: failed(res, err)}
	if err != nil {
		e.Status = string(contract.StatusFatal)
	}
	c.tt.End(e)
}

// modelRequest is a model gateway's request as the trace has it.
func modelRequest(r gateway.RequestTrace) tracing.ModelRequest {
	return tracing.ModelRequest{Path: r.Path, Model: r.Usage.Model, Status: r.Status,
		Start: r.Start, FirstByte: r.FirstByte, End: r.End,
		InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens,
		CacheReadTokens: r.Usage.CacheReadTokens, CacheWriteTokens: r.Usage.CacheWriteTokens,
		Refused: r.Usage.Refused, UpstreamError: r.Usage.UpstreamError}
}
