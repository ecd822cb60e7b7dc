package ipc_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/ipc"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/store"
)

// boxed is a store and a runner over one data directory of a real engine.
type boxed struct {
	*env
	name   string
	runner *runner.Runner
	layout groupfolder.Layout
}

func newBoxed(t *testing.T, e enginetest.Engine) *boxed {
	t.Helper()
	eng, info := e.Open(t)
	image := enginetest.EnsureAgentImage(t, e, eng)
	dataDir := enginetest.DataDir(t)
	layout, err := groupfolder.NewLayout(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := runner.Config{Engine: eng, Info: info, Layout: layout, Image: image,
		Instance: "test-" + filepath.Base(dataDir), StopGrace: time.Second, Timeout: time.Minute}
	r, err := runner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r.Close()
		list, err := eng.List(ctx, map[string]string{engine.LabelInstance: cfg.Instance})
		if err != nil {
			t.Errorf("list containers: %v", err)
		}
		for _, c := range list {
			t.Errorf("container %s left behind", c.Name)
			eng.Remove(ctx, c.ID)
		}
	})
	return &boxed{env: newEnvAt(t, dataDir), name: e.Name, runner: r, layout: layout}
}

// turn runs one turn of folder with message, with the group's MCP server up for exactly
// the life of the container, as the daemon runs it, and returns the agent's answer.
func (b *boxed) turn(t *testing.T, folder, message string) string {
	t.Helper()
	f, err := groupfolder.Parse(folder)
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := b.layout.Ensure(f, os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dirs.IPC, "router.sock"); b.socketPath(folder) != want || b.groupDir(folder) != dirs.Group {
		t.Fatalf("the test's paths %s, %s differ from the layout's %s, %s", b.socketPath(folder), b.groupDir(folder), want, dirs.Group)
	}
	run, err := b.st.CreateRun(b.ctx, store.Run{Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	s := b.start(t, folder, func(cfg *ipc.ServerConfig) { cfg.RunID = run.ID })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := b.runner.Run(ctx, runner.Turn{RunID: run.ID, Folder: f,
		Input: contract.Input{Messages: []contract.Message{{Role: "user", Content: message}}}})
	if err != nil {
		t.Fatalf("%s: Run(%q): %v", b.name, message, err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(s.SocketPath()); !os.IsNotExist(err) {
		t.Errorf("socket %s left after Stop: %v", s.SocketPath(), err)
	}
	if res.Output.Status != contract.StatusOK {
		t.Fatalf("%s: %s in %s: %+v", b.name, message, folder, res)
	}
	return res.Output.Result
}

// agentCall is what the example agent's `mcp TOOL ARGS` answers.
type agentCall struct {
	IsError bool   `json:"isError"`
	Text    string `json:"text"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (b *boxed) list(t *testing.T, folder string) []string {
	t.Helper()
	var got struct {
		Tools []string `json:"tools"`
	}
	if out := b.turn(t, folder, "mcp list"); json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("mcp list answered %s", out)
	}
	slices.Sort(got.Tools)
	return got.Tools
}

func (b *boxed) call(t *testing.T, folder, tool, args string) agentCall {
	t.Helper()
	var got agentCall
	if out := b.turn(t, folder, "mcp "+tool+" "+args); json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("mcp %s answered %s", tool, out)
	}
	return got
}

func (c agentCall) mustOK(t *testing.T, what string) {
	t.Helper()
	if c.IsError || c.Error != nil {
		t.Errorf("%s: %+v", what, c)
	}
}

func (c agentCall) mustDeny(t *testing.T, what, reason string) {
	t.Helper()
	if !c.IsError || !strings.Contains(c.Text, "denied: "+reason) {
		t.Errorf("%s: %+v, want denied: %s", what, c, reason)
	}
}

// TestMatrixFromContainer calls the tools from inside real containers, through the socket
// mounted at /var/run/pub/arizuko/, with the example agent's hand-written MCP client: at
// every tier the listing is the tier's tools, an allowed call does its work, a call above
// the tier is denied by it; narrowed grants hide and deny; send_document sends a file the
// agent wrote; an unknown tool is an error naming it. The full tool x tier x grant matrix
// runs in-process (TestToolMatrix); this is the same server on the real path.
func TestMatrixFromContainer(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			b := newBoxed(t, e)
			allowed := map[string][2]string{
				"main":       {"inject_message", `{"folder":"main/z","text":"wake up"}`},
				"main/a":     {"schedule_task", `{"prompt":"daily","schedule_kind":"cron","schedule":"0 9 * * *"}`},
				"main/a/b":   {"send_message", `{"chat_jid":"tg:5","text":"from b"}`},
				"main/a/b/c": {"send_reply", `{"text":"from c"}`},
			}
			for _, f := range tierFolders {
				if got, want := b.list(t, f), seedTools[tierOf(f)]; !slices.Equal(got, want) {
					t.Errorf("%s: tools = %v\nwant %v", f, got, want)
				}
				b.call(t, f, allowed[f][0], allowed[f][1]).mustOK(t, f+" "+allowed[f][0])
				if f != "main" {
					b.call(t, f, "spawn_group", `{"folder":"x","name":"x"}`).mustDeny(t, f+" spawn_group", "tier ")
				}
			}
			if msgs := inboxOf(t, b.env, "main/z", store.SourceInject); len(msgs) != 1 || msgs[0].Content != "wake up" || !slices.Contains(b.wakes(), "main/z") {
				t.Errorf("main/z inbox %+v, wakes %v", msgs, b.wakes())
			}
			if ts, _ := b.st.ListTasks(b.ctx, store.TaskFilter{Folder: "main/a"}); len(ts) != 1 || ts[0].Prompt != "daily" {
				t.Errorf("main/a tasks %+v", ts)
			}
			if it := outboxOf(t, b.env, "main/a/b", store.OutboxMessage); len(it) != 1 || it[0].Content != "from b" || it[0].RunID == "" {
				t.Errorf("main/a/b outbox %+v", it)
			}
			if it := outboxOf(t, b.env, "main/a/b/c", store.OutboxReply); len(it) != 1 || it[0].Content != "from c" || it[0].Target != "tg:42" {
				t.Errorf("main/a/b/c outbox %+v", it)
			}

			if err := b.st.SetGrants(b.ctx, "main/a", []string{"*", "!send_*"}); err != nil {
				t.Fatal(err)
			}
			want := slices.DeleteFunc(slices.Clone(seedTools[1]), func(n string) bool { return strings.HasPrefix(n, "send_") })
			if got := b.list(t, "main/a"); !slices.Equal(got, want) {
				t.Errorf("narrowed main/a: tools = %v\nwant %v", got, want)
			}
			b.call(t, "main/a", "send_message", `{"chat_jid":"tg:1","text":"x"}`).mustDeny(t, "narrowed send_message", "send_message denied by rule !send_*")

			b.turn(t, "main/a/b", "write out/report.txt the report")
			b.call(t, "main/a/b", "send_document", `{"chat_jid":"tg:9","path":"/workspace/out/report.txt"}`).mustOK(t, "send_document")
			if it := outboxOf(t, b.env, "main/a/b", store.OutboxDocument); len(it) != 1 || it[0].DocPath != "out/report.txt" || it[0].DocName != "report.txt" {
				t.Errorf("documents %+v", it)
			}

			if c := b.call(t, "main", "format_disk", `{}`); c.Error == nil || !strings.Contains(c.Error.Message, "format_disk") {
				t.Errorf("unknown tool: %+v", c)
			}

			// Two roots: neither's agent reaches into the other's tree, until the
			// operator grants it by name.
			before := b.dump(t)
			b.call(t, "other", "inject_message", `{"folder":"main/z","text":"from other"}`).mustDeny(t, "other into main/z", "inject_message acts only inside other's subtree")
			b.call(t, "main", "schedule_task", `{"prompt":"p","schedule_kind":"cron","schedule":"0 9 * * *","folder":"other/a"}`).mustDeny(t, "main for other/a", "schedule_task acts only inside main's subtree")
			b.call(t, "main", "spawn_group", `{"folder":"lab","name":"Lab"}`).mustDeny(t, "main makes a root", "spawn_group acts only inside main's subtree")
			b.unchanged(t, "cross-tree calls", before)
			if err := b.st.SetGrants(b.ctx, "other", []string{"*", "inject_message(folder=main/z)"}); err != nil {
				t.Fatal(err)
			}
			b.call(t, "other", "inject_message", `{"folder":"main/z","text":"granted"}`).mustOK(t, "granted other into main/z")
			if msgs := inboxOf(t, b.env, "main/z", store.SourceInject); len(msgs) != 2 || msgs[1].Content != "granted" || msgs[1].SenderJID != "inject:other" {
				t.Errorf("main/z inbox after the grant: %+v", msgs)
			}
		})
	}
}

// TestRouteCaptureFromContainer is TestRouteCapture with every tool call made by the
// example agent inside a container of the group, on the first rootful engine.
func TestRouteCaptureFromContainer(t *testing.T) {
	e := enginetest.Rootful(t)[0]
	b := newBoxed(t, e)
	runCapture(t, b.env, func(f string) caller { return boxCaller{b: b, folder: f} })
}

// boxCaller makes every list and call a turn of its own in a container of folder.
type boxCaller struct {
	b      *boxed
	folder string
}

func (c boxCaller) list(t *testing.T) []string { return c.b.list(t, c.folder) }

func (c boxCaller) call(t *testing.T, tool string, args map[string]any) callResult {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	got := c.b.call(t, c.folder, tool, string(raw))
	if got.Error != nil {
		t.Fatalf("%s: JSON-RPC error %d: %s", tool, got.Error.Code, got.Error.Message)
	}
	return callResult{isError: got.IsError, text: got.Text}
}

var fullContainerMatrix = flag.Bool("full-container-matrix", false, "run every grant scenario of TestMatrixCellsFromContainer (about 1300 turns)")

// TestMatrixCellsFromContainer is TestToolMatrix with every tools/list and tools/call made
// by the example agent inside a container of the group, one turn each, on the first rootful
// engine: every tool at every tier, on its own subtree and on the other tree, without grants
// and with cross-tree grants (8 cells of 41 turns), and on its own subtree with two narrowing
// rule sets (8 cells of 21 turns); -full-container-matrix runs all the scenarios on both
// trees, -short none.
func TestMatrixCellsFromContainer(t *testing.T) {
	enginetest.Long(t, "hundreds of container turns")
	e := enginetest.Rootful(t)[0]
	for _, f := range tierFolders {
		for _, sc := range scenarios {
			if !*fullContainerMatrix && !slices.Contains([]string{"default", "narrowed", "param-typo", "cross"}, sc.name) {
				continue
			}
			t.Run(e.Name+"/"+f+"/"+sc.name, func(t *testing.T) {
				b := newBoxed(t, e)
				if sc.rules != nil {
					if err := b.st.SetGrants(b.ctx, f, sc.rules); err != nil {
						t.Fatal(err)
					}
				}
				fx := b.fixture(t, f)
				otherTree := *fullContainerMatrix || sc.name == "default" || sc.crosses
				runMatrixCell(t, b.env, boxCaller{b: b, folder: f}, f, sc, fx, otherTree)
			})
		}
	}
}
