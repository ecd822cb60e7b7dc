package fakeengine_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/fakeengine"
	"github.com/arizuko/arizukod/runtime/engine"
)

// TestLifecycle: create, attach, start, input, output, wait, list by label, remove, as
// the runner drives a real engine.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	answer := fakeengine.Answer(contract.Output{Status: contract.StatusOK, Result: "hi"})
	e := fakeengine.New(fakeengine.Script{Stdout: answer, Stderr: "log line\n", ExitCode: 0})
	id, err := e.Create(ctx, engine.Spec{Name: "a", Image: "img", Labels: map[string]string{engine.LabelInstance: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, engine.Spec{Name: "b", Image: "img", Labels: map[string]string{engine.LabelInstance: "y"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, engine.Spec{Name: "a", Image: "img"}); !errors.Is(err, engine.ErrNameInUse) {
		t.Errorf("a second container named a: %v, want ErrNameInUse, as the real engines say", err)
	}
	att, err := e.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	copied := make(chan error, 1)
	go func() { copied <- att.CopyOutput(&stdout, &stderr) }()
	if err := e.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := att.Stdin.Write([]byte("input\n")); err != nil {
		t.Fatal(err)
	}
	att.Stdin.Close()
	st, err := e.Wait(ctx, id)
	if err != nil || st.Running || st.ExitCode != 0 || st.Status != "exited" {
		t.Fatalf("wait: %+v, %v", st, err)
	}
	if err := <-copied; err != nil {
		t.Fatal(err)
	}
	if stdout.String() != answer || stderr.String() != "log line\n" || e.Stdin("a") != "input\n" {
		t.Errorf("stdout %q stderr %q stdin %q", stdout.String(), stderr.String(), e.Stdin("a"))
	}
	list, err := e.List(ctx, map[string]string{engine.LabelInstance: "x"})
	if err != nil || len(list) != 1 || list[0].Name != "a" {
		t.Errorf("list by label: %+v, %v", list, err)
	}
	if err := e.Remove(ctx, id); err != nil || e.Exists("a") {
		t.Errorf("remove: %v, still there: %v", err, e.Exists("a"))
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Errorf("removing a removed container: %v", err)
	}
	if _, err := e.Inspect(ctx, id); !errors.Is(err, engine.ErrNoSuchContainer) {
		t.Errorf("inspect removed: %v", err)
	}
}

// TestScripts: how each script ends a container.
func TestScripts(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		script  fakeengine.Script
		signal  string // sent after start; "" for none
		wantErr error  // of Create
		code    int
		oom     bool
		signals []string
	}{
		{"exit code", fakeengine.Script{ExitCode: 3}, "", nil, 3, false, nil},
		{"oom", fakeengine.Script{OOM: true}, "", nil, 137, true, nil},
		{"hang until SIGTERM", fakeengine.Script{Hang: true}, "SIGTERM", nil, 143, false, []string{"SIGTERM"}},
		{"hang until SIGKILL", fakeengine.Script{Hang: true}, "SIGKILL", nil, 137, false, []string{"SIGKILL"}},
		{"create refused", fakeengine.Script{CreateErr: errors.New("bad mount")}, "", engine.ErrCreate, 0, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := fakeengine.New(tc.script)
			id, err := e.Create(ctx, engine.Spec{Name: "c", Image: "img"})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("create: %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Start(ctx, id); err != nil {
				t.Fatal(err)
			}
			if tc.signal != "" {
				if err := e.Signal(ctx, id, tc.signal); err != nil {
					t.Fatal(err)
				}
			}
			st, err := e.Wait(ctx, id)
			if err != nil || st.ExitCode != tc.code || st.OOMKilled != tc.oom {
				t.Fatalf("state %+v, %v; want exit %d oom %v", st, err, tc.code, tc.oom)
			}
			if got := e.Signals("c"); !slices.Equal(got, tc.signals) {
				t.Errorf("signals %v, want %v", got, tc.signals)
			}
			if err := e.Signal(ctx, id, "SIGUSR1"); err == nil {
				t.Error("an exited container took a signal")
			}
		})
	}
}

// TestStopGrace: a container that ignores SIGTERM is killed after the grace.
func TestStopGrace(t *testing.T) {
	ctx := context.Background()
	e := fakeengine.New(fakeengine.Script{Hang: true, IgnoreTerm: true})
	id, err := e.Create(ctx, engine.Spec{Name: "c", Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx, id, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	st, _ := e.Inspect(ctx, id)
	if st.ExitCode != 137 || !slices.Equal(e.Signals("c"), []string{"SIGTERM", "SIGKILL"}) {
		t.Errorf("exit %d signals %v, want 137 after SIGTERM, SIGKILL", st.ExitCode, e.Signals("c"))
	}
}

// TestDown: while down every call fails with ErrDown, and the containers live on.
func TestDown(t *testing.T) {
	ctx := context.Background()
	e := fakeengine.New(fakeengine.Script{Hang: true})
	id, err := e.Create(ctx, engine.Spec{Name: "c", Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	e.SetDown(true)
	if _, err := e.Inspect(ctx, id); !errors.Is(err, fakeengine.ErrDown) {
		t.Errorf("inspect while down: %v", err)
	}
	if _, err := e.Create(ctx, engine.Spec{Name: "d", Image: "img"}); !errors.Is(err, fakeengine.ErrDown) || errors.Is(err, engine.ErrCreate) {
		t.Errorf("create while down: %v, want ErrDown and not ErrCreate", err)
	}
	e.SetDown(false)
	if st, err := e.Inspect(ctx, id); err != nil || !st.Running {
		t.Errorf("after the engine is back: %+v, %v", st, err)
	}
	e.SetImages("other")
	if _, err := e.Create(ctx, engine.Spec{Name: "d", Image: "img"}); !errors.Is(err, engine.ErrNoSuchImage) || !errors.Is(err, engine.ErrCreate) {
		t.Errorf("create of a missing image: %v", err)
	}
}
