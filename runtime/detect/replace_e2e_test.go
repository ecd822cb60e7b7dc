package detect_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
)

// TestImportReplacing: on every rootful engine, importing an image again under its
// reference removes the image the reference named before (an import leaves it untagged,
// taking its space on every rebuild, as `image build claude` did), and keeps one a
// container still uses, saying so.
func TestImportReplacing(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			eng, _ := e.Open(t)
			bin := enginetest.AgentBinary(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ref := "localhost/arizuko-replace-test:" + daemontest.RandHex(6)
			r := eng.(engine.ImageRemover)
			imp := func() engine.Replaced {
				t.Helper()
				replaced, err := engine.ImportReplacing(ctx, eng, ref, func() error { return engine.ImportStatic(ctx, eng, ref, bin) })
				if err != nil {
					t.Fatalf("import %s: %v", ref, err)
				}
				return replaced
			}
			if got := imp(); got.ID != "" {
				t.Errorf("the first import replaced %+v, want nothing", got)
			}
			first, err := r.ImageID(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.RemoveImage(context.Background(), ref) })
			if got := imp(); got.ID != first || got.Kept != nil {
				t.Errorf("the second import: %+v, want %s removed", got, first)
			}
			if there, err := eng.ImageExists(ctx, first); err != nil || there {
				t.Errorf("the replaced image %s after the import: there %v (%v), want removed", first, there, err)
			}
			second, err := r.ImageID(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			id, err := eng.Create(ctx, engine.Spec{Name: "arizuko-replace-test-" + daemontest.RandHex(6), Image: ref, Network: engine.NetworkNone})
			if err != nil {
				t.Fatal(err)
			}
			got := imp()
			if got.ID != second || !errors.Is(got.Kept, engine.ErrImageInUse) {
				t.Errorf("an import while a container uses the image: %+v, want %s kept, in use", got, second)
			}
			if there, err := eng.ImageExists(ctx, second); err != nil || !there {
				t.Errorf("the image a container uses after the import: there %v (%v), want kept", there, err)
			}
			if err := eng.Remove(ctx, id); err != nil {
				t.Fatal(err)
			}
			if err := r.RemoveImage(ctx, second); err != nil {
				t.Errorf("remove %s once no container uses it: %v", second, err)
			}
		})
	}
}
