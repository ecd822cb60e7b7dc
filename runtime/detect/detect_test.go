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
