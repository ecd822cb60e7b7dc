package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/store"
)

// TestSIGKILL kills the daemon with SIGKILL while turns run and others wait, and starts it
// again over the same data: it adopts the containers still running, collects their results,
// runs the rest, and leaves every run ended and recorded, no container behind, and every
// inbox message handled by exactly one container start.
func TestSIGKILL(t *testing.T) {
	daemontest.JournalOn(t)
	e := daemontest.Podman4(t)
	d := daemontest.New(t, daemontest.Config{Engine: e})
	d.Start(t)
	folders := []string{"alpha", "beta", "gamma"}
	for _, f := range folders {
		d.AddGroup(t, f)
	}
	t0 := time.Now()
	// Per folder: an API turn, then two inbox messages (one inbox turn or two). gamma's API
	// turn waits to be steered instead of sleeping: it must still be steerable once adopted.
	var apiRuns []string
	inbox := map[string][]int64{}
	for _, f := range folders {
		msg := "sleep 3s"
		if f == "gamma" {
			msg = "steer"
		}
		apiRuns = append(apiRuns, d.Submit(t, f, msg).ID)
	}
	for _, f := range folders {
		inbox[f] = append(inbox[f], d.AppendInbox(t, f, "sleep 3s")...)
	}
	for _, f := range folders {
		inbox[f] = append(inbox[f], d.AppendInbox(t, f, "sleep 2s")...)
	}
	for _, id := range apiRuns {
		r := d.WaitRunning(t, id, 30*time.Second)
		d.WaitContainerRunning(t, r.Container)
	}
	daemontest.WaitJournal(t, 20*time.Second, daemontest.HasMessage("steer: waiting for SIGUSR1"), "ARIZUKO_RUN_ID="+apiRuns[2])
	time.Sleep(time.Second)

	before := d.Runs(t, "limit=1000")
	states := map[string]int{}
	for _, r := range before {
		states[r.State]++
	}
	oldPid := d.Pid()
	d.Kill(t)
	killedAt := time.Now()
	running := 0
	for _, c := range d.Leftovers(t) {
		if c.Running {
			running++
		}
	}
	t.Logf("SIGKILL %s after the first submit: runs %v, %d containers running without a daemon", killedAt.Sub(t0).Round(time.Millisecond), states, running)

	d.Start(t)
	restarted := time.Since(killedAt)
	newPid := d.Pid()
	daemontest.WaitJournal(t, 20*time.Second, daemontest.HasMessage("turn adopted: its servers are back and it takes steering"), "ARIZUKO_RUN_ID="+apiRuns[2], fmt.Sprintf("_PID=%d", newPid))
	r := d.GetRun(t, apiRuns[2])
	if r.State != "running" {
		t.Fatalf("the steer turn after the restart: %+v", r)
	}
	code, body, err := d.Do(http.MethodPost, "/v1/runs/"+r.ID+"/steer", "application/json", []byte(`{"messages":[{"content":"adopted"}]}`))
	if err != nil || code != http.StatusAccepted {
		t.Errorf("steer of an adopted run: %d %s %v", code, body, err)
		d.Do(http.MethodDelete, "/v1/runs/"+r.ID, "", nil)
	}
	if err := d.Drain(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	drained := time.Since(killedAt)

	runs := d.Runs(t, "limit=1000")
	outcomes := map[string]int{}
	for _, r := range runs {
		outcomes[r.State+"/"+r.Status+"/"+r.Failure]++
		if r.State != "exited" && r.State != "error" && r.State != "killed" {
			t.Errorf("run %s (%s) ended %s", r.ID, r.Folder, r.State)
		}
		if r.Status != "ok" {
			t.Errorf("run %s (%s): %s %s %s %q", r.ID, r.Folder, r.State, r.Status, r.Failure, r.Error)
		}
	}
	if steered := d.GetRun(t, apiRuns[2]); steered.Result != "steered: adopted" {
		t.Errorf("adopted steer turn: %+v", steered)
	}
	journal := func(msg string) int {
		es, err := daemontest.Journal(fmt.Sprintf("_PID=%d", newPid))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range es {
			if strings.HasPrefix(e["MESSAGE"], msg) {
				n++
			}
		}
		return n
	}
	adopted, requeued := journal("adopting run"), journal("run requeued")
	if left := d.SettledLeftovers(t); len(left) != 0 {
		t.Errorf("%d containers left after the drain", len(left))
	}

	// Every container start, from the engine's own events: one per run, none twice.
	starts := daemontest.ContainerStarts(t, e, d.Instance, d.DataDir, t0)
	total := 0
	for _, r := range runs {
		total += starts[r.ID]
		if starts[r.ID] != 1 {
			t.Errorf("run %s (%s) had %d container starts, want 1", r.ID, r.Folder, starts[r.ID])
		}
	}
	if total != len(runs) {
		t.Errorf("%d container starts for %d runs: %v", total, len(runs), starts)
	}

	// The inbox, from the store once the daemon is gone.
	d.Stop(t)
	st := d.OpenStore(t)
	ctx := context.Background()
	for _, f := range folders {
		c, err := st.GetCursor(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		last := inbox[f][len(inbox[f])-1]
		if c.LastDoneID != last || c.Parked() || c.Retries != 0 {
			t.Errorf("%s: cursor %+v, want last done %d", f, c, last)
		}
		frs, err := st.ListRuns(ctx, store.RunFilter{Folder: f})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range inbox[f] {
			var cover []string
			for _, r := range frs {
				if r.InboxFirst <= id && id <= r.InboxLast && r.Status == store.StatusOK {
					cover = append(cover, r.ID)
				}
			}
			if len(cover) != 1 {
				t.Errorf("%s: inbox message %d handled by runs %v, want exactly one", f, id, cover)
			}
		}
	}
	t.Logf("restart: healthy %s after the SIGKILL (pid %d -> %d), %d runs adopted, %d requeued, all %d runs ended %s after the SIGKILL: %v; %d container starts",
		restarted.Round(time.Millisecond), oldPid, newPid, adopted, requeued, len(runs), drained.Round(time.Millisecond), outcomes, total)
	if adopted == 0 {
		t.Errorf("no run was adopted: the kill came while none ran")
	}
	for _, id := range apiRuns {
		if !slices.ContainsFunc(runs, func(r apiwire.Run) bool { return r.ID == id }) {
			t.Errorf("run %s is lost", id)
		}
	}
}
