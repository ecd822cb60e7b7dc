package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/runtime/engine"
)

// TestPreparedContainers follows a folder's prepared container through the daemon on
// Podman 4.3: made after a turn, taken by the folder's next turn (whose agent gets its
// run on stdin), still taken after a grant change (the grants come on stdin: the agent
// sees the new ones), passed over when the group's config changed (the agent sees the new
// memory limit), left by a SIGKILL and removed by the next daemon without being counted
// as a leftover, made again at start for the folder that ran last, and gone after a
// graceful stop.
func TestPreparedContainers(t *testing.T) {
	daemontest.JournalOn(t)
	d := daemontest.New(t, daemontest.Config{Engine: daemontest.Podman4(t)})
	d.Start(t)
	d.AddGroup(t, "main")
	if r := d.Turn(t, "main", "noop"); r.Status != "ok" {
		t.Fatalf("first turn: %+v", r)
	}
	prepared := waitPrepared(t, d, "main", "")

	r := d.Turn(t, "main", "env")
	if r.Container != prepared {
		t.Fatalf("the folder's next turn ran in %s, not in its prepared %s", r.Container, prepared)
	}
	var env struct {
		RunID  string   `json:"runId"`
		Names  []string `json:"names"`
		Grants []string `json:"grants"`
	}
	if err := json.Unmarshal([]byte(r.Result), &env); err != nil || env.RunID != r.ID {
		t.Fatalf("the agent got run id %q on stdin, want %s (%v): %s", env.RunID, r.ID, err, r.Result)
	}
	for _, want := range []string{"ARIZUKO_MODEL_TOKEN", "ANTHROPIC_API_KEY", "ARIZUKO_MODEL_SOCKET"} {
		if !strings.Contains(strings.Join(env.Names, " "), want) {
			t.Errorf("the prepared container's environment lacks %s: %v", want, env.Names)
		}
	}

	// The group's grants change after the next container was prepared: they reach the
	// agent on stdin, so the prepared container serves, and the agent sees the new rules.
	next := waitPrepared(t, d, "main", prepared)
	code, body, err := d.Do(http.MethodPut, "/v1/groups/main/grants", "application/json", []byte(`{"rules":["send_reply"]}`))
	if err != nil || code != http.StatusOK {
		t.Fatalf("put grants: %d %s %v", code, body, err)
	}
	r = d.Turn(t, "main", "env")
	env.Grants = nil
	if err := json.Unmarshal([]byte(r.Result), &env); err != nil || r.Container != next || strings.Join(env.Grants, ",") != "send_reply" {
		t.Errorf("after a grant change the turn ran in %s (prepared %s) with grants %v (%v), want [send_reply]", r.Container, next, env.Grants, err)
	}

	// The group's config changes after the next container was prepared.
	stale := waitPrepared(t, d, "main", next)
	d.PutGroup(t, "main", `{"memory": "300m"}`)
	r = d.Turn(t, "main", "sandbox")
	if r.Status != "ok" || r.Container == stale {
		t.Fatalf("the turn after a config change ran in %s (the stale prepared one is %s): %+v", r.Container, stale, r)
	}
	var sb struct {
		Cgroup map[string]string `json:"cgroup"`
	}
	if err := json.Unmarshal([]byte(r.Result), &sb); err != nil || sb.Cgroup["memory"] != fmt.Sprint(300<<20) {
		t.Errorf("memory limit inside after the change = %q (%v), want %d", sb.Cgroup["memory"], err, 300<<20)
	}

	// SIGKILL leaves the prepared container; the next daemon removes it uncounted and
	// prepares the folder that ran last again.
	left := waitPrepared(t, d, "main", r.Container)
	d.Kill(t)
	d.Start(t)
	d.WaitHealthy(t, 30*time.Second)
	again := waitPrepared(t, d, "main", left)
	for _, c := range d.Containers(t) {
		if c.Name == left {
			t.Errorf("the killed daemon's prepared %s is still there", left)
		}
	}
	if out := d.Output(); strings.Contains(out, "removed leftover container") {
		t.Errorf("the next daemon counted a prepared container as a leftover:\n%s", out)
	}
	if again == left {
		t.Fatalf("the same prepared container survived the restart")
	}
	d.Stop(t)
	if cs := d.Containers(t); len(cs) != 0 {
		t.Errorf("after a graceful stop: %d containers of the instance, want none: %+v", len(cs), cs)
	}
}

// waitPrepared waits until folder has a prepared container other than not, never started,
// and returns its name. (The containers of finished turns that ran prepared keep the label.)
func waitPrepared(t *testing.T, d *daemontest.Daemon, folder, not string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, c := range d.Containers(t) {
			if c.Labels[engine.LabelPrepared] != "" && c.Labels[engine.LabelFolder] == folder && c.Name != not && daemontest.Unstarted(c) {
				return c.Name
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no container prepared for %s within 30s: %+v", folder, d.Containers(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
