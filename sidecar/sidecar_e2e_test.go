package sidecar_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/session"
	"github.com/arizuko/arizukod/sidecar"
)

// TestAgentCallsSidecar is a turn as the daemon runs it: the group's sidecar starts as a
// transient unit of the user manager, settings.json lists it, the example agent (on
// podman 4 through runner.Runner) calls its echo tool through the socket in the IPC
// mount, and after the turn the sidecar is gone.
func TestAgentCallsSidecar(t *testing.T) {
	systemdUser(t)
	e := enginetest.Rootful(t)[0]
	fx := newFixture(t, e, sidecar.ModeSystemdUser, nil)
	image := enginetest.EnsureAgentImage(t, e, fx.eng)
	r, err := runner.New(runner.Config{Engine: fx.eng, Info: fx.info, Layout: fx.layout, Image: image, Instance: fx.instance, StopGrace: time.Second, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := groupfolder.Folder("main")
	dirs, err := fx.layout.Ensure(f, os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	h, err := fx.m.Start(ctx, f, dirs.SidecarSockets, "run-e2e", "", []sidecar.Config{{Name: "echo", Image: sidecarImage}})
	if err != nil {
		t.Fatal(err)
	}
	defer fx.stop(h)
	if err := session.Seed(ctx, dirs.Session, session.Options{Folder: string(f), Sidecars: h.Names(), ConfigDir: dirs.Claude}); err != nil {
		t.Fatal(err)
	}
	settings, err := os.ReadFile(dirs.Claude + "/home/.claude/settings.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(settings), `"UNIX-CONNECT:`+sidecar.ContainerSocket("echo")+`"`) {
		t.Errorf("settings.json has no entry for the sidecar:\n%s", settings)
	}
	res, err := r.Run(ctx, runner.Turn{
		RunID: "run-e2e", Folder: f,
		Input: contract.Input{Messages: []contract.Message{{Role: "user", Content: `mcp-socket ` + sidecar.ContainerSocket("echo") + ` echo {"text":"hi"}`}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failure != runner.FailNone || res.Output.Status != contract.StatusOK {
		t.Fatalf("turn: %+v", res)
	}
	var got struct {
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	}
	if err := json.Unmarshal([]byte(res.Output.Result), &got); err != nil || got.IsError || got.Text != "hi" {
		t.Fatalf("the agent got %q from the sidecar (%v)", res.Output.Result, err)
	}
}
