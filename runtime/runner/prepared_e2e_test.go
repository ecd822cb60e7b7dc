package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containers/podman/v5/pkg/bindings"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
)

// envReport mirrors the example agent's env command.
type envReport struct {
	Names []string `json:"names"`
	RunID string   `json:"runId"`
}

// TestPreparedFresh checks, on every rootful engine, that a container prepared ahead is
// a fresh container of its own folder: never started before its turn, not used by
// another folder, replaced when the turn's spec or the image changed (the agent inside
// sees the new setting), removed at Close, and removed without being counted as a
// leftover by the next runner. On Docker nothing is prepared: it would not pay.
func TestPreparedFresh(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			var image string
			h := newHarness(t, e, func(c *runner.Config) {
				c.Prepared = 2
				if e.Kind == "podman" {
					// An image of this test's own: it is replaced below.
					image = c.Image + "-prepared-" + c.Instance
					c.Image = image
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			if image != "" {
				importAgent(t, h, image, nil)
				// The first import is replaced below: remove it by its id.
				first := podmanImageID(t, e, image)
				t.Cleanup(func() { removePodmanImage(t, e, image, first) })
			}
			wctx, stopWatch := context.WithCancel(ctx)
			watched := make(chan struct{})
			go func() { defer close(watched); h.runner.WatchImages(wctx) }()
			defer func() { stopWatch(); <-watched }()

			main, other := groupfolder.Folder("main"), groupfolder.Folder("other")
			_, prepares := h.eng.(engine.Preparer)
			if !prepares {
				if err := h.runner.Prepare(ctx, runner.Turn{Folder: main}); err != nil {
					t.Fatal(err)
				}
				if got := h.runner.Prepared(); len(got) != 0 {
					t.Fatalf("%s prepared %v: it has no gain from it", e.Name, got)
				}
				if res := h.turn("main", "noop", nil); res.Output.Status != contract.StatusOK {
					t.Fatalf("turn: %+v", res)
				}
				return
			}
			prepared := h.prepare(ctx, main)
			otherPrepared := h.prepare(ctx, other)
			for _, name := range []string{prepared, otherPrepared} {
				st, err := h.eng.Inspect(ctx, name)
				if err != nil || st.Running || !st.StartedAt.IsZero() {
					t.Fatalf("prepared %s before its turn: %+v, %v; want created, never started", name, st, err)
				}
			}

			res := h.turn("main", "env", nil)
			rep := envOf(t, res)
			if res.Container != prepared {
				t.Fatalf("the turn ran in %s, not in its folder's prepared %s", res.Container, prepared)
			}
			if want := "r-" + strings.ReplaceAll(t.Name(), "/", "-"); rep.RunID != want {
				t.Errorf("the agent got run id %q on stdin, want %q", rep.RunID, want)
			}
			if slices.Contains(rep.Names, "ARIZUKO_RUN_ID") {
				t.Errorf("a prepared container carries a run in its environment: %v", rep.Names)
			}
			if st, err := h.eng.Inspect(ctx, otherPrepared); err != nil || !st.StartedAt.IsZero() {
				t.Errorf("another folder's prepared container was touched by main's turn: %+v, %v", st, err)
			}
			if got := h.runner.Prepared(); got[other] != otherPrepared || got[main] != "" {
				t.Errorf("prepared after main's turn = %v; want only other's %s", got, otherPrepared)
			}

			// A changed spec: the memory limit of the group.
			stale := h.prepare(ctx, main)
			res = h.turn("main", "sandbox", func(tn *runner.Turn) { tn.Limits.MemoryBytes = 300 << 20 })
			if res.Container == stale {
				t.Fatalf("a turn with another memory limit used the container prepared for the old one")
			}
			var s sandboxReport
			if err := json.Unmarshal([]byte(res.Output.Result), &s); err != nil {
				t.Fatalf("sandbox: %v\n%+v", err, res)
			}
			if got := s.Cgroup["memory"]; got != fmt.Sprint(300<<20) {
				t.Errorf("memory limit inside = %s, want the new %d", got, 300<<20)
			}
			h.waitGone(ctx, stale)

			// A replaced image: the prepared container of the old one goes at the event,
			// and the next one runs the new image.
			stale = h.prepare(ctx, main)
			importAgent(t, h, image, []string{"ENV PREPARED_MARK=2"})
			h.waitGone(ctx, stale)
			prepared = h.prepare(ctx, main)
			res = h.turn("main", "env", nil)
			if res.Container != prepared {
				t.Fatalf("the turn after the image change ran in %s, not in the newly prepared %s", res.Container, prepared)
			}
			if rep := envOf(t, res); !slices.Contains(rep.Names, "PREPARED_MARK") {
				t.Errorf("the agent does not see the replaced image's ENV: %v", rep.Names)
			}

			// A crash: the next runner of the instance removes what this one prepared,
			// and does not count it as a leftover.
			prepared = h.prepare(ctx, main)
			next, err := runner.New(h.cfg)
			if err != nil {
				t.Fatal(err)
			}
			removed, err := next.RemoveLeftovers(ctx, nil)
			if err != nil || len(removed) != 0 {
				t.Errorf("RemoveLeftovers = %v, %v; want the prepared containers removed uncounted", removed, err)
			}
			for _, name := range []string{prepared, otherPrepared} {
				if _, err := h.eng.Inspect(ctx, name); err == nil {
					t.Errorf("prepared %s still there after the next runner's cleanup", name)
				}
			}
		})
	}
}

// prepare has f's next container made and returns its name.
func (h *harness) prepare(ctx context.Context, f groupfolder.Folder) string {
	h.t.Helper()
	// The image watch may not listen yet: until it does, nothing is prepared.
	tn := runner.Turn{Folder: f}
	if h.turnMod != nil {
		h.turnMod(&tn)
	}
	for {
		if err := h.runner.Prepare(ctx, tn); err != nil {
			h.t.Fatalf("prepare %s: %v", f, err)
		}
		if name := h.runner.Prepared()[f]; name != "" {
			return name
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("%s: no container prepared for %s", h.name, f)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitGone waits until the engine no longer has the container.
func (h *harness) waitGone(ctx context.Context, name string) {
	h.t.Helper()
	for {
		if _, err := h.eng.Inspect(ctx, name); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("%s: stale prepared container %s was not removed", h.name, name)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func envOf(t *testing.T, res runner.Result) envReport {
	t.Helper()
	var rep envReport
	if res.Output.Status != contract.StatusOK {
		t.Fatalf("env turn: %+v", res)
	}
	if err := json.Unmarshal([]byte(res.Output.Result), &rep); err != nil {
		t.Fatalf("env: %v\n%s", err, res.Output.Result)
	}
	return rep
}

// importAgent imports the example agent as ref, with more Dockerfile-style changes, and
// returns once the engine's image events told of it: Podman writes them a moment after
// the import returns, and a watch started in between would see it late.
func importAgent(t *testing.T, h *harness, ref string, more []string) {
	t.Helper()
	p := h.eng.(engine.Preparer)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	listening, seen := make(chan struct{}), make(chan struct{})
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- p.WatchImages(ctx, func() { close(listening) }, func(name string) {
			if name == ref {
				select {
				case <-seen:
				default:
					close(seen)
				}
			}
		})
	}()
	select {
	case <-listening:
	case err := <-watchErr:
		t.Fatalf("watch images: %v", err)
	}
	tarball, entry, err := engine.StaticRootfs(enginetest.AgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	changes := append([]string{fmt.Sprintf(`ENTRYPOINT ["%s"]`, entry), "WORKDIR /workspace"}, more...)
	if err := h.eng.ImportImage(ctx, ref, bytes.NewReader(tarball), changes); err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	select {
	case <-seen:
	case <-ctx.Done():
		t.Fatalf("no image event for the import of %s", ref)
	}
}

// podmanImageID is the id of the image ref names, from the bindings' connection (the
// libpod API, not this module's engine).
func podmanImageID(t *testing.T, e enginetest.Engine, ref string) string {
	var img struct {
		ID string `json:"Id"`
	}
	if err := podmanAPI(e, http.MethodGet, "/images/%s/json", nil, &img, ref); err != nil {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	return img.ID
}

// removePodmanImage removes the images refs name, from the bindings' connection.
func removePodmanImage(t *testing.T, e enginetest.Engine, refs ...string) {
	q := url.Values{"images": refs, "force": {"true"}}
	var report struct{ Errors []string }
	if err := podmanAPI(e, http.MethodDelete, "/images/remove", q, &report); err != nil || len(report.Errors) > 0 {
		t.Errorf("remove %v: %v %v", refs, err, report.Errors)
	}
}

// podmanAPI sends one request of the libpod API to e and decodes the answer into out. It
// uses the bindings' connection alone: their typed packages (images, containers) pull
// containers/image's signature code, which needs gpgme or build tags.
func podmanAPI(e enginetest.Engine, method, endpoint string, q url.Values, out any, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, err := bindings.NewConnection(ctx, e.URI)
	if err != nil {
		return err
	}
	conn, err := bindings.GetClient(ctx)
	if err != nil {
		return err
	}
	resp, err := conn.DoRequest(ctx, nil, method, endpoint, q, nil, args...)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return resp.Process(out)
}
