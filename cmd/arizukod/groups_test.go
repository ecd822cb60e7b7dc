package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/store"
)

// TestGroupsRemove: `groups remove` says what happens to a group's folder, runs, routes,
// tasks and descendants and removes nothing without --yes; a group with descendants or
// with a run queued is refused, saying why; with --yes the group, its routes, tasks,
// grants and session go, its pending messages are dropped (kept, with who), its ended
// runs and outbox stay, and its directories are named as left on disk.
func TestGroupsRemove(t *testing.T) {
	fx := newCLIFixture(t)
	ctx := context.Background()
	s := "--socket=" + fx.socket
	st := fx.st
	const child = "main/research"
	if _, err := st.AddRoute(ctx, store.Route{Seq: 1, Match: "chat_jid=tg:1", Target: child}); err != nil {
		t.Fatal(err)
	}
	other, err := st.AddRoute(ctx, store.Route{Seq: 2, Match: "", Target: "main"})
	if err != nil {
		t.Fatal(err)
	}
	task, err := st.CreateTask(ctx, store.Task{Folder: child, Prompt: "summarise", ScheduleKind: store.ScheduleInterval,
		ScheduleExpr: "3600000", State: store.TaskActive, NextRunAt: time.Now().Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetGrants(ctx, child, []string{"*"}); err != nil {
		t.Fatal(err)
	}
	ended, err := st.CreateRun(ctx, store.Run{Folder: child})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishRun(ctx, ended.ID, store.Outcome{State: store.RunError, Status: store.StatusError, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	ids, err := st.AppendInbox(ctx, child, store.InboxMessage{Role: "user", Content: "fails every time", Source: store.SourceAPI})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendOutbox(ctx, store.OutboxItem{Folder: child, Kind: store.OutboxMessage, Target: "tg:1", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	queued, err := st.CreateRun(ctx, store.Run{Folder: child})
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"descendants", []string{"groups", "remove", "main"}, []string{"groups below it (main/research): remove them first"}},
		{"descendants --yes", []string{"groups", "remove", "main", "--yes"}, []string{"groups below it (main/research)", "nothing was removed"}},
		{"open run", []string{"groups", "remove", child}, []string{"queued or running (" + queued.ID + "): kill them"}},
		{"open run --yes", []string{"groups", "remove", child, "--yes"}, []string{"queued or running (" + queued.ID + ")", "nothing was removed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := fx.run(t, append(c.args, s)...)
			for _, w := range c.want {
				if code != 1 || !strings.Contains(stderr, w) {
					t.Errorf("arizukod %s: exit %d, stderr %q, want exit 1 saying %q\n%s", strings.Join(c.args, " "), code, stderr, w, stdout)
				}
			}
		})
	}
	if _, err := st.RequestKill(ctx, queued.ID); err != nil {
		t.Fatal(err)
	}

	code, plan, stderr := fx.run(t, "groups", "remove", child, s)
	for _, w := range []string{
		"Removing group main/research would do this:",
		"deleted: its registration, grants, session and inbox cursor",
		"given to no turn): 1 pending inbox message (" + fmt.Sprint(ids[0]) + ")",
		"deleted: 1 route (",
		"deleted, to fire no more: 1 task (" + task.ID + ")",
		"until retention prunes them: 2 ended runs",
		"delivered as usual: 1 outbound message not delivered yet",
		"left on disk, untouched",
		filepath.Join("groups", child),
		filepath.Join("sessions", "main-research"),
		"Nothing was removed: run `arizukod groups remove main/research --yes`",
	} {
		if code != 0 || !strings.Contains(plan, w) {
			t.Errorf("groups remove %s (no --yes): exit %d, want it to say %q:\n%s%s", child, code, w, plan, stderr)
		}
	}
	if _, err := st.GetGroup(ctx, child); err != nil {
		t.Fatalf("the plan removed the group: %v", err)
	}

	code, stdout, stderr := fx.run(t, "groups", "remove", child, "--yes", "--json", s)
	var done apiwire.GroupRemoval
	if err := json.Unmarshal([]byte(stdout), &done); code != 0 || err != nil || !done.Removed {
		t.Fatalf("groups remove --yes --json: exit %d, %+v %v\n%s", code, done, err, stderr)
	}
	if _, err := st.GetGroup(ctx, child); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the group after its removal: %v, want not found", err)
	}
	routes, err := st.ListRoutes(ctx)
	if err != nil || len(routes) != 1 || routes[0].ID != other.ID {
		t.Errorf("routes after the removal: %+v %v, want only the route to main", routes, err)
	}
	if _, err := st.GetTask(ctx, task.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the task after the removal: %v, want deleted", err)
	}
	if _, err := st.GetGrants(ctx, child); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the grants after the removal: %v, want deleted", err)
	}
	if runs, err := st.ListRuns(ctx, store.RunFilter{Folder: child}); err != nil || len(runs) != 2 {
		t.Errorf("runs after the removal: %d %v, want both kept", len(runs), err)
	}
	if folders, err := st.PendingFolders(ctx); err != nil || slices.Contains(folders, child) {
		t.Errorf("pending folders after the removal: %v %v, want no %s", folders, err, child)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(filepath.Dir(fx.socket), "arizukod.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var by string
	if err := db.QueryRowContext(ctx, `SELECT dropped_by FROM inbox WHERE id = ?`, ids[0]).Scan(&by); err != nil || by != "cli:"+userName() {
		t.Errorf("the pending message after the removal: dropped by %q (%v), want kept, dropped by the CLI's user", by, err)
	}
	if code, _, stderr := fx.run(t, "groups", "remove", child, "--yes", s); code != 1 || !strings.Contains(stderr, `unknown group "main/research": nothing to remove`) {
		t.Errorf("removing it again: exit %d, %q", code, stderr)
	}
	if code, stdout, stderr := fx.run(t, "groups", "remove", "main", s); code != 0 || !strings.Contains(stdout, "1 route (") {
		t.Errorf("main, once its child is gone: exit %d\n%s%s", code, stdout, stderr)
	}
}
