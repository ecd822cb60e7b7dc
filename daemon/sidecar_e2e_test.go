package daemon_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/sidecar"
)

// TestSIGKILLLeftoverSidecars kills the daemon while a turn's sidecar runs and starts it
// again. The new daemon answers /health without waiting for anything but the engine's ping,
// yet stops the killed daemon's sidecar before the adopted turn starts its own again: the
// removal is logged first, and the adopted turn's call to its sidecar, made after the
// restart, is answered by the sidecar started then (the cleanup did not stop it).
func TestSIGKILLLeftoverSidecars(t *testing.T) {
	daemontest.JournalOn(t)
	e := daemontest.Podman4(t)
	d := daemontest.New(t, daemontest.Config{Engine: e})
	ensureSidecarImage(t, e, d.Eng)
	d.Start(t)
	d.PutGroup(t, "main", `{"sidecars": [{"name": "echo", "image": "`+sidecarImage+`"}]}`)
	run := d.Submit(t, "main", `await all mcp-socket echo.sock echo {"text":"after the kill"}`)
	d.WaitRunning(t, run.ID, 30*time.Second)
	daemontest.WaitJournal(t, 30*time.Second, daemontest.HasMessage("await: waiting for SIGUSR1"), "ARIZUKO_RUN_ID="+run.ID)

	d.Kill(t)
	var left []string
	for _, c := range d.Leftovers(t) {
		if c.Labels[engine.LabelRole] == sidecar.RoleSidecar && c.Running {
			left = append(left, c.Name)
		}
	}
	if len(left) != 1 {
		t.Fatalf("after SIGKILL: running sidecar containers %v, want the turn's one", left)
	}

	d.Start(t)
	pid := "_PID=" + strconv.Itoa(d.Pid())
	es := daemontest.WaitJournal(t, 30*time.Second, func(es []daemontest.Entry) bool {
		return daemontest.Find(es, "turn adopted: its servers are back and it takes steering") != nil
	}, pid)
	removed, started := -1, -1
	for i, e := range es {
		switch {
		case removed < 0 && e["MESSAGE"] == "removed leftover sidecar container" && e[logging.FieldContainer] == left[0]:
			removed = i
		case started < 0 && e["MESSAGE"] == "sidecar started" && e["ARIZUKO_RUN_ID"] == run.ID:
			started = i
		}
	}
	if removed < 0 || started < 0 || removed > started {
		var b strings.Builder
		for _, e := range es {
			b.WriteString("  " + e["MESSAGE"] + " " + e.Fields() + "\n")
		}
		t.Fatalf("the restarted daemon logged the leftover's removal at %d and the adopted turn's sidecar start at %d, want the removal first:\n%s", removed, started, b.String())
	}

	code, body, err := d.Do(http.MethodPost, "/v1/runs/"+run.ID+"/steer", "application/json", []byte(`{"messages":[{"content":"go"}]}`))
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("steer of the adopted run: %d %s %v", code, body, err)
	}
	r := d.Wait(t, run.ID, 2*time.Minute)
	var outs []contract.Output
	if err := json.Unmarshal([]byte(r.Result), &outs); err != nil || len(outs) != 1 {
		t.Fatalf("adopted run %+v: answer %q: %v", r, r.Result, err)
	}
	if outs[0].Status != contract.StatusOK || !strings.Contains(outs[0].Result, "after the kill") {
		t.Fatalf("the adopted turn's sidecar answered %s %q %q, want the echo", outs[0].Status, outs[0].Result, outs[0].Error)
	}
}
