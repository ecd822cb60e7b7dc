package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/daemontest"
)

// TestRootlessHostileAgent is the packaged service's deployment (arizukod as an
// unprivileged user on its rootless Podman) under hostile agents: one links input/_close to
// the daemon's own token key, one swaps input/ for a link to a directory of that user, one
// keeps swapping its IPC directory's entries (input/, the sockets, sidecars/) for links to
// the key. They are steered through the API, reach their soft deadlines, and the daemon is
// stopped and started again while they run (it adopts them and binds their sockets anew).
// The key and the directory must come out as they went in.
func TestRootlessHostileAgent(t *testing.T) {
	d := newRootlessDaemon(t, "http://127.0.0.1:9")
	d.write("env", "")
	key := filepath.Join(d.base, "data", "model-token.key")
	hostDir := filepath.Join(d.base, "host")
	if err := os.Mkdir(hostDir, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(hostDir, d.uid, d.gid)
	conf := d.unlimited("run_timeout = \"16s\"\nstop_grace = \"1s\"\n" + d.conf)
	_, stop := d.serve(conf)
	keyBefore := daemontest.FileState(key)
	plants := map[string]string{
		"main":   "plant close " + key + " 40s",
		"ondir":  "plant input " + hostDir + " 40s",
		"onrace": "plant race " + key + " 40s",
	}
	var runs []string
	for folder, msg := range plants {
		var g apiwire.Group
		if err := d.c.Do(d.ctx, http.MethodPost, "/v1/groups", apiwire.PutGroupRequest{Folder: folder}, &g); err != nil {
			t.Fatal(err)
		}
		r, err := d.c.CreateRun(d.ctx, apiwire.CreateRunRequest{Folder: folder, Messages: []contract.Message{{Content: msg}}})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r.ID)
	}
	steerAll := func(until time.Time) {
		for time.Now().Before(until) {
			for _, id := range runs {
				daemontest.Do(d.sock, http.MethodPost, "/v1/runs/"+id+"/steer", "application/json", []byte(`{"messages":[{"content":"steer"}]}`))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	steerAll(time.Now().Add(5 * time.Second))
	stop()
	_, stop = d.serve(conf)
	defer stop()
	for _, id := range runs {
		for {
			var r apiwire.Run
			if err := d.c.Do(d.ctx, http.MethodGet, "/v1/runs/"+id, nil, &r); err != nil {
				t.Fatal(err)
			}
			if r.State != "running" && r.State != "queued" {
				t.Logf("run %s (%s): %s %s %s", r.ID, r.Folder, r.State, r.Failure, r.Error)
				break
			}
			steerAll(time.Now().Add(200 * time.Millisecond))
		}
	}
	if after := daemontest.FileState(key); after != keyBefore {
		t.Errorf("the daemon's token key changed:\n  before %s\n  after  %s", keyBefore, after)
	}
	entries, err := os.ReadDir(hostDir)
	if fi, serr := os.Stat(hostDir); err != nil || serr != nil || len(entries) != 0 || fi.Mode().Perm() != 0o700 {
		t.Errorf("the user's directory: %v %v %v, want it empty and 0700", entries, err, fi)
	}
	r, err := d.c.CreateRun(d.ctx, apiwire.CreateRunRequest{Folder: "onrace", Messages: []contract.Message{{Content: "reply still here"}}})
	if err == nil {
		r, err = d.c.WaitRun(d.ctx, r.ID)
	}
	if err != nil || r.Result != "still here" {
		t.Errorf("a turn after the hostile ones: %+v %v", r, err)
	}
}
