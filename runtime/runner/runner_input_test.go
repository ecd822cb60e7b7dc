package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/fakeengine"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
)

// TestInputNeverReached: a turn whose input line did not reach the container whole, and
// whose agent gave no ok or error answer, ends runner.FailNoInput (the queue runs it again); an
// answer, a misconfiguration or a kill keep their own outcome; a delivered input is
// reported through OnInput before the turn ends.
func TestInputNeverReached(t *testing.T) {
	eof := answer(contract.StatusFatal, "read stdin: EOF")
	cases := []struct {
		name        string
		stdin       fakeengine.Stdin
		out         string
		exit        int
		kill        bool
		wantFailure runner.Failure
		wantStatus  contract.Status
		wantInput   bool
	}{
		{"write fails, agent says EOF", fakeengine.StdinBroken, eof, 0, false, runner.FailNoInput, contract.StatusFatal, false},
		{"write fails, agent silent", fakeengine.StdinBroken, "", 1, false, runner.FailNoInput, contract.StatusFatal, false},
		{"write blocked until the container is gone", fakeengine.StdinBlocked, "", 0, false, runner.FailNoInput, contract.StatusFatal, false},
		{"write fails, agent answers ok anyway", fakeengine.StdinBroken, answer(contract.StatusOK, "fine"), 0, false, runner.FailNone, contract.StatusOK, false},
		{"write fails, agent answers error", fakeengine.StdinBroken, answer(contract.StatusError, "bad"), 0, false, runner.FailNone, contract.StatusError, false},
		{"write fails, entrypoint missing", fakeengine.StdinBroken, "", 127, false, runner.FailMisconfig, contract.StatusFatal, false},
		{"write fails, killed", fakeengine.StdinBroken, "", 137, true, runner.FailKilled, contract.StatusFatal, false},
		{"input delivered, agent fatal", fakeengine.StdinRead, answer(contract.StatusFatal, "gave up"), 0, false, runner.FailNone, contract.StatusFatal, true},
		{"input delivered, agent silent", fakeengine.StdinRead, "", 1, false, runner.FailNoOutput, contract.StatusFatal, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := fakeengine.New(fakeengine.Script{Stdin: c.stdin, Stdout: c.out, ExitCode: c.exit, Hang: c.kill})
			r, _ := fakeRunner(t, e, time.Hour)
			var sent bool
			ctx, cancel := context.WithCancel(context.Background())
			if c.kill {
				cancel()
			}
			defer cancel()
			res, err := r.Run(ctx, runner.Turn{RunID: "r1", Folder: "main", OnInput: func() { sent = true },
				Input: contract.Input{Messages: []contract.Message{{Role: "user", Content: "hi"}}}})
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			if res.Failure != c.wantFailure || res.Output.Status != c.wantStatus {
				t.Fatalf("failure %q status %q (%q), want %q %q", res.Failure, res.Output.Status, res.Output.Error, c.wantFailure, c.wantStatus)
			}
			if sent != c.wantInput {
				t.Errorf("OnInput called: %v, want %v", sent, c.wantInput)
			}
			if got := e.Stdin(res.Container); c.wantInput && !strings.Contains(got, `"content":"hi"`) {
				t.Errorf("the container got %q", got)
			}
			if res.Failure == runner.FailNoInput && !strings.Contains(res.Output.Error, "never reached the agent") {
				t.Errorf("error %q does not say why", res.Output.Error)
			}
			if e.Exists(res.Container) {
				t.Error("the container was not removed")
			}
		})
	}
}

// TestAdoptInputNeverReached: an adopted container that never started, or whose daemon
// never recorded its input as sent and which gave no ok or error answer, ends runner.FailNoInput;
// with the input recorded, its answer stands.
func TestAdoptInputNeverReached(t *testing.T) {
	eof := answer(contract.StatusFatal, "read stdin: EOF")
	cases := []struct {
		name        string
		start       bool
		out         string
		inputSent   bool
		wantFailure runner.Failure
		wantStatus  contract.Status
	}{
		{"never started", false, "", false, runner.FailNoInput, contract.StatusFatal},
		{"never started, input recorded", false, "", true, runner.FailNoInput, contract.StatusFatal},
		{"EOF, input not recorded", true, eof, false, runner.FailNoInput, contract.StatusFatal},
		{"EOF, input recorded", true, eof, true, runner.FailNone, contract.StatusFatal},
		{"ok, input not recorded", true, answer(contract.StatusOK, "done"), false, runner.FailNone, contract.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			e := fakeengine.New(fakeengine.Script{Stdout: c.out})
			id, err := e.Create(ctx, engine.Spec{Name: "arizuko-main-1", Image: "img"})
			if err != nil {
				t.Fatal(err)
			}
			if c.start {
				if err := e.Start(ctx, id); err != nil {
					t.Fatal(err)
				}
				if _, err := e.Wait(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			r, _ := fakeRunner(t, e, time.Hour)
			res, err := r.Adopt(ctx, runner.Turn{RunID: "r1", Folder: "main", InputSent: c.inputSent}, id, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if res.Failure != c.wantFailure || res.Output.Status != c.wantStatus {
				t.Fatalf("failure %q status %q (%q), want %q %q", res.Failure, res.Output.Status, res.Output.Error, c.wantFailure, c.wantStatus)
			}
			if e.Exists(res.Container) {
				t.Error("the container was not removed")
			}
		})
	}
}
