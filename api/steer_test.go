package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/store"
)

// unsteerable is a queue whose engine cannot steer a running turn (Kubernetes has no
// signal API).
type unsteerable struct{ idleQueue }

func (unsteerable) Steer(context.Context, string, []contract.Message) error {
	return fmt.Errorf("steer main: signal: %w", errors.ErrUnsupported)
}

// TestSteerUnsupported: a steer the engine cannot deliver is 501 saying so and what to do
// instead, not an internal error.
func TestSteerUnsupported(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := storedRun(t, st, "main", false)
	srv := api.New(st, unsteerable{idleQueue{changed: make(chan struct{})}}, okHealth{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	code, body := serve(t, srv, http.MethodPost, "/v1/runs/"+id+"/steer", `{"messages":[{"content":"turn left"}]}`)
	if code != http.StatusNotImplemented || !strings.Contains(body, "cannot be steered on this engine") || !strings.Contains(body, "next turn") {
		t.Errorf("HTTP %d %s; want 501 saying the engine cannot steer", code, body)
	}
}
