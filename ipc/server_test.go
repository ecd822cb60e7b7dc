package ipc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/arizuko/arizukod/ipc"
	"github.com/arizuko/arizukod/ipc/policy"
	"github.com/arizuko/arizukod/store"
)

// TestGrantChangesApplyLive changes a group's rules while a client stays
// connected: the next tools/list and tools/call see the new rules.
func TestGrantChangesApplyLive(t *testing.T) {
	e := newEnv(t)
	s := e.start(t, "main/a", nil)
	c := dial(t, s.SocketPath())
	msg := map[string]any{"chat_jid": "tg:1", "text": "hi"}
	mustOK(t, "before", call(t, c, "send_message", msg))
	if err := e.st.SetGrants(e.ctx, "main/a", []string{"*", "!send_message"}); err != nil {
		t.Fatal(err)
	}
	mustFail(t, "after", call(t, c, "send_message", msg), "denied: send_message denied by rule !send_message")
	if slices.Contains(listTools(t, c), "send_message") {
		t.Error("send_message still listed after it was denied")
	}
	if err := e.st.ClearGrants(e.ctx, "main/a"); err != nil {
		t.Fatal(err)
	}
	mustOK(t, "cleared", call(t, c, "send_message", msg))
	if !slices.Contains(listTools(t, c), "send_message") {
		t.Error("send_message not listed after the rules were cleared")
	}
}

// TestParamRules narrows tools by their parameters; the rules see the
// arguments after defaults are filled in.
func TestParamRules(t *testing.T) {
	e := newEnv(t)
	rules := []string{
		"*",
		"!send_reply(chat_jid=tg:*)",
		"!schedule_task",
		"schedule_task(schedule_kind=cron)",
		"!schedule_task(folder=main/a/b*)",
		"!delegate_to_child(child=main/a/b)",
		"!send_document(path=secret/*)",
		"!add_route(seq=[0-9])",
	}
	if err := e.st.SetGrants(e.ctx, "main/a", rules); err != nil {
		t.Fatal(err)
	}
	s := e.start(t, "main/a", nil)
	c := dial(t, s.SocketPath())
	for _, dir := range []string{"secret", "public"} {
		p := filepath.Join(e.groupDir("main/a"), dir, "f.txt")
		os.MkdirAll(filepath.Dir(p), 0o700)
		os.WriteFile(p, []byte("x"), 0o600)
	}
	tests := []struct {
		tool string
		args map[string]any
		deny string // "" when allowed
	}{
		{"send_reply", map[string]any{"text": "x"}, "denied by rule !send_reply(chat_jid=tg:*)"}, // ReplyTo tg:42
		{"send_reply", map[string]any{"text": "x", "chat_jid": "wa:1"}, ""},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_kind": "cron", "schedule": "0 9 * * *"}, ""},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_kind": "interval", "schedule": "1h"}, "denied by rule !schedule_task"},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_kind": "cron", "schedule": "0 9 * * *", "folder": "main/a/b"}, "denied by rule !schedule_task(folder=main/a/b*)"},
		{"delegate_to_child", map[string]any{"child": "b", "text": "x"}, "denied by rule !delegate_to_child(child=main/a/b)"},
		{"delegate_to_child", map[string]any{"child": "main/a/b", "text": "x"}, "denied by rule !delegate_to_child(child=main/a/b)"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "/workspace/secret/f.txt"}, "denied by rule !send_document(path=secret/*)"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "./secret//f.txt"}, "denied by rule !send_document(path=secret/*)"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "public/f.txt"}, ""},
		{"add_route", map[string]any{"seq": 5, "match": "", "target": "main/a"}, "denied by rule !add_route(seq=[0-9])"},
		{"add_route", map[string]any{"seq": "7", "match": "", "target": "main/a"}, "denied by rule !add_route(seq=[0-9])"},
		{"add_route", map[string]any{"seq": 50, "match": "", "target": "main/a"}, ""},
	}
	for _, tt := range tests {
		r := call(t, c, tt.tool, tt.args)
		what := fmt.Sprintf("%s %v", tt.tool, tt.args)
		if tt.deny == "" {
			mustOK(t, what, r)
		} else {
			mustFail(t, what, r, "denied: "+tt.tool+" "+tt.deny)
		}
	}
}

// TestBadArguments: a bad argument is a tool error that names it, before
// the rules or the store see it.
func TestBadArguments(t *testing.T) {
	e := newEnv(t)
	gd := e.groupDir("main")
	os.MkdirAll(filepath.Join(gd, "dir"), 0o700)
	os.Symlink("/etc/passwd", filepath.Join(gd, "passwd"))
	os.Symlink("/etc", filepath.Join(gd, "etc"))
	os.WriteFile(filepath.Join(gd, "ok.txt"), []byte("x"), 0o600)
	os.Symlink("ok.txt", filepath.Join(gd, "link.txt"))
	s := e.start(t, "main", nil)
	c := dial(t, s.SocketPath())
	long := strings.Repeat("x", ipc.MaxTextBytes+1)
	routes := func(items ...any) map[string]any { return map[string]any{"routes": items} }
	tests := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"send_message", map[string]any{"text": "x"}, "bad argument chat_jid: required"},
		{"send_message", map[string]any{"chat_jid": "tg:1", "text": 5}, "bad argument text: must be a string, not a number"},
		{"send_message", map[string]any{"chat_jid": "tg:1", "text": ""}, "bad argument text: must not be empty"},
		{"send_message", map[string]any{"chat_jid": "tg:1", "text": long}, "bad argument text: is 65537 bytes, at most 65536 allowed"},
		{"send_message", map[string]any{"chat_jid": "tg:1", "text": "a\x00b"}, "bad argument text: must not contain NUL bytes"},
		{"send_message", map[string]any{"chat_jid": "tg:1", "text": "x", "chat": "y"}, "bad argument chat: no such parameter (parameters: chat_jid, text)"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "../groups/other/x"}, "bad argument path: ../groups/other/x must not contain '..'"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "/etc/passwd"}, "bad argument path: /etc/passwd is not under /workspace"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "/workspace"}, "bad argument path: /workspace is not under /workspace"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "/workspace/."}, "names /workspace itself"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "missing.txt"}, "bad argument path: /workspace/missing.txt does not exist"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "dir"}, "bad argument path: /workspace/dir is not a regular file"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "passwd"}, "bad argument path: /workspace/passwd is not a regular file"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "link.txt"}, "bad argument path: /workspace/link.txt is not a regular file"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "etc/passwd"}, "bad argument path: /workspace/etc/passwd is or passes through a symlink"},
		{"send_document", map[string]any{"chat_jid": "tg:1", "path": "ok.txt", "name": "a/b"}, "bad argument name: must be a file name"},
		{"inject_message", map[string]any{"folder": "Main", "text": "x"}, "bad argument folder: invalid group folder \"Main\""},
		{"inject_message", map[string]any{"folder": "main/nobody", "text": "x"}, "bad argument folder: group main/nobody is not registered"},
		{"inject_message", map[string]any{"folder": "nobody", "text": "x"}, "denied: inject_message acts only inside main's subtree"},
		{"register_group", map[string]any{"folder": "main/a", "name": "x"}, "bad argument folder: group main/a is already registered"},
		{"register_group", map[string]any{"folder": "main/q/r", "name": "x"}, "bad argument folder: the parent group main/q is not registered"},
		{"register_group", map[string]any{"folder": "main/media", "name": "x"}, "reserved"},
		{"delegate_to_child", map[string]any{"child": "main/a/b", "text": "x"}, "bad argument child: main/a/b is not a direct child of main"},
		{"delegate_to_child", map[string]any{"child": "q", "text": "x"}, "bad argument child: group main/q is not registered"},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_kind": "weekly", "schedule": "x"}, "bad argument schedule_kind: \"weekly\" is not one of cron, interval, once"},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_kind": "cron", "schedule": "61 * * * *"}, "bad argument schedule: "},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_kind": "interval", "schedule": "5s"}, "bad argument schedule: interval of 5000 ms is shorter than the minimum 10s"},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_kind": "interval", "schedule": "-1h"}, "bad argument schedule: interval -1h0m0s is not positive"},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_kind": "interval", "schedule": "soon"}, "bad argument schedule: \"soon\" is neither a duration"},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_kind": "once", "schedule": "tomorrow"}, "bad argument schedule: \"tomorrow\" is not an RFC 3339 time"},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_kind": "once", "schedule": "2029-01-01T00:00:00Z"}, "which is not in the future"},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_kind": "cron", "schedule": "0 9 * * *", "folder": "main/gone"}, "bad argument folder: group main/gone is not registered"},
		{"get_task", map[string]any{"id": "t_nope"}, "bad argument id: task t_nope not found"},
		{"update_task", map[string]any{"id": "t_nope", "state": "paused"}, "bad argument id: task t_nope not found"},
		{"update_task", map[string]any{"id": "t_x", "state": "completed"}, "bad argument state: \"completed\" is not one of active, paused"},
		{"list_tasks", map[string]any{"state": "done"}, "bad argument state"},
		{"add_route", map[string]any{"seq": 1.5, "match": "", "target": "main"}, "bad argument seq: 1.5 is not an integer"},
		{"add_route", map[string]any{"seq": 1, "match": "room = 5", "target": "main"}, "bad argument match: route match \"room = 5\": column 5"},
		{"add_route", map[string]any{"seq": 1, "match": "channel=x", "target": "main"}, "unknown key \"channel\""},
		{"add_route", map[string]any{"seq": 1, "match": "", "target": "main/nobody"}, "bad argument target: group main/nobody is not registered"},
		{"delete_route", map[string]any{"id": 999}, "bad argument id: route 999 not found"},
		{"delete_route", map[string]any{"id": "x"}, "bad argument id: \"x\" is not an integer"},
		{"set_routes", map[string]any{}, "bad argument routes: required"},
		{"set_routes", map[string]any{"routes": "x"}, "bad argument routes: must be an array, not a string"},
		{"set_routes", routes(map[string]any{"seq": 1, "match": "", "target": "main"}, 7), "bad argument routes[1]: must be an object"},
		{"set_routes", routes(map[string]any{"seq": 1, "match": "room=[", "target": "main"}), "bad argument routes[0].match: route match \"room=[\""},
		{"set_routes", routes(map[string]any{"seq": 1, "match": "", "target": "main", "x": 1}), "bad argument routes[0].x: no such parameter"},
		{"set_routes", routes(map[string]any{"seq": 1, "match": ""}), "bad argument routes[0].target: required"},
		{"set_routes", routes(map[string]any{"seq": 1, "match": "", "target": "other"}), "denied: set_routes sets routes to main and the groups below it only, and routes[0].target other is outside them"},
		{"set_routes", map[string]any{"routes": make([]any, ipc.MaxRoutes+1)}, "bad argument routes: has 257 items, at most 256 allowed"},
	}
	for _, tt := range tests {
		mustFail(t, fmt.Sprintf("%s %v", tt.tool, tt.args), call(t, c, tt.tool, tt.args), tt.want)
	}
	if got := outboxOf(t, e, "main", store.OutboxDocument); len(got) != 0 {
		t.Errorf("refused documents reached the outbox: %+v", got)
	}
}

// TestArgumentsNotAnObject sends arguments that are not a JSON object.
func TestArgumentsNotAnObject(t *testing.T) {
	e := newEnv(t)
	s := e.start(t, "main", nil)
	conn := rawSession(t, s.SocketPath())
	resp := conn.request(t, "tools/call", map[string]any{"name": "get_groups", "arguments": []int{1}})
	var res mcp.CallToolResult
	if err := json.Unmarshal(resp.Result, &res); err != nil || resp.Error != nil {
		t.Fatalf("response %+v: %v", resp, err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(mcp.TextContent).Text, "bad argument arguments: must be a JSON object, not an array") {
		t.Errorf("result = %+v", res)
	}
}

// TestUnknownTool: a tool the server does not have is a JSON-RPC error that
// names it.
func TestUnknownTool(t *testing.T) {
	e := newEnv(t)
	s := e.start(t, "main", nil)
	c := dial(t, s.SocketPath())
	_, err := callErr(c, "format_disk", nil)
	if err == nil || !strings.Contains(err.Error(), "format_disk") {
		t.Fatalf("call of an unknown tool: %v, want an error naming it", err)
	}
}

// TestSubtreeIsolation: a group sees and changes only its own subtree's
// groups, tasks and routes; the rest does not exist for it, or is refused
// with the reason when named. The root is scoped to its tree alike.
func TestSubtreeIsolation(t *testing.T) {
	e := newEnv(t)
	other, err := e.st.CreateTask(e.ctx, store.Task{Folder: "main/z", Prompt: "theirs", ScheduleKind: store.ScheduleCron,
		ScheduleExpr: "0 * * * *", NextRunAt: fixedNow.Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	below, err := e.st.CreateTask(e.ctx, store.Task{Folder: "main/a/b", Prompt: "below", ScheduleKind: store.ScheduleCron,
		ScheduleExpr: "0 * * * *", NextRunAt: fixedNow.Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	rootRoute, _ := e.st.AddRoute(e.ctx, store.Route{Seq: 1, Match: "", Target: "main"})
	zRoute, _ := e.st.AddRoute(e.ctx, store.Route{Seq: 2, Match: "room=z", Target: "main/z"})
	belowRoute, _ := e.st.AddRoute(e.ctx, store.Route{Seq: 3, Match: "room=b", Target: "main/a/b"})
	s := e.start(t, "main/a", nil)
	c := dial(t, s.SocketPath())

	mustFail(t, "get other task", call(t, c, "get_task", map[string]any{"id": other.ID}), "task "+other.ID+" not found")
	mustFail(t, "update other task", call(t, c, "update_task", map[string]any{"id": other.ID, "state": "paused"}), "not found")
	mustFail(t, "cancel other task", call(t, c, "cancel_task", map[string]any{"id": other.ID}), "not found")
	mustOK(t, "get task below", call(t, c, "get_task", map[string]any{"id": below.ID}))
	tasks := mustOK(t, "list tasks", call(t, c, "list_tasks", nil))
	if got := ids(tasks["tasks"], "id"); !slices.Equal(got, []any{below.ID}) {
		t.Errorf("list_tasks = %v, want only %s", got, below.ID)
	}
	if taskOf(t, e, other.ID).State != store.TaskActive {
		t.Error("the other subtree's task was changed")
	}

	routes := mustOK(t, "list routes", call(t, c, "list_routes", nil))
	if got := ids(routes["routes"], "id"); !slices.Equal(got, []any{float64(belowRoute.ID)}) {
		t.Errorf("list_routes = %v, want only %d", got, belowRoute.ID)
	}
	for _, id := range []int64{rootRoute.ID, zRoute.ID} {
		mustFail(t, "delete invisible route", call(t, c, "delete_route", map[string]any{"id": id}), fmt.Sprintf("route %d not found", id))
	}
	mustFail(t, "delete the operator's route", call(t, c, "delete_route", map[string]any{"id": belowRoute.ID}),
		fmt.Sprintf("denied: route %d was added by the operator; main/a deletes only routes it or a group below it added", belowRoute.ID))
	mustFail(t, "add route outside", call(t, c, "add_route", map[string]any{"seq": 0, "match": "", "target": "main"}),
		"denied: add_route acts only inside main/a's subtree (main/a and the groups below it), and target main is outside it; "+
			"only the operator can allow this, with a grant rule naming the folder, such as add_route(target=main)")
	mustFail(t, "schedule outside", call(t, c, "schedule_task", map[string]any{"prompt": "p", "schedule_kind": "cron", "schedule": "0 9 * * *", "folder": "main/z"}),
		"denied: schedule_task acts only inside main/a's subtree", "folder main/z is outside it")
	mustFail(t, "register outside", call(t, c, "register_group", map[string]any{"folder": "main/y", "name": "y"}),
		"denied: register_group acts only inside main/a's subtree", "folder main/y is outside it")
	mustFail(t, "register itself", call(t, c, "register_group", map[string]any{"folder": "main/a", "name": "y"}), "is not below main/a")
	mustOK(t, "set routes", call(t, c, "set_routes", map[string]any{"routes": []any{
		map[string]any{"seq": 4, "match": "room=a", "target": "main/a"},
		map[string]any{"seq": 5, "match": "room=c", "target": "main/a/b/c"},
	}}))
	all, err := e.st.ListRoutes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range all {
		got = append(got, r.Match+">"+r.Target)
	}
	want := []string{">main", "room=z>main/z", "room=b>main/a/b", "room=a>main/a", "room=c>main/a/b/c"}
	if !slices.Equal(got, want) {
		t.Errorf("routes after set_routes = %v, want %v", got, want)
	}

	otherTask, err := e.st.CreateTask(e.ctx, store.Task{Folder: "other/a", Prompt: "another tree", ScheduleKind: store.ScheduleCron,
		ScheduleExpr: "0 * * * *", NextRunAt: fixedNow.Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	otherRoute, _ := e.st.AddRoute(e.ctx, store.Route{Seq: 1, Match: "", Target: "other"})
	root := dial(t, e.start(t, "main", nil).SocketPath())
	mustOK(t, "root gets a task of its tree", call(t, root, "get_task", map[string]any{"id": other.ID}))
	mustFail(t, "root gets a task of another tree", call(t, root, "get_task", map[string]any{"id": otherTask.ID}), "not found")
	rootRoutes := mustOK(t, "root lists routes", call(t, root, "list_routes", nil))
	if got := ids(rootRoutes["routes"], "target"); len(got) != 5 || slices.Contains(got, any("other")) {
		t.Errorf("root sees routes to %v, want the 5 into main's tree", got)
	}
	mustFail(t, "root deletes another tree's route", call(t, root, "delete_route", map[string]any{"id": otherRoute.ID}), "not found")
	mustFail(t, "root routes into another tree", call(t, root, "add_route", map[string]any{"seq": 9, "match": "", "target": "other"}),
		"denied: add_route acts only inside main's subtree")
	if !routeExists(t, e, otherRoute.ID) {
		t.Error("the other tree's route is gone")
	}
}

// TestTaskLifecycle schedules, reschedules, pauses, resumes and cancels a
// task, and checks each state in the store.
func TestTaskLifecycle(t *testing.T) {
	e := newEnv(t)
	s := e.start(t, "main/a", nil)
	c := dial(t, s.SocketPath())
	res := mustOK(t, "schedule", call(t, c, "schedule_task", map[string]any{"prompt": "check the news", "schedule_kind": "interval", "schedule": "90m"}))
	id := res["id"].(string)
	task := taskOf(t, e, id)
	if task.Folder != "main/a" || task.ScheduleKind != store.ScheduleInterval || task.ScheduleExpr != "5400000" ||
		task.NextRunAt != fixedNow.Add(90*time.Minute).UnixMilli() || task.State != store.TaskActive {
		t.Fatalf("scheduled task = %+v", task)
	}
	mustOK(t, "ms interval", call(t, c, "schedule_task", map[string]any{"prompt": "p", "schedule_kind": "interval", "schedule": "60000"}))
	once := mustOK(t, "once", call(t, c, "schedule_task", map[string]any{"prompt": "p", "schedule_kind": "once", "schedule": "2030-06-01T12:00:00Z", "folder": "main/a/b"}))
	if once["folder"] != "main/a/b" || once["next_run_at"] != "2030-06-01T12:00:00Z" {
		t.Errorf("once task = %v", once)
	}
	mustFail(t, "kind without schedule", call(t, c, "update_task", map[string]any{"id": id, "schedule_kind": "cron"}), "bad argument schedule: required when schedule_kind is given")
	mustFail(t, "nothing", call(t, c, "update_task", map[string]any{"id": id}), "nothing to update")
	mustOK(t, "reschedule", call(t, c, "update_task", map[string]any{"id": id, "schedule_kind": "cron", "schedule": "0 12 * * *", "prompt": "new"}))
	task = taskOf(t, e, id)
	if task.ScheduleKind != store.ScheduleCron || task.ScheduleExpr != "0 12 * * *" || task.Prompt != "new" ||
		task.NextRunAt != time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC).UnixMilli() {
		t.Fatalf("rescheduled task = %+v", task)
	}
	mustOK(t, "pause", call(t, c, "update_task", map[string]any{"id": id, "state": "paused"}))
	if task = taskOf(t, e, id); task.State != store.TaskPaused {
		t.Fatalf("paused task = %+v", task)
	}
	later := fixedNow.Add(10 * time.Hour)
	s.Stop()
	s = e.start(t, "main/a", func(cfg *ipc.ServerConfig) { cfg.Now = func() time.Time { return later } })
	c = dial(t, s.SocketPath())
	mustOK(t, "resume", call(t, c, "update_task", map[string]any{"id": id, "state": "active"}))
	if task = taskOf(t, e, id); task.State != store.TaskActive || task.NextRunAt != time.Date(2030, 1, 3, 12, 0, 0, 0, time.UTC).UnixMilli() {
		t.Fatalf("resumed task = %+v (next %s)", task, time.UnixMilli(task.NextRunAt).UTC())
	}
	res = mustOK(t, "cancel", call(t, c, "cancel_task", map[string]any{"id": id}))
	if res["state"] != "completed" {
		t.Errorf("cancel answered %v", res)
	}
	if task = taskOf(t, e, id); task.State != store.TaskCompleted || task.NextRunAt != 0 {
		t.Fatalf("cancelled task = %+v", task)
	}
	mustOK(t, "cancel again", call(t, c, "cancel_task", map[string]any{"id": id}))
	mustFail(t, "update completed", call(t, c, "update_task", map[string]any{"id": id, "state": "active"}), "is completed")
	completed := mustOK(t, "list completed", call(t, c, "list_tasks", map[string]any{"state": "completed"}))
	if got := ids(completed["tasks"], "id"); !slices.Equal(got, []any{id}) {
		t.Errorf("completed tasks = %v", got)
	}
}

// TestRegisterAndSpawn registers groups below the caller and spawns one
// with a first message; a root makes a new root only by an operator's grant
// naming it.
func TestRegisterAndSpawn(t *testing.T) {
	e := newEnv(t)
	c := dial(t, e.start(t, "main/a", nil).SocketPath())
	res := mustOK(t, "register", call(t, c, "register_group", map[string]any{"folder": "main/a/research", "name": "Research", "description": "papers"}))
	if res["parent"] != "main/a" || res["tier"] != float64(2) {
		t.Errorf("registered %v", res)
	}
	mustOK(t, "register grandchild", call(t, c, "register_group", map[string]any{"folder": "main/a/research/w1", "name": "W1"}))
	g, err := e.st.GetGroup(e.ctx, "main/a/research/w1")
	if err != nil || g.Parent != "main/a/research" || g.Name != "W1" {
		t.Fatalf("grandchild %+v, %v", g, err)
	}
	root := dial(t, e.start(t, "main", nil).SocketPath())
	mustFail(t, "spawn a root", call(t, root, "spawn_group", map[string]any{"folder": "lab", "name": "Lab"}),
		"denied: spawn_group acts only inside main's subtree", "such as spawn_group(folder=lab)")
	mustFail(t, "spawn under another root", call(t, root, "spawn_group", map[string]any{"folder": "other/lab", "name": "Lab"}),
		"denied: spawn_group acts only inside main's subtree")
	mustFail(t, "register a root", call(t, root, "register_group", map[string]any{"folder": "lab", "name": "Lab"}),
		"denied: register_group acts only inside main's subtree")
	if groupExists(t, e, "lab") || groupExists(t, e, "other/lab") {
		t.Fatal("a refused spawn registered a group")
	}
	mustOK(t, "spawn below", call(t, root, "spawn_group", map[string]any{"folder": "main/lab", "name": "Lab", "prompt": "begin"}))
	if err := e.st.SetGrants(e.ctx, "main", []string{"*", "spawn_group(folder=lab)"}); err != nil {
		t.Fatal(err)
	}
	mustFail(t, "the grant names lab only", call(t, root, "spawn_group", map[string]any{"folder": "lab2", "name": "Lab"}),
		"denied: spawn_group acts only inside main's subtree")
	mustOK(t, "spawn root", call(t, root, "spawn_group", map[string]any{"folder": "lab", "name": "Lab"}))
	if g, err := e.st.GetGroup(e.ctx, "lab"); err != nil || g.Parent != "" {
		t.Fatalf("spawned root %+v, %v", g, err)
	}
	if msgs := inboxOf(t, e, "lab", store.SourceInject); len(msgs) != 0 {
		t.Errorf("spawn without prompt left messages: %+v", msgs)
	}
	mustFail(t, "spawn existing", call(t, root, "spawn_group", map[string]any{"folder": "lab", "name": "Lab"}), "already registered")
}

// TestConcurrentConnections serves several clients of one socket at once,
// which mcp-go's StdioServer (one process-wide session) would refuse.
func TestConcurrentConnections(t *testing.T) {
	e := newEnv(t)
	s := e.start(t, "main", nil)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		c := dial(t, s.SocketPath())
		wg.Go(func() {
			for j := range 10 {
				r, err := callErr(c, "send_message", map[string]any{"chat_jid": fmt.Sprintf("tg:%d", i), "text": fmt.Sprint(j)})
				if err != nil || r.isError {
					errs <- fmt.Errorf("client %d call %d: %v %v", i, j, err, r.text)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(outboxOf(t, e, "main", store.OutboxMessage)); got != n*10 {
		t.Errorf("%d messages in the outbox, want %d", got, n*10)
	}
}

// TestSocketLifecycle: a stale file or symlink is replaced, the socket is
// 0600, Stop removes it (once, and only its own), and restart is safe.
func TestSocketLifecycle(t *testing.T) {
	e := newEnv(t)
	path := e.socketPath("main")
	os.MkdirAll(filepath.Dir(path), 0o700)
	target := filepath.Join(e.dir, "precious")
	os.WriteFile(target, []byte("keep"), 0o644)
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	s := e.start(t, "main", nil)
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != ipc.SocketMode {
		t.Fatalf("socket %v, %v; want a socket with mode %o", fi.Mode(), err, ipc.SocketMode)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatal("the stale symlink's target was touched")
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o644 {
		t.Fatalf("the symlink's target mode changed to %o", st.Mode().Perm())
	}
	c := dial(t, path)
	mustOK(t, "call", call(t, c, "get_groups", nil))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Stop: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := callErr(c, "get_groups", nil); err == nil {
		t.Error("a call on a connection of a stopped server succeeded")
	}

	os.WriteFile(path, []byte("planted"), 0o600)
	a := e.start(t, "main", nil)
	b := e.start(t, "main", nil) // replaces a's socket file, as a restart would
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	mustOK(t, "b after a stopped", call(t, dial(t, path), "get_groups", nil))
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after the second server stopped: %v", err)
	}
}

func TestStartRefusesBadConfig(t *testing.T) {
	e := newEnv(t)
	dirPath := filepath.Join(e.dir, "ipc", "main", "router.sock")
	os.MkdirAll(dirPath, 0o700)
	base := ipc.ServerConfig{Folder: "main", SocketPath: filepath.Join(e.dir, "s.sock"), Store: e.st, NextRun: testNextRun}
	tests := []struct {
		name string
		mod  func(*ipc.ServerConfig)
		want string
	}{
		{"bad folder", func(c *ipc.ServerConfig) { c.Folder = "../etc" }, "folder"},
		{"no socket", func(c *ipc.ServerConfig) { c.SocketPath = "" }, "socket path: empty"},
		{"relative socket", func(c *ipc.ServerConfig) { c.SocketPath = "router.sock" }, "not absolute"},
		{"long socket", func(c *ipc.ServerConfig) { c.SocketPath = "/" + strings.Repeat("x", 120) }, "at most 107"},
		{"no store", func(c *ipc.ServerConfig) { c.Store = nil }, "store: nil"},
		{"no next run", func(c *ipc.ServerConfig) { c.NextRun = nil }, "next run: nil"},
		{"directory", func(c *ipc.ServerConfig) { c.SocketPath = dirPath }, "is a directory"},
	}
	for _, tt := range tests {
		cfg := base
		tt.mod(&cfg)
		s, err := ipc.Start(context.Background(), cfg)
		if err == nil {
			s.Stop()
			t.Errorf("%s: Start succeeded", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
}

// rawConn speaks newline-delimited JSON-RPC by hand, as socat relays it.
type rawConn struct {
	c  net.Conn
	r  *bufio.Reader
	id int
}

type rawResponse struct {
	ID     *int            `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func rawDial(t testing.TB, socket string) *rawConn {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{c: c, r: bufio.NewReader(c)}
}

// rawSession connects and does the classic initialize handshake.
func rawSession(t testing.TB, socket string) *rawConn {
	t.Helper()
	rc := rawDial(t, socket)
	resp := rc.request(t, "initialize", map[string]any{"protocolVersion": "2024-11-05", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}})
	if resp.Error != nil {
		t.Fatalf("initialize: %+v", resp.Error)
	}
	rc.send(t, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return rc
}

func (rc *rawConn) send(t testing.TB, msg any) {
	t.Helper()
	b, _ := json.Marshal(msg)
	if _, err := rc.c.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

func (rc *rawConn) request(t testing.TB, method string, params any) rawResponse {
	t.Helper()
	rc.id++
	rc.send(t, map[string]any{"jsonrpc": "2.0", "id": rc.id, "method": method, "params": params})
	return rc.answer(t, method)
}

// callBytes calls tool with arguments written as JSON by hand: bytes that
// json.Marshal would not send (invalid UTF-8) go through as they are.
func (rc *rawConn) callBytes(t testing.TB, tool, arguments string) rawResponse {
	t.Helper()
	rc.id++
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`+"\n", rc.id, tool, arguments)
	if _, err := rc.c.Write([]byte(line)); err != nil {
		t.Fatal(err)
	}
	return rc.answer(t, tool)
}

// answer reads lines up to the response to the last request.
func (rc *rawConn) answer(t testing.TB, method string) rawResponse {
	t.Helper()
	for {
		line, err := rc.r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("%s: read: %v", method, err)
		}
		var resp rawResponse
		if err := json.Unmarshal(line, &resp); err != nil {
			t.Fatalf("%s: bad line %q: %v", method, line, err)
		}
		if resp.ID != nil && *resp.ID == rc.id {
			return resp
		}
	}
}

// TestRawJSONRPC walks the handshake Claude Code does through socat, with
// the protocol versions of 2024 and 2025, and checks the framing: one JSON
// message per line, blank lines ignored.
func TestRawJSONRPC(t *testing.T) {
	e := newEnv(t)
	s := e.start(t, "main/a/b/c", nil)
	for _, version := range []string{"2024-11-05", "2025-03-26", "2025-06-18"} {
		rc := rawDial(t, s.SocketPath())
		rc.c.Write([]byte("\n  \n"))
		resp := rc.request(t, "initialize", map[string]any{"protocolVersion": version, "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "raw", "version": "1"}})
		var init struct {
			ProtocolVersion string `json:"protocolVersion"`
			ServerInfo      struct {
				Name string `json:"name"`
			} `json:"serverInfo"`
			Capabilities map[string]any `json:"capabilities"`
		}
		if err := json.Unmarshal(resp.Result, &init); err != nil || init.ProtocolVersion != version || init.ServerInfo.Name != "arizukod" || init.Capabilities["tools"] == nil {
			t.Fatalf("%s: initialize answered %s (%v)", version, resp.Result, err)
		}
		rc.send(t, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
		resp = rc.request(t, "tools/list", map[string]any{})
		var list mcp.ListToolsResult
		if err := json.Unmarshal(resp.Result, &list); err != nil || len(list.Tools) != 1 || list.Tools[0].Name != "send_reply" {
			t.Fatalf("%s: tools/list answered %s", version, resp.Result)
		}
		resp = rc.request(t, "tools/call", map[string]any{"name": "send_message", "arguments": map[string]any{"chat_jid": "tg:1", "text": "x"}})
		if !strings.Contains(string(resp.Result), `"isError":true`) || !strings.Contains(string(resp.Result), "may not call send_message") {
			t.Fatalf("%s: denied call answered %s", version, resp.Result)
		}
		resp = rc.request(t, "ping", nil)
		if resp.Error != nil {
			t.Fatalf("%s: ping: %+v", version, resp.Error)
		}
	}
	rc := rawDial(t, s.SocketPath())
	rc.c.Write([]byte("{not json\n"))
	line, err := rc.r.ReadBytes('\n')
	if err != nil || !strings.Contains(string(line), `"code":-32700`) {
		t.Fatalf("garbage answered %q, %v; want a parse error", line, err)
	}
}

// TestToolSchemas checks every tool's input schema: an object with exactly
// the parameters ToolParams names, the required ones required, nothing else
// allowed, and a description everywhere.
func TestToolSchemas(t *testing.T) {
	e := newEnv(t)
	c := dial(t, e.start(t, "main", nil).SocketPath())
	ctx := context.Background()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	required := map[string][]string{
		"send_message": {"chat_jid", "text"}, "send_reply": {"text"}, "send_document": {"chat_jid", "path"},
		"clear_session": {}, "inject_message": {"folder", "text"}, "register_group": {"folder", "name"},
		"get_groups": {}, "refresh_groups": {}, "spawn_group": {"folder", "name"}, "delegate_to_child": {"child", "text"},
		"delegate_to_parent": {"text"}, "schedule_task": {"prompt", "schedule_kind", "schedule"}, "get_task": {"id"},
		"update_task": {"id"}, "cancel_task": {"id"}, "list_tasks": {}, "list_routes": {}, "set_routes": {"routes"},
		"add_route": {"seq", "match", "target"}, "delete_route": {"id"},
	}
	if len(res.Tools) != len(required) {
		t.Fatalf("%d tools listed at tier 0, want %d", len(res.Tools), len(required))
	}
	for _, tool := range res.Tools {
		b, _ := json.Marshal(tool)
		var got struct {
			Description string `json:"description"`
			InputSchema struct {
				Type                 string                    `json:"type"`
				Properties           map[string]map[string]any `json:"properties"`
				Required             []string                  `json:"required"`
				AdditionalProperties *bool                     `json:"additionalProperties"`
			} `json:"inputSchema"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		s := got.InputSchema
		params, ok := ipc.ToolParams(tool.Name)
		if !slices.Equal(params, policy.Params(tool.Name)) {
			t.Errorf("%s: parameters %v, but the grant rules know %v (ipc/policy's params)", tool.Name, params, policy.Params(tool.Name))
		}
		var props []string
		for p, ps := range s.Properties {
			props = append(props, p)
			if ps["description"] == "" || ps["type"] == nil {
				t.Errorf("%s.%s: schema %v lacks a type or description", tool.Name, p, ps)
			}
		}
		slices.Sort(props)
		slices.Sort(params)
		req := slices.Clone(s.Required)
		slices.Sort(req)
		want := slices.Clone(required[tool.Name])
		slices.Sort(want)
		if !ok || got.Description == "" || s.Type != "object" || s.AdditionalProperties == nil || *s.AdditionalProperties ||
			!slices.Equal(props, params) || !slices.Equal(req, want) {
			t.Errorf("%s: schema %s; want properties %v, required %v", tool.Name, b, params, want)
		}
	}
}

// TestLongMessage: a line over MaxMessageBytes gets an error and the
// connection is closed; the server goes on serving others.
func TestLongMessage(t *testing.T) {
	e := newEnv(t)
	s := e.start(t, "main", nil)
	rc := rawDial(t, s.SocketPath())
	go rc.c.Write(append([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"`), make([]byte, ipc.MaxMessageBytes+200<<10)...))
	line, err := rc.r.ReadBytes('\n')
	if err != nil || !strings.Contains(string(line), "longer than") {
		t.Fatalf("answered %q, %v", line, err)
	}
	if _, err := rc.r.ReadBytes('\n'); err == nil {
		t.Fatal("connection still open")
	}
	mustOK(t, "another client", call(t, dial(t, s.SocketPath()), "get_groups", nil))
}

// TestFolderGlobReach: an operator's grant reaches across trees exactly as far as its
// folder glob says: "other/*" the children of other, "other/**" everything below it.
func TestFolderGlobReach(t *testing.T) {
	for _, tc := range []struct {
		grant string
		reach map[string]bool
	}{
		{"inject_message(folder=other/*)", map[string]bool{"other": false, "other/a": true, "other/a/b": false, "other/a/b/c": false}},
		{"inject_message(folder=other/**)", map[string]bool{"other": false, "other/a": true, "other/a/b": true, "other/a/b/c": true}},
		{"inject_message(folder=other/*/*)", map[string]bool{"other/a": false, "other/a/b": true, "other/a/b/c": false}},
	} {
		t.Run(tc.grant, func(t *testing.T) {
			e := newEnv(t)
			op := newOperator(e)
			op.do(t, http.MethodPut, "/v1/groups/main/grants", map[string]any{"rules": []string{"*", tc.grant}}, http.StatusOK, nil)
			c := dial(t, e.start(t, "main", nil).SocketPath())
			for folder, want := range tc.reach {
				r := call(t, c, "inject_message", map[string]any{"folder": folder, "text": "hello"})
				switch {
				case want && r.isError:
					t.Errorf("inject into %s: %s, want it allowed", folder, r.text)
				case !want && !r.isError:
					t.Errorf("inject into %s allowed, want it denied", folder)
				case !want && !strings.Contains(r.text, "outside it"):
					t.Errorf("inject into %s: %s, want the subtree refusal", folder, r.text)
				}
			}
		})
	}
}

// TestArgumentsAsSent: a string argument that is not valid UTF-8 as sent (an
// invalid byte, an unpaired surrogate escape) is refused naming the argument,
// where encoding/json would have kept U+FFFD in its place: a route's match
// would be stored meaning something else.
func TestArgumentsAsSent(t *testing.T) {
	e := newEnv(t)
	rc := rawSession(t, e.start(t, "main", nil).SocketPath())
	before := e.dump(t)
	for _, tc := range []struct {
		name, tool, arguments, arg string
	}{
		{"add_route invalid byte", "add_route", "{\"seq\":1,\"match\":\"room=\xff\",\"target\":\"main/a\"}", "match"},
		{"add_route lone surrogate", "add_route", `{"seq":1,"match":"room=\udc00","target":"main/a"}`, "match"},
		{"set_routes item", "set_routes", "{\"routes\":[{\"seq\":1,\"match\":\"room=1\",\"target\":\"main/a\"},{\"seq\":2,\"match\":\"sender=\xc3\",\"target\":\"main/a\"}]}", "routes[1].match"},
		{"schedule_task prompt", "schedule_task", "{\"prompt\":\"p\xfe\",\"schedule_kind\":\"cron\",\"schedule\":\"0 9 * * *\"}", "prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := rc.callBytes(t, tc.tool, tc.arguments)
			var res mcp.CallToolResult
			if err := json.Unmarshal(resp.Result, &res); err != nil || !res.IsError || len(res.Content) == 0 {
				t.Fatalf("answered %s, want a tool error", resp.Result)
			}
			text := res.Content[0].(mcp.TextContent).Text
			if want := "bad argument " + tc.arg + ": must be valid UTF-8"; !strings.Contains(text, want) {
				t.Errorf("answered %q, want %q", text, want)
			}
		})
	}
	e.unchanged(t, "refused calls", before)
	resp := rc.callBytes(t, "add_route", `{"seq":1,"match":"room=\u00e9\ud83d\ude00","target":"main/a"}`)
	if strings.Contains(string(resp.Result), `"isError":true`) {
		t.Fatalf("a match of valid escapes was refused: %s", resp.Result)
	}
	rs, err := e.st.ListRoutes(e.ctx)
	if err != nil || len(rs) != 1 || rs[0].Match != "room=\u00e9\U0001F600" {
		t.Errorf("routes %+v, %v; want the match as sent", rs, err)
	}
}
