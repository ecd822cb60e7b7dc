package sidecar_test

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/sidecar"
)

// TestTwoInstances: two daemons (two data directories, so two instances) on one engine
// and one user manager run a sidecar of the same folder and name at once, as transient
// units and directly on the engine; stopping one leaves the other answering. A unit
// stopped without its daemon (as Cleanup or an operator stops it) stops and removes its
// own container by the id its run wrote, never by a name.
func TestTwoInstances(t *testing.T) {
	for _, mode := range []sidecar.Mode{sidecar.ModeEngine, sidecar.ModeSystemdUser} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == sidecar.ModeSystemdUser {
				systemdUser(t)
			}
			for _, e := range enginetest.Rootful(t) {
				t.Run(e.Name, func(t *testing.T) { twoInstances(t, e, mode) })
			}
		})
	}
}

func twoInstances(t *testing.T, e enginetest.Engine, mode sidecar.Mode) {
	fxs := []*fixture{newFixture(t, e, mode, nil), newFixture(t, e, mode, nil)}
	a, b := fxs[0], fxs[1]
	cfg := sidecar.Config{Name: "echo", Image: sidecarImage}
	hs := make([]*sidecar.Handle, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, fx := range fxs {
		wg.Go(func() { hs[i], errs[i] = fx.start("main", cfg) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, h := range hs {
				if h != nil {
					a.stop(h)
				}
			}
			t.Fatalf("instance %d: %v", i, err)
		}
	}
	if a.name("main", "echo") == b.name("main", "echo") {
		t.Fatalf("both instances name their sidecar %s", a.name("main", "echo"))
	}
	for _, fx := range fxs {
		if got := echo(t, fx.socket("main", "echo"), fx.instance); got != fx.instance {
			t.Errorf("%s: echo answered %q", fx.instance, got)
		}
		if c := fx.containers(); len(c) != 1 || c[0] != fx.name("main", "echo") {
			t.Errorf("%s: containers %v", fx.instance, c)
		}
	}
	a.stop(hs[0])
	if c := a.containers(); len(c) > 0 {
		t.Errorf("after its stop: containers %v", c)
	}
	if got := echo(t, b.socket("main", "echo"), "still here"); got != "still here" {
		t.Errorf("the other instance's sidecar answered %q after the first stopped", got)
	}
	if mode == sidecar.ModeSystemdUser {
		unit := b.name("main", "echo") + ".service"
		if p := systemctl(t, unit, "ActiveState"); p["ActiveState"] != "active" {
			t.Errorf("the other instance's unit after the first stopped: %v", p)
		}
		id := b.containerID(b.name("main", "echo"))
		if out, err := exec.Command("systemctl", "--user", "stop", unit).CombinedOutput(); err != nil {
			t.Fatalf("systemctl stop %s: %v: %s", unit, err, out)
		}
		if c := b.containers(); len(c) > 0 {
			t.Errorf("after systemctl stop %s: containers %v", unit, c)
		}
		// The engine's stop and rm print the id they were given (journald may take a moment).
		// By the unit's syslog identifier, the container's name: journald may attribute the
		// lines of a short-lived stop command to no unit when it exited before being read.
		var log string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			out, err := exec.Command("journalctl", "--no-pager", "-q", "-o", "cat", "SYSLOG_IDENTIFIER="+b.name("main", "echo")).Output()
			if err != nil {
				t.Fatalf("journalctl: %v", err)
			}
			if log = string(out); strings.Contains(log, id) {
				break
			}
		}
		if !strings.Contains(log, id) {
			t.Errorf("the unit's stop commands did not name container %s:\n%s", id, log)
		}
	}
	b.stop(hs[1])
	if c := b.containers(); len(c) > 0 {
		t.Errorf("after its stop: containers %v", c)
	}
}

// containerID is the id of this fixture's container name.
func (fx *fixture) containerID(name string) string {
	fx.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	list, err := fx.eng.List(ctx, map[string]string{engine.LabelInstance: fx.instance, engine.LabelRole: sidecar.RoleSidecar})
	if err != nil {
		fx.t.Fatal(err)
	}
	for _, c := range list {
		if strings.TrimPrefix(c.Name, "/") == name {
			return c.ID
		}
	}
	fx.t.Fatalf("no container %s", name)
	return ""
}
