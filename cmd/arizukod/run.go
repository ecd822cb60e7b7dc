package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/turn"
)

// errTurnFailed makes the exit status 1 after the result JSON has been printed.
var errTurnFailed = errors.New("turn did not end ok")

// runResult is what `arizukod run` prints.
type runResult struct {
	RunID        string `json:"runId"`
	Folder       string `json:"folder"`
	Container    string `json:"container"`
	Status       string `json:"status"`
	Result       string `json:"result"`
	NewSessionID string `json:"newSessionId,omitempty"`
	Error        string `json:"error,omitempty"`
	Failure      string `json:"failure,omitempty"`
	Terminal     bool   `json:"terminal,omitempty"`
	ExitCode     int    `json:"exitCode"`
	DurationMs   int64  `json:"durationMs"`
	LogFile      string `json:"logFile,omitempty"`
}

func cmdRun(ctx context.Context, args []string) error { return runCommand(ctx, args, os.Stdout) }

// runCommand is `arizukod run`; a local turn's result JSON goes to out.
func runCommand(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("run", "--folder F --message TEXT [--local] [flags]")
	var (
		ef      engineFlags
		lf      localFlags
		local   = fs.Bool("local", false, "run the turn in this process, without a daemon (otherwise: through the daemon's socket)")
		folder  = fs.String("folder", "", "group folder, e.g. main or main/research (required)")
		message = fs.String("message", "", "the message of the turn (required)")
		timeout = durationFlag(fs, "timeout", "how long the turn may run, a `duration` such as 90s or 5m (default: the daemon's, run_timeout of the configuration, $RUNED_RUN_TIMEOUT)")
		sender  = fs.String("sender", "", "sender JID of the message")
		chat    = fs.String("chat", "", "the chat the turn answers, where send_reply without a chat_jid goes")
		session = fs.String("session", "", "session id to continue (default: the group's last)")
	)
	socket := socketFlag(fs)
	ef.register(fs)
	lf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *folder == "" || *message == "" {
		fmt.Fprintln(fs.Output(), "arizukod run: give --folder (the group, e.g. main) and --message (the turn's message)")
		fs.Usage()
		return errUsage
	}
	f, err := groupfolder.Parse(*folder)
	if err != nil {
		return fmt.Errorf("--folder: %w", err)
	}
	if !*local {
		if err := refuseLocalFlags(fs); err != nil {
			return err
		}
		return runDaemon(ctx, *socket, string(f), *message, *session, *sender, *chat, *timeout)
	}
	return runLocal(ctx, &lf, ef, turn.Request{
		RunID: fmt.Sprintf("local-%d", time.Now().UnixMilli()), Folder: f, SenderJID: *sender, ChatJID: *chat, SessionID: *session,
		Messages: []contract.Message{{Role: "user", Content: *message}},
	}, *timeout, out)
}

// runLocal runs req in this process, on the turn machinery of the daemon's configuration,
// and writes its result JSON to out. The run is no row of the store: the daemon's queue
// never sees it, and its outbox rows, model usage and egress are not recorded.
func runLocal(ctx context.Context, lf *localFlags, ef engineFlags, req turn.Request, timeout time.Duration, out io.Writer) error {
	sys, err := lf.local(ctx, ef, req.Folder, timeout)
	if err != nil {
		return err
	}
	// The result is printed before the container's removal, which happens off the turn's
	// critical path: Close waits for it before exiting.
	defer sys.Close()
	res, err := sys.Builder.Run(ctx, req, sys.Runner, turn.Watch{})
	if err != nil {
		return err
	}
	if res.Output.Status == contract.StatusOK && res.Output.NewSessionID != "" {
		if err := sys.Store.SetSession(ctx, string(req.Folder), res.Output.NewSessionID); err != nil {
			return err
		}
	}
	result := runResult{
		RunID: res.RunID, Folder: string(req.Folder), Container: res.Container,
		Status: string(res.Output.Status), Result: res.Output.Result, NewSessionID: res.Output.NewSessionID,
		Error: res.Output.Error, Failure: string(res.Failure), Terminal: res.Terminal,
		ExitCode: res.ExitCode, DurationMs: res.Duration.Milliseconds(), LogFile: res.LogFile,
	}
	if err := indentedJSON(out).Encode(result); err != nil {
		return err
	}
	if res.Output.Status != contract.StatusOK {
		return errTurnFailed
	}
	return nil
}

// localOnly are the flags of `arizukod run` that only a --local turn honours, with what a
// daemon uses instead.
var localOnly = map[string]string{
	"image":         "a daemon runs the image of its configuration (image in arizukod.toml, CONTAINER_IMAGE in its environment)",
	"engine":        "a daemon uses its own engine (engine in arizukod.toml)",
	"engine-socket": "a daemon uses its own engine (engine_socket in arizukod.toml, or CONTAINER_HOST in its environment)",
	"data-dir":      "a daemon keeps its own data directory (data_dir in arizukod.toml, DATA_DIR in its environment); --socket PATH names another daemon",
	"skills-dir":    "a daemon mounts its own skills (skills_dir in arizukod.toml)",
	"allowlist":     "a daemon reads its own mount allowlist (allowlist in arizukod.toml)",
	"config":        "a daemon reads the configuration it was started with (arizukod serve --config FILE)",
}

// refuseLocalFlags refuses a turn through the daemon that was given a flag only --local
// honours, rather than dropping it without a word.
func refuseLocalFlags(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if instead, ok := localOnly[f.Name]; ok && err == nil {
			fmt.Fprintf(fs.Output(), "arizukod run: --%s applies to --local turns only: %s.\nAdd --local to run this turn here with --%s, or leave --%s out.\n",
				f.Name, instead, f.Name, f.Name)
			err = errUsage
		}
	})
	return err
}

var (
	// errNoEngine: the daemon answers, but no container engine answers it.
	errNoEngine = errors.New("the daemon has no container engine")
	// errTurnsRefused: the daemon refuses every turn (the limits cannot be applied).
	errTurnsRefused = errors.New("the daemon refuses turns")
)

// engineReady asks the daemon whether a turn could start now. A turn sent to a daemon
// without an engine would wait in the queue until one answers; it is not sent.
func engineReady(ctx context.Context, c *apiwire.Client) error {
	h, err := daemonHealth(ctx, c)
	if err != nil {
		return err
	}
	if err := healthProblem(h); err != nil {
		return fmt.Errorf("the turn was not sent: %w", err)
	}
	return nil
}

// daemonHealth is GET /health, whose answer is a report also when it is 503 (degraded).
func daemonHealth(ctx context.Context, c *apiwire.Client) (apiwire.HealthReport, error) {
	var h apiwire.HealthReport
	err := c.Do(ctx, http.MethodGet, "/health", nil, &h)
	var apiErr *apiwire.Error
	if errors.As(err, &apiErr) && apiErr.Code == http.StatusServiceUnavailable && json.Unmarshal([]byte(apiErr.Msg), &h) == nil {
		return h, nil
	}
	return h, err
}

// healthProblem says why no turn can start on a daemon with health h, and how to fix it.
func healthProblem(h apiwire.HealthReport) error {
	switch {
	case h.Status != "degraded":
		return nil
	case !h.Engine.Up:
		return fmt.Errorf("%w: %s\n  fix: %s\n  (the daemon finds the engine again by itself; arizukod doctor --check engine says more)",
			errNoEngine, cmp.Or(h.Engine.Error, "none answers"), probeHost().engineFix())
	case h.Engine.Limits != "":
		return fmt.Errorf("%w: %s", errTurnsRefused, h.Engine.Limits)
	}
	return nil
}

// waitRun waits for run (just created) to end. While it is queued it asks the daemon why:
// a run queued behind an engine that went away fails with the reason instead of waiting on.
// While it runs it writes to notes each new failure of the model upstream that the agent
// retries.
func waitRun(ctx context.Context, c *apiwire.Client, r apiwire.Run, notes io.Writer) (apiwire.Run, error) {
	told := ""
	for {
		if why := upstreamError(r); why != "" && why != told && !final(r.State) {
			told = why
			fmt.Fprintln(notes, retryingNote(r.ID, why))
		}
		switch r.State {
		case "exited", "error", "killed":
			return r, nil
		case "queued":
			h, err := daemonHealth(ctx, c)
			if err != nil {
				return r, err
			}
			if err := healthProblem(h); err != nil {
				return r, fmt.Errorf("run %s is queued: %w\n  it starts once that is fixed; arizukod runs kill %s drops it", r.ID, err, r.ID)
			}
		}
		if err := ctx.Err(); err != nil {
			return r, err
		}
		// Short polls, to see the agent retrying the model as it happens.
		if err := c.Do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(r.ID)+"?wait=2s", nil, &r); err != nil {
			return r, err
		}
	}
}

// upstreamError is how the model upstream last failed during r: what its agent retries.
func upstreamError(r apiwire.Run) string {
	if r.Usage == nil {
		return ""
	}
	return r.Usage.UpstreamError
}

// retryingNote tells that run id's agent retries the model, and why.
func retryingNote(id, why string) string {
	return fmt.Sprintf("run %s: the agent is retrying the model: %s\n  (the daemon gives the turn up after [model] give_up; arizukod doctor --check upstream)",
		safeLine(id), safeText(why, "    "))
}
