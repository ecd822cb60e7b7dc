package daemon_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
)

// TestHostileAgentAcrossRestart: agents keep swapping their IPC directory's entries (input/,
// router.sock, model.sock, egress.sock, sidecars/) for links to the daemon's own token key
// and to a host directory, while the daemon is killed and started again (it adopts the
// turns and binds their sockets anew under the race), steers them through the API and
// reaches their soft deadlines. The key's mode and content, and the host directory, must
// not change, and the daemon must start again on its key.
func TestHostileAgentAcrossRestart(t *testing.T) {
	enginetest.Long(t, "two hostile turns across a daemon restart")
	daemontest.JournalOn(t)
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			d := daemontest.New(t, daemontest.Config{Engine: e, RunTimeout: "40s"})
			d.Start(t)
			key := filepath.Join(d.DataDir, "model-token.key")
			hostDir := filepath.Join(d.Dir, "host")
			if err := os.Mkdir(hostDir, 0o700); err != nil {
				t.Fatal(err)
			}
			keyBefore := daemontest.FileState(key)
			d.AddGroup(t, "onkey")
			d.AddGroup(t, "ondir")
			runs := []string{
				d.Submit(t, "onkey", "plant race "+key+" 30s").ID,
				d.Submit(t, "ondir", "plant race "+hostDir+" 30s").ID,
			}
			for _, id := range runs {
				r := d.WaitRunning(t, id, time.Minute)
				d.WaitContainerRunning(t, r.Container)
			}
			time.Sleep(2 * time.Second)
			d.Kill(t)
			d.Start(t)
			deadline := time.Now().Add(90 * time.Second)
			for _, id := range runs {
				for d.GetRun(t, id).State == "running" && time.Now().Before(deadline) {
					d.Do(http.MethodPost, "/v1/runs/"+id+"/steer", "application/json", []byte(`{"messages":[{"content":"steer"}]}`))
					time.Sleep(50 * time.Millisecond)
				}
			}
			if err := d.Drain(time.Minute); err != nil {
				t.Fatal(err)
			}
			if after := daemontest.FileState(key); after != keyBefore {
				t.Errorf("the daemon's token key changed:\n  before %s\n  after  %s", keyBefore, after)
			}
			if entries, err := os.ReadDir(hostDir); err != nil || len(entries) != 0 {
				t.Errorf("host directory: %v %v, want it empty", entries, err)
			}
			if fi, err := os.Stat(hostDir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("host directory's mode: %v %v", fi, err)
			}
			d.Stop(t)
			d.Start(t)
			d.AddGroup(t, "after")
			if r := d.Turn(t, "after", "reply still here"); r.Result != "still here" {
				t.Errorf("a turn after the hostile ones: %+v", r)
			}
		})
	}
}

// TestAncestorCannotSwapChildMount: main's agent can write its child's group folder (it is
// inside main's /workspace), and keeps swapping it for a link to a host directory while
// turns of the child are submitted. The engine resolves a mount's source by path, so a
// child container made during the swap would get the host directory as its /workspace; the
// child's turns wait for main's instead, and every one writes into its own folder.
func TestAncestorCannotSwapChildMount(t *testing.T) {
	enginetest.Long(t, "a hostile ancestor's turn with its child's turns waiting")
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			d := daemontest.New(t, daemontest.Config{Engine: e, RunTimeout: "1m"})
			d.Start(t)
			hostDir := filepath.Join(d.Dir, "host")
			if err := os.Mkdir(hostDir, 0o700); err != nil {
				t.Fatal(err)
			}
			d.AddGroup(t, "main")
			d.AddGroup(t, "main/research")
			d.Turn(t, "main/research", "write probe.txt first")
			parent := d.Submit(t, "main", "plant child research:"+hostDir+" 12s")
			d.WaitRunning(t, parent.ID, time.Minute)
			var children []string
			for i := range 6 {
				children = append(children, d.Submit(t, "main/research", fmt.Sprintf("write probe.txt %d", i)).ID)
				time.Sleep(300 * time.Millisecond)
			}
			p := d.Wait(t, parent.ID, time.Minute)
			if p.Status != "ok" {
				t.Fatalf("the hostile parent's turn: %+v", p)
			}
			for _, id := range children {
				r := d.Wait(t, id, 2*time.Minute)
				if r.Status != "ok" {
					t.Errorf("child turn %s: %+v", id, r)
				}
				started, _ := time.Parse(time.RFC3339Nano, r.StartedAt)
				ended, _ := time.Parse(time.RFC3339Nano, p.EndedAt)
				if started.Before(ended) {
					t.Errorf("child turn %s started at %s, before its parent's turn ended at %s", id, r.StartedAt, p.EndedAt)
				}
			}
			if entries, err := os.ReadDir(hostDir); err != nil || len(entries) != 0 {
				t.Errorf("the host directory got %v (%v): a child's container had it as /workspace", entries, err)
			}
			if b, err := os.ReadFile(filepath.Join(d.DataDir, "groups", "main", "research", "probe.txt")); err != nil || string(b) != "5" {
				t.Errorf("the child's own folder: %q %v, want its last turn's write", b, err)
			}
		})
	}
}
