package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

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
		timeout = fs.Duration("timeout", 0, "run timeout (default: the daemon's, run_timeout of the configuration, $RUNED_RUN_TIMEOUT)")
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
	f, err := groupfolder.Parse(*folder)
	if err != nil {
		return fmt.Errorf("--folder: %w", err)
	}
	if *message == "" {
		return errors.New("--message: required")
	}
	if !*local {
		return runDaemon(ctx, *socket, string(f), *message, *session, *sender, *chat, *timeout)
	}
	builder, st, err := lf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	eng, info, err := ef.open(ctx)
	if err != nil {
		return err
	}
	r, err := lf.runner(eng, info, *timeout)
	if err != nil {
		return err
	}
	// The result is printed before the container's removal, which happens off the turn's
	// critical path; wait for it before exiting.
	defer r.Close()
	services, release, err := lf.services(ctx, builder, st, eng, info)
	if err != nil {
		return err
	}
	defer release()
	builder.Services = services
	// The run is no row of the store: the daemon's queue never sees it, and its outbox rows,
	// model usage and egress are not recorded.
	res, err := builder.Run(ctx, turn.Request{
		RunID: fmt.Sprintf("local-%d", time.Now().UnixMilli()), Folder: f, SenderJID: *sender, ChatJID: *chat, SessionID: *session,
		Messages: []contract.Message{{Role: "user", Content: *message}},
	}, r, turn.Watch{})
	if err != nil {
		return err
	}
	if res.Output.Status == contract.StatusOK && res.Output.NewSessionID != "" {
		if err := st.SetSession(ctx, string(f), res.Output.NewSessionID); err != nil {
			return err
		}
	}
	result := runResult{
		RunID: res.RunID, Folder: string(f), Container: res.Container,
		Status: string(res.Output.Status), Result: res.Output.Result, NewSessionID: res.Output.NewSessionID,
		Error: res.Output.Error, Failure: string(res.Failure), Terminal: res.Terminal,
		ExitCode: res.ExitCode, DurationMs: res.Duration.Milliseconds(), LogFile: res.LogFile,
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(result); err != nil {
		return err
	}
	if res.Output.Status != contract.StatusOK {
		return errTurnFailed
	}
	return nil
}
