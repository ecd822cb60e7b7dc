package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/queue"
	"github.com/arizuko/arizukod/store"
)

// idleQueue is a queue that runs nothing: the fuzz target exercises the API's validation
// and the store, not containers.
type idleQueue struct{ changed chan struct{} }

func (idleQueue) Wake()            {}
func (idleQueue) Kill(string) bool { return false }
func (idleQueue) Steer(context.Context, string, []contract.Message) error {
	return queue.ErrNotRunning
}
func (q idleQueue) Ended(string) (<-chan struct{}, func()) { return q.changed, func() {} }

type okHealth struct{}

func (okHealth) Health(context.Context) apiwire.HealthReport {
	return apiwire.HealthReport{Status: "ok"}
}

var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}

// FuzzRequests sends arbitrary requests to the API over a real store: whatever comes, the
// answer is never a 5xx, and every error the handlers give is JSON with a message.
func FuzzRequests(f *testing.F) {
	for _, c := range badRequests("r_0000000000000001", "r_0000000000000002") {
		if len(c.body) > 4096 {
			continue
		}
		f.Add(uint8(max(0, slices.Index(methods, c.method))), c.path, c.ctype, []byte(c.body))
	}
	f.Add(uint8(1), "/v1/runs", "application/json", []byte(`{"folder":"main","messages":[{"content":"reply x"}],"timeout":"90s"}`))
	f.Add(uint8(1), "/v1/groups/main/messages", "", []byte(`{"messages":[{"content":"x","role":"assistant"}],"senderJid":"a@b"}`))
	f.Add(uint8(2), "/v1/groups/main/grants", "application/json", []byte(`{"rules":["*","!send_message(to=x*)"]}`))
	f.Add(uint8(0), "/v1/runs?folder=main&state=queued&limit=5", "", []byte(nil))
	f.Add(uint8(0), "/v1/tasks?folder=main&state=paused", "", []byte(nil))
	f.Add(uint8(1), "/v1/tasks/t_0000000000000001/resume", "", []byte(nil))
	f.Add(uint8(0), "/v1/groups/main/messages?limit=3", "", []byte(nil))

	st, err := store.Open(context.Background(), filepath.Join(f.TempDir(), "arizukod.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	if _, err := st.UpsertGroup(context.Background(), store.Group{Folder: "main"}); err != nil {
		f.Fatal(err)
	}
	if _, err := st.CreateTask(context.Background(), store.Task{ID: "t_0000000000000001", Folder: "main", Prompt: "p",
		ScheduleKind: store.ScheduleCron, ScheduleExpr: "0 9 * * *", State: store.TaskPaused}); err != nil {
		f.Fatal(err)
	}
	srv := api.New(st, idleQueue{changed: make(chan struct{})}, okHealth{}, slog.New(slog.NewTextHandler(io.Discard, nil)))

	f.Fuzz(func(t *testing.T, m uint8, path, ctype string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, methods[int(m)%len(methods)], "http://arizukod"+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %q %q %q: HTTP %d %s", req.Method, path, ctype, body, w.Code, w.Body)
		}
		if w.Code >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("%s %q: HTTP %d with no JSON error: %q", req.Method, path, w.Code, w.Body)
			}
		}
	})
}
