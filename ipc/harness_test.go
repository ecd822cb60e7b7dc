package ipc_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/robfig/cron/v3"

	"github.com/arizuko/arizukod/internal/agentdir"
	"github.com/arizuko/arizukod/ipc"
	"github.com/arizuko/arizukod/ipc/policy"
	"github.com/arizuko/arizukod/store"
)

// The folders of the tier matrix: one per tier, each the parent of the next.
var tierFolders = []string{"main", "main/a", "main/a/b", "main/a/b/c"}

// seedTools is the seed's capability table by tier, written out by hand.
var seedTools = map[int][]string{
	0: {"add_route", "cancel_task", "clear_session", "delegate_to_child", "delegate_to_parent", "delete_route",
		"get_groups", "get_task", "inject_message", "list_routes", "list_tasks", "refresh_groups", "register_group",
		"schedule_task", "send_document", "send_message", "send_reply", "set_routes", "spawn_group", "update_task"},
	1: {"add_route", "cancel_task", "clear_session", "delegate_to_child", "delegate_to_parent", "delete_route",
		"get_groups", "get_task", "list_routes", "list_tasks", "refresh_groups", "register_group",
		"schedule_task", "send_document", "send_message", "send_reply", "set_routes", "update_task"},
	2: {"delegate_to_parent", "send_document", "send_message", "send_reply"},
	3: {"send_reply"},
}

// testNextRun is a scheduler's NextRun: cron by robfig/cron's standard
// parser, intervals in milliseconds (at least 10 s), once at an RFC 3339 time.
func testNextRun(kind, expr string, now time.Time) (int64, error) {
	switch kind {
	case "cron":
		sched, err := cron.ParseStandard(expr)
		if err != nil {
			return 0, err
		}
		return sched.Next(now).UnixMilli(), nil
	case "interval":
		ms, err := strconv.ParseInt(expr, 10, 64)
		if err != nil {
			return 0, err
		}
		if ms < 10000 {
			return 0, fmt.Errorf("interval of %d ms is shorter than the minimum 10s", ms)
		}
		return now.UnixMilli() + ms, nil
	case "once":
		t, err := time.Parse(time.RFC3339, expr)
		if err != nil {
			return 0, err
		}
		return t.UnixMilli(), nil
	}
	return 0, fmt.Errorf("unknown schedule kind %q", kind)
}

// fixedNow is the clock of the servers under test.
var fixedNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// env is a real store in a temporary data directory with the groups of the
// matrix registered (main/a/b/c/d gives the deepest one a child), a sibling
// subtree main/z, and a second root other with the same shape (otherTree),
// the tree no group of main may touch.
type env struct {
	ctx   context.Context
	dir   string
	st    *store.Store
	runID string

	mu    sync.Mutex
	woken []string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	// A short directory: unix socket paths hold at most 107 bytes.
	dir, err := os.MkdirTemp("", "ipc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return newEnvAt(t, dir)
}

// newEnvAt makes the env in an existing data directory.
func newEnvAt(t testing.TB, dir string) *env {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "arizukod.db"), store.WithClock(func() time.Time { return fixedNow }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{ctx: ctx, dir: dir, st: st}
	for _, f := range append([]string{"main", "main/a", "main/a/b", "main/a/b/c", "main/a/b/c/d", "main/z"}, otherTree...) {
		parent, _ := policy.Parent(f)
		if _, err := st.UpsertGroup(ctx, store.Group{Folder: f, Parent: parent, Name: "group " + f}); err != nil {
			t.Fatal(err)
		}
	}
	run, err := st.CreateRun(ctx, store.Run{Folder: "main"})
	if err != nil {
		t.Fatal(err)
	}
	e.runID = run.ID
	return e
}

// otherTree is the second root and its groups, one per tier as in main.
var otherTree = []string{"other", "other/a", "other/a/b", "other/a/b/c", "other/a/b/c/d"}

// mirror is the folder of the other tree at f's place in main's: main/a is
// other/a.
func mirror(f string) string { return "other" + strings.TrimPrefix(f, "main") }

// dump is what the store holds but runs: every row of every other table, in
// order. A refused call must leave it as it was.
func (e *env) dump(t testing.TB) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.dir, "arizukod.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables, err := db.QueryContext(e.ctx, `SELECT name FROM sqlite_master WHERE type = 'table'
		AND name NOT IN ('runs', 'run_egress', 'schema_migrations') AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tables.Next() {
		var n string
		if err := tables.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := tables.Close(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range names {
		rows, err := db.QueryContext(e.ctx, `SELECT * FROM "`+n+`" ORDER BY rowid`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		fmt.Fprintf(&b, "%s %v\n", n, cols)
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "  %q\n", fmt.Sprint(vals...))
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// unchanged fails when the store differs from before, a dump taken earlier.
func (e *env) unchanged(t testing.TB, what, before string) {
	t.Helper()
	if after := e.dump(t); after != before {
		t.Errorf("%s was refused but changed the store:\nbefore:\n%s\nafter:\n%s", what, before, after)
	}
}

// socketPath is where the daemon puts folder's router.sock: ipc/<slug>/, flat.
func (e *env) socketPath(folder string) string {
	return filepath.Join(e.dir, "ipc", strings.ReplaceAll(folder, "/", "-"), "router.sock")
}

func (e *env) groupDir(folder string) string {
	return filepath.Join(e.dir, "groups", folder)
}

// start serves folder's socket; mod may change the config first.
func (e *env) start(t testing.TB, folder string, mod func(*ipc.ServerConfig)) *ipc.Server {
	t.Helper()
	for _, d := range []string{filepath.Dir(e.socketPath(folder)), e.groupDir(folder)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := ipc.ServerConfig{
		Folder: folder, SocketPath: e.socketPath(folder), OpenGroup: func() (*agentdir.Dir, error) { return agentdir.Open(e.groupDir(folder)) }, ReplyTo: "tg:42",
		Store: e.st, RunID: e.runID, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return fixedNow }, NextRun: testNextRun,
		Wake: func(f string) { e.mu.Lock(); e.woken = append(e.woken, f); e.mu.Unlock() },
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := ipc.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func (e *env) wakes() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.woken)
}

// dial connects mcp-go's client to a socket through a stdio-style transport
// over the unix connection and initializes the session.
func dial(t testing.TB, socket string) *client.Client {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(transport.NewIO(eofOnClose{conn}, conn, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "ipc-test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

// eofOnClose reads a connection closed by our own side as its end, which is
// how mcp-go's stdio transport expects a finished stream to look.
type eofOnClose struct{ net.Conn }

func (r eofOnClose) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	if errors.Is(err, net.ErrClosed) {
		err = io.EOF
	}
	return n, err
}

func listTools(t testing.TB, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	names := []string{}
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// callResult is a tools/call outcome: the tool's text and whether it is a
// tool error.
type callResult struct {
	isError bool
	text    string
}

func call(t testing.TB, c *client.Client, tool string, args map[string]any) callResult {
	t.Helper()
	r, err := callErr(c, tool, args)
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return r
}

func callErr(c *client.Client, tool string, args map[string]any) (callResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return callResult{}, err
	}
	var text []string
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return callResult{isError: res.IsError, text: strings.Join(text, "\n")}, nil
}

// mustOK fails unless r is a successful call, and decodes its JSON.
func mustOK(t testing.TB, what string, r callResult) map[string]any {
	t.Helper()
	if r.isError {
		t.Fatalf("%s: tool error: %s", what, r.text)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(r.text), &out); err != nil {
		t.Fatalf("%s: result is not a JSON object: %v: %s", what, err, r.text)
	}
	return out
}

// mustFail fails unless r is a tool error containing every want.
func mustFail(t testing.TB, what string, r callResult, want ...string) {
	t.Helper()
	if !r.isError {
		t.Fatalf("%s: succeeded, want a tool error containing %q: %s", what, want, r.text)
	}
	for _, w := range want {
		if !strings.Contains(r.text, w) {
			t.Fatalf("%s: error %q does not contain %q", what, r.text, w)
		}
	}
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
