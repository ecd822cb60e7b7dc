package runner

import (
	"errors"
	"time"

	"github.com/arizuko/arizukod/contract"
)

// classify turns how the container ended and what it printed into the Result. inputSent
// says whether the input line reached the container's stdin whole.
func (tr *turnRun) classify(cause Failure, w waitResult, capture *contract.Capture, memory int64, timeout time.Duration, inputSent bool) {
	tr.res.StdoutBytes = capture.Total()
	tr.res.Stderr = tr.r.cfg.Redact(tr.stderr.String())
	if w.err != nil {
		tr.fail(FailEngine, false, "wait %s: %v", tr.res.Container, w.err)
		return
	}
	tr.res.ExitCode = w.state.ExitCode
	tr.note("exited %d (%s)", w.state.ExitCode, w.state.Status)
	out, perr := capture.Result()
	switch {
	case cause == FailKilled:
		tr.fail(FailKilled, false, "run killed on request")
	case perr != nil && (w.state.ExitCode == 125 || w.state.ExitCode == 126 || w.state.ExitCode == 127):
		tr.fail(FailMisconfig, true, "the container exited %d (%s): the image or its entrypoint is wrong", w.state.ExitCode, exitMeaning(w.state.ExitCode))
	case (cause == FailTimeout || w.state.DeadlineExceeded) && perr != nil:
		tr.fail(FailTimeout, false, "no answer within the %s run timeout", timeout)
	case !inputSent && (perr != nil || out.Status == contract.StatusFatal):
		// Whatever the agent printed (typically "read stdin: EOF"), it had no turn to act on.
		detail := "no answer"
		if perr == nil {
			detail = "it answered fatal: " + out.Error
		}
		tr.fail(FailNoInput, false, "the turn's input never reached the agent (exit %d, %s)", w.state.ExitCode, detail)
	case w.state.OOMKilled:
		tr.fail(FailOOM, false, "the agent ran out of memory (limit %d bytes) and was killed", memory)
	case w.state.ExitCode == 137 && perr != nil:
		// SIGKILL that arizukod did not send. Podman 4.3 with runc on cgroup v1 does not
		// always report the OOM kill, and the kernel's OOM killer is what sends it.
		tr.fail(FailOOM, false, "the agent was killed by SIGKILL (exit 137) that arizukod did not send: most likely the memory limit (%d bytes)", memory)
	case perr == nil:
		// The agent's own text reaches logs, the journal and the store: no secret in it.
		out.Error = tr.r.cfg.Redact(out.Error)
		out.Result = tr.r.cfg.Redact(out.Result)
		out.NewSessionID = tr.r.cfg.Redact(out.NewSessionID)
		tr.res.Output = out
		if cause == FailTimeout {
			tr.res.Failure = FailTimeout
		}
	case errors.Is(perr, contract.ErrNoOutput):
		tr.fail(FailNoOutput, false, "exit %d: %v", w.state.ExitCode, perr)
	default:
		tr.fail(FailBadOutput, false, "exit %d: %v", w.state.ExitCode, perr)
	}
}

func exitMeaning(code int) string {
	switch code {
	case 125:
		return "the engine failed to run it"
	case 126:
		return "the entrypoint cannot be executed"
	case 127:
		return "the entrypoint was not found"
	}
	return ""
}
