package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestRemoveGroup: a group with descendants or an open run is not removed (ErrConflict,
// with the plan saying why) and nothing changes; once neither holds, RemoveGroup deletes
// the group, its grants, session, cursor, routes and tasks, drops its pending messages,
// and leaves its ended runs and other groups' routes.
func TestRemoveGroup(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	for _, g := range []Group{{Folder: "main"}, {Folder: "main/a", Parent: "main"}} {
		if _, err := s.UpsertGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AddRoute(ctx, Route{Seq: 1, Target: "main/a"}); err != nil {
		t.Fatal(err)
	}
	kept, err := s.AddRoute(ctx, Route{Seq: 2, Target: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTask(ctx, Task{Folder: "main/a", Prompt: "p", ScheduleKind: ScheduleInterval, ScheduleExpr: "60000", State: TaskActive, NextRunAt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSession(ctx, "main/a", "sess"); err != nil {
		t.Fatal(err)
	}
	ids, err := s.AppendInbox(ctx, "main/a", InboxMessage{Role: "user", Content: "x", Source: SourceAPI})
	if err != nil {
		t.Fatal(err)
	}
	open, err := s.CreateRun(ctx, Run{Folder: "main/a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		folder, why string
	}{
		{"main", "groups below it (main/a)"},
		{"main/a", "queued or running (" + open.ID + ")"},
	} {
		g, err := s.RemoveGroup(ctx, tt.folder, "cli:op")
		if !errors.Is(err, ErrConflict) || g == nil || !strings.Contains(g.Blocked(), tt.why) {
			t.Errorf("remove %s: %+v %v, want ErrConflict saying %q", tt.folder, g, err, tt.why)
		}
		if _, err := s.GetGroup(ctx, tt.folder); err != nil {
			t.Errorf("%s after a refused removal: %v", tt.folder, err)
		}
	}
	if _, err := s.RequestKill(ctx, open.ID); err != nil {
		t.Fatal(err)
	}
	g, err := s.RemoveGroup(ctx, "main/a", "cli:op")
	if err != nil || g.Runs != 1 || len(g.Pending) != 1 || len(g.Routes) != 1 || len(g.Tasks) != 1 {
		t.Fatalf("remove main/a: %+v %v", g, err)
	}
	if _, err := s.GetGroup(ctx, "main/a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("main/a after its removal: %v", err)
	}
	if sess, err := s.GetSession(ctx, "main/a"); err == nil && sess != "" {
		t.Errorf("main/a's session after its removal: %q", sess)
	}
	if tasks, err := s.ListTasks(ctx, TaskFilter{Folder: "main/a"}); err != nil || len(tasks) != 0 {
		t.Errorf("main/a's tasks after its removal: %+v %v", tasks, err)
	}
	if routes, err := s.ListRoutes(ctx); err != nil || len(routes) != 1 || routes[0].ID != kept.ID {
		t.Errorf("routes after the removal: %+v %v, want main's alone", routes, err)
	}
	if pending, err := s.PendingInbox(ctx, "main/a", 0); err != nil || len(pending) != 0 {
		t.Errorf("main/a's pending messages after its removal: %+v %v, want message %d dropped", pending, err, ids[0])
	}
	if _, err := s.RemoveGroup(ctx, "main/a", "cli:op"); !errors.Is(err, ErrNotFound) {
		t.Errorf("removing main/a again: %v, want ErrNotFound", err)
	}
}
