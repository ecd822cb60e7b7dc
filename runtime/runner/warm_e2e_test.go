package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
)

// TestWarmAgents checks, on every rootful engine, the runner's warm agents with the example
// agent in an image that declares contract.PrepareLabel: a warm agent runs before its turn
// and serves it (the agent answers that it was started ahead), its Hold is released once;
// a turn with another WarmKey does not use it and it is removed, and so does a scheduled
// task's turn of the folder; the next runner after a crash removes it uncounted;
// WarmAgents bounds them,
// the most recently prepared kept; below WarmMinAvailable the warm ones are removed and the
// next is prepared without being started; Close releases every hold. The example agent's
// own image, which does not declare the label, keeps prepared containers that are never
// started, even for a turn that may be warm. On Docker nothing is prepared.
func TestWarmAgents(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			var avail atomic.Int64
			avail.Store(64 << 30)
			var image, plain string
			h := newHarness(t, e, func(c *runner.Config) {
				c.Prepared, c.WarmAgents, c.WarmMinAvailable = 3, 1, 1<<30
				c.MemAvailable = func() (int64, error) { return avail.Load(), nil }
				if e.Kind == "podman" {
					plain = c.Image
					image = c.Image + "-warm-" + c.Instance
					c.Image = image
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			var held, released atomic.Int64
			warmTurn := func(f groupfolder.Folder, key string) runner.Turn {
				return runner.Turn{Folder: f, Warm: true, WarmKey: key, Hold: func() (func(), error) {
					held.Add(1)
					return func() { released.Add(1) }, nil
				}}
			}
			main, other := groupfolder.Folder("main"), groupfolder.Folder("other")
			if _, ok := h.eng.(engine.Preparer); !ok {
				if err := h.runner.Prepare(ctx, warmTurn(main, "k")); err != nil {
					t.Fatal(err)
				}
				if got := h.runner.WarmAgents(ctx); len(got) != 0 || held.Load() != 0 {
					t.Fatalf("%s has warm agents %v: it prepares nothing", e.Name, got)
				}
				return
			}
			importAgent(t, h, image, []string{"LABEL " + contract.PrepareLabel + "=1"})
			t.Cleanup(func() { removePodmanImage(t, e, image) })
			wctx, stopWatch := context.WithCancel(ctx)
			watched := make(chan struct{})
			go func() { defer close(watched); h.runner.WatchImages(wctx) }()
			defer func() { stopWatch(); <-watched }()
			prepare := func(turn runner.Turn, not string) string {
				t.Helper()
				for {
					if err := h.runner.Prepare(ctx, turn); err != nil {
						t.Fatalf("prepare %s: %v", turn.Folder, err)
					}
					if name := h.runner.Prepared()[turn.Folder]; name != "" && name != not {
						return name
					}
					select {
					case <-ctx.Done():
						t.Fatalf("no container prepared for %s", turn.Folder)
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
			warmAs := func(key string) func(*runner.Turn) {
				return func(t *runner.Turn) { t.Warm, t.WarmKey = true, key }
			}

			name := prepare(warmTurn(main, "k1"), "")
			if st, err := h.eng.Inspect(ctx, name); err != nil || !st.Running {
				t.Fatalf("warm agent %s: %+v, %v; want running", name, st, err)
			}
			if got := h.runner.WarmAgents(ctx); len(got) != 1 || got[0].Container != name || got[0].PSSBytes <= 0 {
				t.Errorf("WarmAgents: %+v; want %s with its memory", got, name)
			}
			res := h.turn("main", "prepared", warmAs("k1"))
			if res.Container != name || res.Output.Result != "warm" {
				t.Fatalf("the turn ran in %s (%q), want the warm agent %s: %+v", res.Container, res.Output.Result, name, res)
			}
			if held.Load() != 1 || released.Load() != 1 {
				t.Errorf("holds %d, released %d after the turn took the warm agent; want 1, 1", held.Load(), released.Load())
			}

			// Another WarmKey: the warm agent is removed and the turn runs a fresh container.
			name = prepare(warmTurn(main, "k1"), name)
			res = h.turn("main", "prepared", warmAs("k2"))
			if res.Container == name || res.Output.Result != "fresh" {
				t.Fatalf("a turn with another WarmKey ran in %s (%q), the warm agent was %s", res.Container, res.Output.Result, name)
			}
			if _, err := h.eng.Inspect(ctx, name); err == nil {
				t.Errorf("the warm agent %s the turn did not use is still there after the turn", name)
			}

			// A crash: the next runner of the instance removes the warm agent and does not
			// count it as a run's leftover.
			name = prepare(warmTurn(main, "k1"), "")
			next, err := runner.New(h.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if removed, err := next.RemoveLeftovers(ctx, nil); err != nil || len(removed) != 0 {
				t.Errorf("RemoveLeftovers = %v, %v; want the warm agent removed uncounted", removed, err)
			}
			if _, err := h.eng.Inspect(ctx, name); err == nil {
				t.Errorf("the warm agent %s is still there after the next runner's cleanup", name)
			}
			h.runner.Close() // forgets the warm agent the "next runner" removed
			h.runner, err = runner.New(h.cfg)
			if err != nil {
				t.Fatal(err)
			}
			wctx3, stopWatch3 := context.WithCancel(ctx)
			watched3 := make(chan struct{})
			go func() { defer close(watched3); h.runner.WatchImages(wctx3) }()
			defer func() { stopWatch3(); <-watched3 }()

			// A scheduled task's turn of the folder uses no warm agent, and its services must
			// not run beside one: settling it removes the warm agent.
			name = prepare(warmTurn(main, "k1"), "")
			before := released.Load()
			h.runner.Settle(ctx, runner.Turn{Folder: main, TaskID: "t1", Warm: true, WarmKey: "k1"})()
			if _, err := h.eng.Inspect(ctx, name); err == nil || released.Load() != before+1 {
				t.Errorf("after a task's turn settled, the warm agent %s: inspect %v, released %d (was %d)", name, err, released.Load(), before)
			}

			// A warm agent slow to get ready: the folder's turn waits a while, then cuts its
			// making short; its container is gone before the turn runs a fresh one.
			slow := warmTurn(main, "k1")
			slow.Input.SystemPrompt = "ready-after 1m"
			making := make(chan error, 1)
			go func() { making <- h.runner.Prepare(ctx, slow) }()
			var slowName string
			for deadline := time.Now().Add(time.Minute); slowName == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				list, err := h.eng.List(ctx, map[string]string{engine.LabelInstance: h.cfg.Instance, engine.LabelWarm: "1"})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range list {
					if c.Running {
						slowName = c.Name
					}
				}
			}
			if slowName == "" {
				t.Fatal("the slow warm agent never ran")
			}
			began := time.Now()
			h.runner.Settle(ctx, slow)()
			if waited := time.Since(began); waited > 30*time.Second {
				t.Errorf("the turn waited %s for a warm agent slow to get ready", waited)
			}
			if _, err := h.eng.Inspect(ctx, slowName); err == nil {
				t.Errorf("the slow warm agent %s is still there once the turn settled", slowName)
			}
			if err := <-making; err == nil {
				t.Errorf("the cut-short making of %s: no error", slowName)
			}

			// WarmAgents 1: the warm agent of the folder prepared last is kept.
			a := prepare(warmTurn(main, "k1"), "")
			b := prepare(warmTurn(other, "k1"), "")
			h.waitGone(ctx, a)
			if got := h.runner.WarmAgents(ctx); len(got) != 1 || got[0].Container != b {
				t.Errorf("WarmAgents 1: %+v, want only %s", got, b)
			}

			// Memory short: the warm agents go, and the next is prepared without starting.
			avail.Store(1 << 20)
			mctx, stopMem := context.WithCancel(ctx)
			memDone := make(chan struct{})
			go func() { defer close(memDone); h.runner.WatchMemory(mctx, 50*time.Millisecond) }()
			h.waitGone(ctx, b)
			stopMem()
			<-memDone
			c := prepare(warmTurn(main, "k1"), a)
			if st, err := h.eng.Inspect(ctx, c); err != nil || st.Running || !st.StartedAt.IsZero() {
				t.Errorf("prepared with memory short: %s %+v, %v; want created, never started", c, st, err)
			}
			if res := h.turn("main", "prepared", warmAs("k1")); res.Container != c || res.Output.Result != "fresh" {
				t.Errorf("the turn ran in %s (%q), want the prepared %s, started at its turn", res.Container, res.Output.Result, c)
			}
			h.runner.Close()
			if held.Load() != released.Load() {
				t.Errorf("holds %d, released %d after Close", held.Load(), released.Load())
			}

			// The example agent's own image does not declare the label: never warm.
			h2 := newHarness(t, e, func(c *runner.Config) {
				c.Prepared, c.WarmAgents, c.WarmMinAvailable, c.Image = 3, 1, 0, plain
			})
			wctx2, stopWatch2 := context.WithCancel(ctx)
			watched2 := make(chan struct{})
			go func() { defer close(watched2); h2.runner.WatchImages(wctx2) }()
			defer func() { stopWatch2(); <-watched2 }()
			var held2 atomic.Int64
			turn := runner.Turn{Folder: main, Warm: true, WarmKey: "k1", Hold: func() (func(), error) { held2.Add(1); return func() {}, nil }}
			var p string
			for p == "" && ctx.Err() == nil {
				if err := h2.runner.Prepare(ctx, turn); err != nil {
					t.Fatal(err)
				}
				p = h2.runner.Prepared()[main]
				time.Sleep(50 * time.Millisecond)
			}
			if st, err := h2.eng.Inspect(ctx, p); err != nil || st.Running || !st.StartedAt.IsZero() || held2.Load() != 0 {
				t.Errorf("the example agent's image: prepared %s %+v, %v, held %d; want created, never started, nothing held", p, st, err, held2.Load())
			}
			if res := h2.turn("main", "prepared", warmAs("k1")); res.Container != p || res.Output.Result != "fresh" {
				t.Errorf("the example agent's image: the turn ran in %s (%q), want the prepared %s started at its turn", res.Container, res.Output.Result, p)
			}
		})
	}
}
