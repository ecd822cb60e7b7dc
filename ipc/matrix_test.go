package ipc_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/arizuko/arizukod/ipc/policy"
	"github.com/arizuko/arizukod/store"
)

// scenario is a group's grant rules and, independent of the tier, the
// tools they let it call.
type scenario struct {
	name    string
	rules   []string // nil: never set
	allows  func(tool string) bool
	refusal string // in the reason of a call the rules deny
	crosses bool   // the rules reach into the other tree (crossRules)
}

// crossRules are an operator's grants into the other tree: each tool with a
// folder argument may act on the folders whose names start with other ("**"
// crosses '/' in a folder glob).
var crossRules = []string{"*", "inject_message(folder=other**)", "register_group(folder=other**)",
	"spawn_group(folder=other**)", "schedule_task(folder=other**)", "add_route(target=other**)"}

func anyTool(string) bool { return true }
func noTool(string) bool  { return false }
func oneOf(tools ...string) func(string) bool {
	return func(t string) bool { return slices.Contains(tools, t) }
}
func allBut(tools ...string) func(string) bool {
	return func(t string) bool { return !slices.Contains(tools, t) }
}

var scenarios = []scenario{
	{name: "default", rules: nil, allows: anyTool},
	{name: "set-to-none", rules: []string{}, allows: noTool, refusal: "no grant rule allows"},
	{name: "locked", rules: []string{"!*"}, allows: noTool, refusal: "denied by rule !*"},
	{name: "sends-only", rules: []string{"send_*"}, allows: oneOf("send_message", "send_reply", "send_document"), refusal: "no grant rule allows"},
	{name: "narrowed", rules: []string{"*", "!send_message", "!*_task", "!delete_route"},
		allows: allBut("send_message", "schedule_task", "get_task", "update_task", "cancel_task", "delete_route"), refusal: "denied by rule !"},
	{name: "param-typo", rules: []string{"*", "!send_message(chat=tg:*)"}, allows: allBut("send_message"),
		refusal: "grant rule !send_message(chat=tg:*) names parameter chat, which send_message does not have"},
	{name: "unparsable", rules: []string{"send_message(("}, allows: noTool, refusal: "do not parse"},
	{name: "cross", rules: crossRules, allows: anyTool, crosses: true},
}

// fixture is what the calls of one matrix cell act on: for f, and the same
// in the other tree (mirror(f)), which the calls must not reach.
type fixture struct {
	taskGet, taskUpdate, taskCancel    string
	otherGet, otherUpdate, otherCancel string
	routeDel                           int64 // f's own route to itself
	routeOp                            int64 // the operator's route to f
	routeOther                         int64 // mirror(f)'s own route to itself
}

func (e *env) fixture(t *testing.T, f string) fixture {
	t.Helper()
	var fx fixture
	for _, task := range []struct {
		id     *string
		folder string
	}{{&fx.taskGet, f}, {&fx.taskUpdate, f}, {&fx.taskCancel, f}, {&fx.otherGet, mirror(f)}, {&fx.otherUpdate, mirror(f)}, {&fx.otherCancel, mirror(f)}} {
		made, err := e.st.CreateTask(e.ctx, store.Task{Folder: task.folder, Prompt: "standing", ScheduleKind: store.ScheduleCron,
			ScheduleExpr: "0 * * * *", NextRunAt: fixedNow.Add(time.Hour).UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		*task.id = made.ID
	}
	for _, r := range []struct {
		id            *int64
		target, owner string
	}{{&fx.routeDel, f, f}, {&fx.routeOp, f, ""}, {&fx.routeOther, mirror(f), mirror(f)}} {
		route, err := e.st.AddRoute(e.ctx, store.Route{Seq: 100, Match: "room=x", Target: r.target, Owner: r.owner})
		if err != nil {
			t.Fatal(err)
		}
		*r.id = route.ID
	}
	for _, g := range []string{f, mirror(f)} {
		if err := e.st.SetSession(e.ctx, g, "sess-1"); err != nil {
			t.Fatal(err)
		}
		doc := filepath.Join(e.groupDir(g), "out", "doc.txt")
		if err := os.MkdirAll(filepath.Dir(doc), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(doc, []byte("document"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return fx
}

// child is the next folder of the matrix below f.
func child(f string) string {
	next := map[string]string{"main": "main/a", "main/a": "main/a/b", "main/a/b": "main/a/b/c", "main/a/b/c": "main/a/b/c/d"}
	return next[f]
}

func tierOf(f string) int { return min(strings.Count(f, "/"), 3) }

// sees is the visibility rule written out: every tier its own subtree.
func sees(viewer, folder string) bool {
	return folder == viewer || strings.HasPrefix(folder, viewer+"/")
}

// toolCase calls one tool in a matrix cell and checks its effect in the
// store: present when the call was allowed, absent when it was denied. Then
// it makes the same tool's attempt on the other tree.
type toolCase struct {
	tool  string
	args  func(f string, fx fixture) map[string]any
	check func(t *testing.T, e *env, f string, fx fixture, allowed bool, res map[string]any)
	// fails is the error an allowed call gets for folder f, "" for none.
	fails func(f string) string

	// other is the attempt on the other tree, mirror(f); nil for a listing,
	// whose attempt is the call itself and succeeds without showing
	// anything of the other tree (otherCheck).
	other func(f string, fx fixture) map[string]any
	// refusal is the error of the attempt once the tier and the rules let
	// it through to the tool; early when the arguments are refused, before
	// the rules are consulted.
	refusal string
	early   bool
	// crosses: crossRules let the attempt through; otherCheck then finds
	// its effect in the other tree.
	crosses    bool
	otherCheck func(t *testing.T, e *env, f string, fx fixture, res map[string]any)
}

// withFolder is args with a folder argument the tool does not have: an
// attempt to point a tool without one at the other tree.
func withFolder(args map[string]any, folder string) map[string]any {
	out := map[string]any{"folder": folder}
	for k, v := range args {
		out[k] = v
	}
	return out
}

const noSuchFolder = "bad argument folder: no such parameter"

// outsideRefusal is how a tool refuses a folder outside the caller's subtree.
const outsideRefusal = "denied: "

// hidesOther fails when a listing shows anything of the other tree.
func hidesOther(key, field string) func(t *testing.T, e *env, f string, fx fixture, res map[string]any) {
	return func(t *testing.T, _ *env, f string, fx fixture, res map[string]any) {
		for _, it := range res[key].([]any) {
			v := fmt.Sprint(it.(map[string]any)[field])
			if strings.HasPrefix(v, "other") || v == fx.otherGet || v == fx.otherUpdate || v == fx.otherCancel ||
				v == fmt.Sprint(fx.routeOther) {
				t.Errorf("%s of %s shows %s %s of the other tree", key, f, field, v)
			}
		}
	}
}

func outboxOf(t *testing.T, e *env, f string, kind store.OutboxKind) []store.OutboxItem {
	t.Helper()
	items, err := e.st.ListOutbox(e.ctx, f, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.OutboxItem
	for _, it := range items {
		if it.Kind == kind {
			out = append(out, it)
		}
	}
	return out
}

func inboxOf(t *testing.T, e *env, f string, source store.Source) []store.InboxMessage {
	t.Helper()
	msgs, err := e.st.PendingInbox(e.ctx, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.InboxMessage
	for _, m := range msgs {
		if m.Source == source {
			out = append(out, m)
		}
	}
	return out
}

func taskOf(t *testing.T, e *env, id string) *store.Task {
	t.Helper()
	task, err := e.st.GetTask(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func groupExists(t *testing.T, e *env, f string) bool {
	t.Helper()
	_, err := e.st.GetGroup(e.ctx, f)
	if err != nil && !isNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func routeExists(t *testing.T, e *env, id int64) bool {
	t.Helper()
	_, err := e.st.GetRoute(e.ctx, id)
	if err != nil && !isNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func folders(v any) []string {
	var out []string
	for _, it := range v.([]any) {
		out = append(out, it.(map[string]any)["folder"].(string))
	}
	slices.Sort(out)
	return out
}

func ids(v any, key string) []any {
	var out []any
	for _, it := range v.([]any) {
		out = append(out, it.(map[string]any)[key])
	}
	return out
}

func expectEq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func checkGroups(t *testing.T, e *env, f string, allowed bool, res map[string]any) {
	if !allowed {
		return
	}
	all, err := e.st.ListGroups(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, g := range all {
		if sees(f, g.Folder) {
			want = append(want, g.Folder)
		}
	}
	slices.Sort(want)
	if got := folders(res["groups"]); !slices.Equal(got, want) {
		t.Errorf("groups of %s = %v, want %v", f, got, want)
	}
}

// toolCases are in the order the matrix calls them: reads before the
// writes that change what they read, delete_route before set_routes.
var toolCases = []toolCase{
	{
		tool: "send_message",
		other: func(f string, _ fixture) map[string]any {
			return withFolder(map[string]any{"chat_jid": "tg:1", "text": "hello"}, mirror(f))
		},
		refusal: noSuchFolder, early: true,
		args: func(string, fixture) map[string]any { return map[string]any{"chat_jid": "tg:1", "text": "hello"} },
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, _ map[string]any) {
			items := outboxOf(t, e, f, store.OutboxMessage)
			if !allowed {
				expectEq(t, "messages", len(items), 0)
				return
			}
			if len(items) != 1 || items[0].Target != "tg:1" || items[0].Content != "hello" {
				t.Fatalf("outbox messages = %+v", items)
			}
			if _, err := e.st.GetRun(e.ctx, items[0].RunID); err != nil {
				t.Errorf("the message's run %q: %v", items[0].RunID, err)
			}
		},
	},
	{
		tool: "send_reply",
		other: func(f string, _ fixture) map[string]any {
			return withFolder(map[string]any{"text": "answer"}, mirror(f))
		},
		refusal: noSuchFolder, early: true,
		args: func(string, fixture) map[string]any { return map[string]any{"text": "answer"} },
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, _ map[string]any) {
			items := outboxOf(t, e, f, store.OutboxReply)
			if !allowed {
				expectEq(t, "replies", len(items), 0)
				return
			}
			if len(items) != 1 || items[0].Target != "tg:42" || items[0].Content != "answer" {
				t.Errorf("outbox replies = %+v", items)
			}
		},
	},
	{
		tool: "send_document",
		other: func(f string, _ fixture) map[string]any {
			return map[string]any{"chat_jid": "tg:1", "path": "../" + mirror(f) + "/out/doc.txt"}
		},
		refusal: "must not contain '..'", early: true,
		args: func(string, fixture) map[string]any {
			return map[string]any{"chat_jid": "tg:1", "path": "/workspace/out/doc.txt"}
		},
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, _ map[string]any) {
			items := outboxOf(t, e, f, store.OutboxDocument)
			if !allowed {
				expectEq(t, "documents", len(items), 0)
				return
			}
			if len(items) != 1 || items[0].DocPath != "out/doc.txt" || items[0].DocName != "doc.txt" || items[0].Target != "tg:1" {
				t.Errorf("outbox documents = %+v", items)
			}
		},
	},
	{
		tool:       "get_groups",
		otherCheck: hidesOther("groups", "folder"),
		args:       func(string, fixture) map[string]any { return nil },
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, res map[string]any) {
			checkGroups(t, e, f, allowed, res)
		},
	},
	{
		tool:       "refresh_groups",
		otherCheck: hidesOther("groups", "folder"),
		args:       func(string, fixture) map[string]any { return map[string]any{} },
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, res map[string]any) {
			checkGroups(t, e, f, allowed, res)
		},
	},
	{
		tool:    "get_task",
		other:   func(_ string, fx fixture) map[string]any { return map[string]any{"id": fx.otherGet} },
		refusal: "not found",
		args:    func(_ string, fx fixture) map[string]any { return map[string]any{"id": fx.taskGet} },
		check: func(t *testing.T, _ *env, _ string, fx fixture, allowed bool, res map[string]any) {
			if allowed {
				expectEq(t, "task id", res["id"], any(fx.taskGet))
			}
		},
	},
	{
		tool:       "list_tasks",
		otherCheck: hidesOther("tasks", "id"),
		args:       func(string, fixture) map[string]any { return nil },
		check: func(t *testing.T, _ *env, _ string, fx fixture, allowed bool, res map[string]any) {
			if !allowed {
				return
			}
			got := ids(res["tasks"], "id")
			for _, id := range []string{fx.taskGet, fx.taskUpdate, fx.taskCancel} {
				if !slices.Contains(got, any(id)) {
					t.Errorf("list_tasks %v lacks %s", got, id)
				}
			}
		},
	},
	{
		tool:       "list_routes",
		otherCheck: hidesOther("routes", "id"),
		args:       func(string, fixture) map[string]any { return nil },
		check: func(t *testing.T, _ *env, f string, fx fixture, allowed bool, res map[string]any) {
			if !allowed {
				return
			}
			got := ids(res["routes"], "id")
			for _, id := range []int64{fx.routeDel, fx.routeOp} {
				if !slices.Contains(got, any(float64(id))) {
					t.Errorf("list_routes of %s %v lacks route %d into it", f, got, id)
				}
			}
		},
	},
	{
		tool:    "clear_session",
		other:   func(f string, _ fixture) map[string]any { return withFolder(nil, mirror(f)) },
		refusal: noSuchFolder, early: true,
		args: func(string, fixture) map[string]any { return nil },
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, _ map[string]any) {
			sess, err := e.st.GetSession(e.ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			want := "sess-1"
			if allowed {
				want = ""
			}
			expectEq(t, "session", sess, want)
		},
	},
	{
		tool: "inject_message",
		other: func(f string, _ fixture) map[string]any {
			return map[string]any{"folder": mirror(f), "text": "across"}
		},
		refusal: outsideRefusal + "inject_message acts only inside", crosses: true,
		otherCheck: func(t *testing.T, e *env, f string, _ fixture, _ map[string]any) {
			msgs := inboxOf(t, e, mirror(f), store.SourceInject)
			if len(msgs) != 1 || msgs[0].Content != "across" || msgs[0].SenderJID != "inject:"+f {
				t.Errorf("granted inject: inbox of %s = %+v", mirror(f), msgs)
			}
		},
		args: func(f string, _ fixture) map[string]any { return map[string]any{"folder": f, "text": "injected"} },
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, _ map[string]any) {
			msgs := inboxOf(t, e, f, store.SourceInject)
			if !allowed {
				expectEq(t, "injected", len(msgs), 0)
				return
			}
			if len(msgs) != 1 || msgs[0].Content != "injected" || msgs[0].SenderJID != "inject:"+f || !slices.Contains(e.wakes(), f) {
				t.Errorf("inbox = %+v, wakes %v", msgs, e.wakes())
			}
		},
	},
	{
		tool: "register_group",
		other: func(f string, _ fixture) map[string]any {
			return map[string]any{"folder": mirror(f) + "/newg", "name": "New"}
		},
		refusal: outsideRefusal + "register_group acts only inside", crosses: true,
		otherCheck: func(t *testing.T, e *env, f string, _ fixture, _ map[string]any) {
			expectEq(t, "granted register "+mirror(f)+"/newg", groupExists(t, e, mirror(f)+"/newg"), true)
		},
		args: func(f string, _ fixture) map[string]any {
			return map[string]any{"folder": f + "/newg", "name": "New", "description": "made by a test"}
		},
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, _ map[string]any) {
			expectEq(t, "registered "+f+"/newg", groupExists(t, e, f+"/newg"), allowed)
		},
	},
	{
		tool: "spawn_group",
		other: func(f string, _ fixture) map[string]any {
			return map[string]any{"folder": mirror(f) + "/spawned", "name": "Spawned", "prompt": "start there"}
		},
		refusal: outsideRefusal + "spawn_group acts only inside", crosses: true,
		otherCheck: func(t *testing.T, e *env, f string, _ fixture, _ map[string]any) {
			msgs := inboxOf(t, e, mirror(f)+"/spawned", store.SourceInject)
			if !groupExists(t, e, mirror(f)+"/spawned") || len(msgs) != 1 || msgs[0].SenderJID != "spawn:"+f {
				t.Errorf("granted spawn: inbox %+v", msgs)
			}
		},
		args: func(f string, _ fixture) map[string]any {
			return map[string]any{"folder": f + "/spawned", "name": "Spawned", "prompt": "start here"}
		},
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, _ map[string]any) {
			expectEq(t, "spawned exists", groupExists(t, e, f+"/spawned"), allowed)
			if allowed {
				msgs := inboxOf(t, e, f+"/spawned", store.SourceInject)
				if len(msgs) != 1 || msgs[0].Content != "start here" || msgs[0].SenderJID != "spawn:"+f {
					t.Errorf("spawned inbox = %+v", msgs)
				}
			}
		},
	},
	{
		tool: "delegate_to_child",
		other: func(f string, _ fixture) map[string]any {
			return map[string]any{"child": mirror(child(f)), "text": "do this"}
		},
		refusal: "is not a direct child of",
		args: func(f string, _ fixture) map[string]any {
			return map[string]any{"child": child(f)[len(f)+1:], "text": "do this"}
		},
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, _ map[string]any) {
			msgs := inboxOf(t, e, child(f), store.SourceDelegate)
			if !allowed {
				expectEq(t, "delegated", len(msgs), 0)
				return
			}
			if len(msgs) != 1 || msgs[0].SenderJID != "delegate:"+f || msgs[0].Content != "do this" || !slices.Contains(e.wakes(), child(f)) {
				t.Errorf("child inbox = %+v", msgs)
			}
		},
	},
	{
		tool: "delegate_to_parent",
		other: func(f string, _ fixture) map[string]any {
			return withFolder(map[string]any{"text": "done"}, mirror(f))
		},
		refusal: noSuchFolder, early: true,
		args: func(string, fixture) map[string]any { return map[string]any{"text": "done"} },
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, _ map[string]any) {
			parent, ok := policy.Parent(f)
			if !ok {
				return
			}
			msgs := inboxOf(t, e, parent, store.SourceDelegate)
			if !allowed {
				expectEq(t, "delegated up", len(msgs), 0)
				return
			}
			if len(msgs) != 1 || msgs[0].SenderJID != "delegate:"+f || msgs[0].Content != "done" {
				t.Errorf("parent inbox = %+v", msgs)
			}
		},
		fails: func(f string) string {
			if f == "main" {
				return "main is a root group: it has no parent"
			}
			return ""
		},
	},
	{
		tool: "schedule_task",
		other: func(f string, _ fixture) map[string]any {
			return map[string]any{"prompt": "across", "schedule_kind": "cron", "schedule": "30 9 * * *", "folder": mirror(f)}
		},
		refusal: outsideRefusal + "schedule_task acts only inside", crosses: true,
		otherCheck: func(t *testing.T, e *env, f string, _ fixture, _ map[string]any) {
			ts, err := e.st.ListTasks(e.ctx, store.TaskFilter{Folder: mirror(f)})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(ts, func(task store.Task) bool { return task.Prompt == "across" }) {
				t.Errorf("granted schedule: tasks of %s = %+v", mirror(f), ts)
			}
		},
		args: func(string, fixture) map[string]any {
			return map[string]any{"prompt": "scheduled", "schedule_kind": "cron", "schedule": "30 9 * * *"}
		},
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, _ map[string]any) {
			ts, err := e.st.ListTasks(e.ctx, store.TaskFilter{Folder: f})
			if err != nil {
				t.Fatal(err)
			}
			var made []store.Task
			for _, task := range ts {
				if task.Prompt == "scheduled" {
					made = append(made, task)
				}
			}
			if !allowed {
				expectEq(t, "scheduled", len(made), 0)
				return
			}
			want := time.Date(2030, 1, 2, 9, 30, 0, 0, time.UTC).UnixMilli()
			if len(made) != 1 || made[0].ScheduleExpr != "30 9 * * *" || made[0].NextRunAt != want || made[0].State != store.TaskActive {
				t.Errorf("scheduled tasks = %+v", made)
			}
		},
	},
	{
		tool: "update_task",
		other: func(_ string, fx fixture) map[string]any {
			return map[string]any{"id": fx.otherUpdate, "state": "paused"}
		},
		refusal: "not found",
		args: func(_ string, fx fixture) map[string]any {
			return map[string]any{"id": fx.taskUpdate, "state": "paused"}
		},
		check: func(t *testing.T, e *env, _ string, fx fixture, allowed bool, _ map[string]any) {
			want := store.TaskActive
			if allowed {
				want = store.TaskPaused
			}
			expectEq(t, "updated state", taskOf(t, e, fx.taskUpdate).State, want)
		},
	},
	{
		tool:    "cancel_task",
		other:   func(_ string, fx fixture) map[string]any { return map[string]any{"id": fx.otherCancel} },
		refusal: "not found",
		args:    func(_ string, fx fixture) map[string]any { return map[string]any{"id": fx.taskCancel} },
		check: func(t *testing.T, e *env, _ string, fx fixture, allowed bool, _ map[string]any) {
			want := store.TaskActive
			if allowed {
				want = store.TaskCompleted
			}
			expectEq(t, "cancelled state", taskOf(t, e, fx.taskCancel).State, want)
		},
	},
	{
		tool: "add_route",
		other: func(f string, _ fixture) map[string]any {
			return map[string]any{"seq": -1000000, "match": "", "target": mirror(f)}
		},
		refusal: outsideRefusal + "add_route acts only inside", crosses: true,
		otherCheck: func(t *testing.T, e *env, f string, _ fixture, res map[string]any) {
			r, err := e.st.GetRoute(e.ctx, int64(res["id"].(float64)))
			if err != nil || r.Owner != f || r.Target != mirror(f) || r.Seq != -1000000 {
				t.Errorf("granted route = %+v, %v", r, err)
			}
		},
		args: func(f string, _ fixture) map[string]any {
			return map[string]any{"seq": 5, "match": "verb=mention   platform=\"telegram\"", "target": f}
		},
		check: func(t *testing.T, e *env, f string, _ fixture, allowed bool, res map[string]any) {
			if !allowed {
				return
			}
			r, err := e.st.GetRoute(e.ctx, int64(res["id"].(float64)))
			if err != nil {
				t.Fatal(err)
			}
			if r.Seq != 5 || r.Match != "platform=telegram verb=mention" || r.Target != f {
				t.Errorf("added route = %+v", r)
			}
		},
	},
	{
		tool:    "delete_route",
		other:   func(_ string, fx fixture) map[string]any { return map[string]any{"id": fx.routeOther} },
		refusal: "not found",
		args:    func(_ string, fx fixture) map[string]any { return map[string]any{"id": fx.routeDel} },
		check: func(t *testing.T, e *env, _ string, fx fixture, allowed bool, _ map[string]any) {
			expectEq(t, "deleted route exists", routeExists(t, e, fx.routeDel), !allowed)
		},
	},
	{
		tool: "set_routes",
		other: func(f string, _ fixture) map[string]any {
			return map[string]any{"routes": []any{map[string]any{"seq": -1000000, "match": "", "target": mirror(f)}}}
		},
		refusal: outsideRefusal + "set_routes sets routes to",
		args: func(f string, _ fixture) map[string]any {
			return map[string]any{"routes": []any{map[string]any{"seq": 10, "match": "room=1", "target": f}}}
		},
		check: func(t *testing.T, e *env, f string, fx fixture, allowed bool, _ map[string]any) {
			if !allowed {
				return
			}
			all, err := e.st.ListRoutes(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			var own []store.Route
			for _, r := range all {
				if r.Owner == f && sees(f, r.Target) {
					own = append(own, r)
				}
			}
			if len(own) != 1 || own[0].Match != "room=1" || own[0].Seq != 10 || own[0].Target != f {
				t.Errorf("routes of %s = %+v", f, own)
			}
			for _, id := range []int64{fx.routeOp, fx.routeOther} {
				if !routeExists(t, e, id) {
					t.Errorf("set_routes of %s removed route %d, which it does not own", f, id)
				}
			}
		},
	},
}

// TestToolMatrix calls every tool at every tier under every grant scenario
// through the real socket with mcp-go's client: tools/list lists exactly the
// tools the tier and rules allow, each of them is callable and does its work
// in the store, and every other tool is denied with the reason.
func TestToolMatrix(t *testing.T) {
	if len(toolCases) != len(policy.Tools()) {
		t.Fatalf("%d tool cases for %d tools", len(toolCases), len(policy.Tools()))
	}
	for _, f := range tierFolders {
		for _, sc := range scenarios {
			t.Run(f+"/"+sc.name, func(t *testing.T) {
				e := newEnv(t)
				if sc.rules != nil {
					if err := e.st.SetGrants(e.ctx, f, sc.rules); err != nil {
						t.Fatal(err)
					}
				}
				fx := e.fixture(t, f)
				s := e.start(t, f, nil)
				runMatrixCell(t, e, mcpCaller{dial(t, s.SocketPath())}, f, sc, fx, true)
			})
		}
	}
}

func expectedTools(f string, sc scenario) []string {
	var want []string
	for _, tool := range seedTools[tierOf(f)] {
		if sc.allows(tool) {
			want = append(want, tool)
		}
	}
	return want
}

// caller is a client of a group's MCP server in the matrix.
type caller interface {
	list(t *testing.T) []string
	call(t *testing.T, tool string, args map[string]any) callResult
}

// mcpCaller is mcp-go's client on one connection.
type mcpCaller struct{ c *client.Client }

func (m mcpCaller) list(t *testing.T) []string { return listTools(t, m.c) }

func (m mcpCaller) call(t *testing.T, tool string, args map[string]any) callResult {
	return call(t, m.c, tool, args)
}

// runMatrixCell calls every tool in folder f under scenario sc on f's own
// subtree and, with otherTree, again on the other tree (toolCase.other). An
// allowed call must do its work; a refused one must say why and leave the
// store as it was, row for row.
func runMatrixCell(t *testing.T, e *env, c caller, f string, sc scenario, fx fixture, otherTree bool) {
	want := expectedTools(f, sc)
	if got := c.list(t); !slices.Equal(got, want) {
		t.Errorf("tools/list = %v\nwant         %v", got, want)
	}
	for _, tc := range toolCases {
		byTier := !slices.Contains(seedTools[tierOf(f)], tc.tool)
		allowed := slices.Contains(want, tc.tool)
		before := e.dump(t)
		r := c.call(t, tc.tool, tc.args(f, fx))
		switch {
		case byTier:
			mustFail(t, tc.tool, r, "denied: ", "may not call "+tc.tool)
		case !allowed:
			mustFail(t, tc.tool, r, "denied: ", sc.refusal)
		case tc.fails != nil && tc.fails(f) != "":
			mustFail(t, tc.tool, r, tc.fails(f))
			e.unchanged(t, tc.tool, before)
		default:
			res := mustOK(t, tc.tool, r)
			tc.check(t, e, f, fx, true, res)
		}
		if byTier || !allowed {
			tc.check(t, e, f, fx, false, nil)
			e.unchanged(t, tc.tool, before)
		}
		if otherTree {
			runOtherTree(t, e, c, f, sc, fx, tc, byTier, allowed)
		}
	}
}

// runOtherTree makes tc's attempt on the other tree from f.
func runOtherTree(t *testing.T, e *env, c caller, f string, sc scenario, fx fixture, tc toolCase, byTier, allowed bool) {
	what := tc.tool + " on the other tree"
	args := tc.args(f, fx)
	if tc.other != nil {
		args = tc.other(f, fx)
	}
	before := e.dump(t)
	r := c.call(t, tc.tool, args)
	switch {
	case byTier:
		mustFail(t, what, r, "denied: ", "may not call "+tc.tool)
	case tc.early:
		mustFail(t, what, r, tc.refusal)
	case !allowed:
		mustFail(t, what, r, "denied: ", sc.refusal)
	case tc.other == nil:
		tc.otherCheck(t, e, f, fx, mustOK(t, what, r))
	case tc.crosses && sc.crosses:
		tc.otherCheck(t, e, f, fx, mustOK(t, what+" (granted)", r))
		return
	default:
		mustFail(t, what, r, tc.refusal)
	}
	e.unchanged(t, what, before)
}
