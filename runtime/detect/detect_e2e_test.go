package detect_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/detect"
	"github.com/arizuko/arizukod/runtime/engine"
)

// TestFindPings: every engine of the test host is found by its ping and answers Ping and
// Info; a socket that is not there is ErrNoEngine naming it.
func TestFindPings(t *testing.T) {
	engines := append(enginetest.Rootful(t), enginetest.Rootless(t))
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			eng, err := detect.Find(ctx, e.Kind, e.URI)
			if err != nil {
				t.Fatalf("find %s: %v", e.URI, err)
			}
			if err := eng.Ping(ctx); err != nil {
				t.Fatalf("ping %s: %v", e.URI, err)
			}
			info, err := eng.Info(ctx)
			if err != nil || info.Name != e.Kind || info.Version == "" {
				t.Fatalf("info of %s: %+v %v", e.URI, info, err)
			}
		})
	}
	missing := "unix://" + filepath.Join(t.TempDir(), "none.sock")
	for _, kind := range []string{"podman", "docker"} {
		_, err := detect.Find(context.Background(), kind, missing)
		if !errors.Is(err, engine.ErrNoEngine) || !strings.Contains(err.Error(), missing) {
			t.Errorf("find %s at a missing socket: %v, want ErrNoEngine naming it", kind, err)
		}
		d, err := detect.Open(kind, missing)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Ping(context.Background()); err == nil {
			t.Errorf("%s ping of a missing socket answered", kind)
		}
	}
}

// TestCreateRefusals: each engine says why it refused a create in the sentinel callers
// branch on: a missing image is ErrNoSuchImage (never pulled), a name in use is
// ErrNameInUse (a retry may fix it) and not ErrCreate (a misconfiguration).
func TestCreateRefusals(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			eng, _ := e.Open(t)
			image := enginetest.EnsureAgentImage(t, e, eng)
			name := "arizuko-test-name-" + strings.ReplaceAll(t.Name(), "/", "-")
			spec := engine.Spec{Name: name, Image: image, Network: engine.NetworkNone}
			id, err := eng.Create(ctx, spec)
			if err != nil {
				t.Fatalf("create %s: %v", name, err)
			}
			defer eng.Remove(context.Background(), id)
			if _, err := eng.Create(ctx, spec); !errors.Is(err, engine.ErrNameInUse) || errors.Is(err, engine.ErrCreate) {
				t.Errorf("second create of %s: %v; want ErrNameInUse, not ErrCreate", name, err)
			}
			spec.Name, spec.Image = name+"-noimage", "localhost/arizuko-no-such-image:none"
			if _, err := eng.Create(ctx, spec); !errors.Is(err, engine.ErrNoSuchImage) {
				t.Errorf("create of a missing image: %v; want ErrNoSuchImage", err)
			}
		})
	}
}
