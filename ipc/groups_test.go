package ipc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/arizuko/arizukod/ipc"
	"github.com/arizuko/arizukod/store"
)

// raceConfig is the container config the operator registers groups with.
const raceConfig = `{"additional_mounts":[{"host_path":"/srv/data","container_path":"data","readonly":true}],` +
	`"egress":["github.com:443"],"model":{"tokens_per_day":1000,"requests_per_turn":5}}`

// register is the operator's POST /v1/groups of folder with raceConfig: the HTTP status
// and body.
func (o operator) register(folder string) (int, string) {
	body := fmt.Sprintf(`{"folder":%q,"name":"operator's","containerConfig":%s}`, folder, raceConfig)
	req := httptest.NewRequest(http.MethodPost, "http://arizukod/v1/groups", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	o.srv.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// operatorsGroup fails unless folder is registered with the operator's name and config.
func operatorsGroup(t *testing.T, e *env, folder string) {
	t.Helper()
	var want bytes.Buffer
	if err := json.Compact(&want, []byte(raceConfig)); err != nil {
		t.Fatal(err)
	}
	g, err := e.st.GetGroup(e.ctx, folder)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := json.Compact(&got, g.ContainerConfig); err != nil || got.String() != want.String() || g.Name != "operator's" {
		t.Errorf("%s ends as %q with config %s, want the operator's %s", folder, g.Name, g.ContainerConfig, want.String())
	}
}

// lateOperator is the store with the operator registering folder right after the
// tool's first read of it: where a check of the tool has looked and found nothing.
type lateOperator struct {
	*store.Store
	folder   string
	register func()
	once     sync.Once
}

func (s *lateOperator) GetGroup(ctx context.Context, folder string) (*store.Group, error) {
	g, err := s.Store.GetGroup(ctx, folder)
	if folder == s.folder {
		s.once.Do(s.register)
	}
	return g, err
}

// TestRegisterRacesOperator: the operator registers groups with their mounts, egress
// and budgets through the API while agents register the same folders with
// register_group and spawn_group. Whoever comes first, the operator's container config
// is what each group ends with; an agent that comes second is told the group is
// registered.
func TestRegisterRacesOperator(t *testing.T) {
	t.Run("at once", func(t *testing.T) {
		const (
			folders = 100
			agents  = 4
		)
		e := newEnv(t)
		op := newOperator(e)
		sock := e.start(t, "main", nil).SocketPath()
		var conns []func(folder string) (callResult, error)
		for j := range agents {
			c := dial(t, sock)
			tool := []string{"register_group", "spawn_group"}[j%2]
			conns = append(conns, func(folder string) (callResult, error) {
				return callErr(c, tool, map[string]any{"folder": folder, "name": "agent's"})
			})
		}
		for i := range folders {
			folder := fmt.Sprintf("main/race%d", i)
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				errs []string
			)
			fail := func(format string, a ...any) {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, fmt.Sprintf(format, a...))
			}
			start := make(chan struct{})
			for j, callTool := range conns {
				wg.Go(func() {
					<-start
					r, err := callTool(folder)
					switch {
					case err != nil:
						fail("agent %d, %s: %v", j, folder, err)
					case r.isError && !strings.Contains(r.text, "group "+folder+" is already registered"):
						fail("agent %d, %s: %s", j, folder, r.text)
					}
				})
			}
			wg.Go(func() {
				<-start
				if code, body := op.register(folder); code != http.StatusOK {
					fail("POST /v1/groups %s: %d %s", folder, code, body)
				}
			})
			close(start)
			wg.Wait()
			for _, msg := range errs {
				t.Error(msg)
			}
			operatorsGroup(t, e, folder)
		}
	})

	t.Run("between the tool's read and its write", func(t *testing.T) {
		for _, tool := range []string{"register_group", "spawn_group"} {
			t.Run(tool, func(t *testing.T) {
				e := newEnv(t)
				op := newOperator(e)
				folder := "main/late"
				var code int
				st := &lateOperator{Store: e.st, folder: folder}
				st.register = func() { code, _ = op.register(folder) }
				sock := e.start(t, "main", func(c *ipc.ServerConfig) { c.Store = st }).SocketPath()
				r := call(t, dial(t, sock), tool, map[string]any{"folder": folder, "name": "agent's"})
				if r.isError && !strings.Contains(r.text, "already registered") {
					t.Errorf("%s: %s", tool, r.text)
				}
				st.once.Do(st.register)
				if code != http.StatusOK {
					t.Fatalf("the operator's POST /v1/groups: %d", code)
				}
				operatorsGroup(t, e, folder)
			})
		}
	})
}
