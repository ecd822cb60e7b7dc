package daemon_test

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
)

// TestEngineRestart stops the engine under a running daemon, on a private Podman service
// the test owns, twice: once while work is only queued, once while a turn runs. Work
// submitted while the engine is away stays queued, /health says degraded with the engine's
// error, and once the engine is back every run completes, once, with no container left.
func TestEngineRestart(t *testing.T) {
	p := daemontest.StartPodman(t)
	e := p.Engine()
	d := daemontest.New(t, daemontest.Config{Engine: e})
	t0 := time.Now()
	d.Start(t)
	folders := []string{"alpha", "beta", "gamma"}
	for _, f := range folders {
		d.AddGroup(t, f)
		if r := d.Turn(t, f, "reply before-"+f); r.Status != "ok" {
			t.Fatalf("before the engine stops: %+v", r)
		}
	}
	// waitDegraded polls /health until it reports the engine away.
	waitDegraded := func(t *testing.T) apiwire.HealthReport {
		for deadline := time.Now().Add(40 * time.Second); ; {
			h, code, err := d.Health()
			if err == nil && code == http.StatusServiceUnavailable && h.Status == "degraded" && !h.Engine.Up {
				if h.Engine.Error == "" {
					t.Errorf("degraded health without the engine's error: %+v", h)
				}
				return h
			}
			if time.Now().After(deadline) {
				t.Fatalf("health 40s after the engine stopped: HTTP %d %+v %v", code, h, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	t.Run("queued", func(t *testing.T) {
		stopped := time.Now()
		p.Stop()
		var queued []apiwire.Run
		for _, f := range folders {
			queued = append(queued, d.Submit(t, f, "reply during-"+f))
		}
		inbox := d.AppendInbox(t, "alpha", "reply inbox-during")
		h := waitDegraded(t)
		noticed := time.Since(stopped)
		// Once the daemon knows the engine is away its queue starts nothing; a run it
		// started before is put back when its start fails. Wait until none is in flight.
		for deadline := time.Now().Add(time.Minute); h.Running > 0; h = waitDegraded(t) {
			if time.Now().After(deadline) {
				t.Fatalf("runs in flight a minute after the engine stopped: %+v", h)
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, r := range queued {
			if got := d.GetRun(t, r.ID); got.State != "queued" {
				t.Errorf("run %s submitted while the engine was away: %s %s %s %q, want queued", r.ID, got.State, got.Status, got.Failure, got.Error)
			}
		}
		t.Logf("engine stopped: /health degraded %s later (queued %d): %q", noticed.Round(time.Millisecond), h.Queued, h.Engine.Error)

		// `arizukod run` through this daemon does not wait silently behind the queue: it sends
		// no turn and says why, with the fix. (The context only guards against a hang.)
		before := len(d.Runs(t, "folder=beta"))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, err := exec.CommandContext(ctx, d.Bin, "run", "--socket", d.Socket, "--folder", "beta", "--message", "reply cli").CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "the turn was not sent: the daemon has no container engine") ||
			!strings.Contains(string(out), "fix: ") {
			t.Errorf("arizukod run while the engine is away: %v\n%s", err, out)
		}
		if after := len(d.Runs(t, "folder=beta")); after != before {
			t.Errorf("arizukod run while the engine is away made a run: %d runs of beta, were %d", after, before)
		}

		restarted := time.Now()
		p.Start()
		d.WaitHealthy(t, 30*time.Second)
		back := time.Since(restarted)
		for _, r := range queued {
			if got := d.Wait(t, r.ID, 2*time.Minute); got.Status != "ok" || !strings.HasPrefix(got.Result, "during-") {
				t.Errorf("run %s after the engine came back: %s %s %s %q", r.ID, got.State, got.Status, got.Failure, got.Error)
			}
		}
		if err := d.Drain(time.Minute); err != nil {
			t.Fatal(err)
		}
		inboxRan := false
		for _, r := range d.Runs(t, "folder=alpha") {
			inboxRan = inboxRan || r.Result == "inbox-during"
		}
		if !inboxRan {
			t.Errorf("inbox message %d never ran", inbox[0])
		}
		t.Logf("engine back: healthy %s after its restart; the queued work done %s after the engine stopped", back.Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
	})

	t.Run("in-flight", func(t *testing.T) {
		run := d.Submit(t, "beta", "sleep 4s")
		run = d.WaitRunning(t, run.ID, 30*time.Second)
		d.WaitContainerRunning(t, run.Container)
		stopped := time.Now()
		p.Stop()
		waitDegraded(t)
		p.Start()
		d.WaitHealthy(t, 30*time.Second)
		got := d.Wait(t, run.ID, 2*time.Minute)
		if err := d.Drain(time.Minute); err != nil {
			t.Fatal(err)
		}
		t.Logf("a turn running when the engine stopped: %s %s %s %q, %s after the stop", got.State, got.Status, got.Failure, got.Error, time.Since(stopped).Round(time.Millisecond))
		if got.Status != "ok" || got.Result != "slept 4s" {
			t.Errorf("run %s: %s %s %s %q, want its container's answer", run.ID, got.State, got.Status, got.Failure, got.Error)
		}
	})

	all := d.Runs(t, "limit=1000")
	starts := daemontest.ContainerStarts(t, e, d.Instance, d.DataDir, t0)
	for _, r := range all {
		if starts[r.ID] > 1 {
			t.Errorf("run %s had %d container starts", r.ID, starts[r.ID])
		}
	}
	n := 0
	for _, c := range starts {
		n += c
	}
	t.Logf("%d runs, %d container starts (the cleanup fails the test for any container left)", len(all), n)
}
