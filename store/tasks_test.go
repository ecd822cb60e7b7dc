package store

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

// every returns a computeNext for interval tasks firing every d after now.
func every(now int64, d time.Duration) func(Task) (int64, bool) {
	return func(t Task) (int64, bool) {
		if t.ScheduleKind == ScheduleOnce {
			return 0, true
		}
		return now + d.Milliseconds(), false
	}
}

func taskRun(t Task) Run {
	return Run{Input: []byte(`{"messages":[{"role":"user","content":` + quote(t.Prompt) + `}],"senderJid":"scheduler-isolated:` + t.ID + `"}`)}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

func TestTaskCRUD(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	due := c.MS() + 60_000
	tk, err := s.CreateTask(ctx, Task{Folder: "main", Prompt: "report", ScheduleKind: ScheduleCron, ScheduleExpr: "0 9 * * *", NextRunAt: due})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^t_[0-9a-f]{16}$`).MatchString(tk.ID) || tk.State != TaskActive || tk.CreatedAt != c.MS() || tk.NextRunAt != due {
		t.Errorf("created: %+v", tk)
	}
	if _, err := s.CreateTask(ctx, Task{ID: tk.ID, Folder: "main", Prompt: "x", ScheduleKind: ScheduleOnce, ScheduleExpr: "2030-01-01T00:00:00Z", NextRunAt: 1}); !errors.Is(err, ErrConflict) {
		t.Errorf("duplicate id: %v, want ErrConflict", err)
	}
	s.CreateTask(ctx, Task{ID: "t_child", Folder: "main/a", Prompt: "p", ScheduleKind: ScheduleInterval, ScheduleExpr: "60000", State: TaskPaused})
	s.CreateTask(ctx, Task{ID: "t_other", Folder: "main2", Prompt: "p", ScheduleKind: ScheduleInterval, ScheduleExpr: "60000", NextRunAt: 5})

	c.Advance(time.Second)
	paused := TaskPaused
	prompt := "daily report"
	up, err := s.UpdateTask(ctx, tk.ID, TaskPatch{Prompt: &prompt, State: &paused})
	if err != nil {
		t.Fatal(err)
	}
	if up.Prompt != prompt || up.State != TaskPaused || up.NextRunAt != due || up.ScheduleExpr != "0 9 * * *" || up.UpdatedAt != c.MS() {
		t.Errorf("updated: %+v", up)
	}
	if got, _ := s.GetTask(ctx, tk.ID); *got != *up {
		t.Errorf("GetTask = %+v, want %+v", got, up)
	}
	var zero int64
	active := TaskActive
	if _, err := s.UpdateTask(ctx, tk.ID, TaskPatch{State: &active, NextRunAt: &zero}); !errors.Is(err, ErrInvalid) {
		t.Errorf("active without next run: %v, want ErrInvalid", err)
	}
	if _, err := s.UpdateTask(ctx, "t_none", TaskPatch{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("update unknown: %v, want ErrNotFound", err)
	}

	ids := func(f TaskFilter) string {
		ts, err := s.ListTasks(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range ts {
			out = append(out, x.Folder)
		}
		return strings.Join(out, " ")
	}
	for _, tt := range []struct {
		f    TaskFilter
		want string
	}{
		{TaskFilter{}, "main main/a main2"},
		{TaskFilter{Folder: "main"}, "main"},
		{TaskFilter{Folder: "main", Subtree: true}, "main main/a"},
		{TaskFilter{State: TaskPaused}, "main main/a"},
		{TaskFilter{Folder: "main", Subtree: true, State: TaskActive}, ""},
	} {
		if got := ids(tt.f); got != tt.want {
			t.Errorf("ListTasks(%+v) = %q, want %q", tt.f, got, tt.want)
		}
	}

	if err := s.DeleteTask(ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTask(ctx, tk.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete twice: %v, want ErrNotFound", err)
	}
	if _, err := s.GetTask(ctx, tk.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("get deleted: %v, want ErrNotFound", err)
	}

	bad := []struct {
		name  string
		task  Task
		field string
	}{
		{"no folder", Task{Prompt: "p", ScheduleKind: ScheduleCron, ScheduleExpr: "* * * * *", NextRunAt: 1}, "folder"},
		{"no prompt", Task{Folder: "f", ScheduleKind: ScheduleCron, ScheduleExpr: "* * * * *", NextRunAt: 1}, "prompt"},
		{"bad kind", Task{Folder: "f", Prompt: "p", ScheduleKind: "hourly", ScheduleExpr: "x", NextRunAt: 1}, "schedule kind"},
		{"no expr", Task{Folder: "f", Prompt: "p", ScheduleKind: ScheduleCron, NextRunAt: 1}, "schedule expr"},
		{"bad state", Task{Folder: "f", Prompt: "p", ScheduleKind: ScheduleCron, ScheduleExpr: "x", State: "on", NextRunAt: 1}, "state"},
		{"active without next", Task{Folder: "f", Prompt: "p", ScheduleKind: ScheduleCron, ScheduleExpr: "x"}, "next run at"},
		{"negative next", Task{Folder: "f", Prompt: "p", ScheduleKind: ScheduleCron, ScheduleExpr: "x", State: TaskPaused, NextRunAt: -1}, "next run at"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.CreateTask(ctx, tt.task)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("err = %v, want ErrInvalid naming %s", err, tt.field)
			}
		})
	}
}

func TestClaimDueTasks(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	now := c.MS()
	mk := func(id string, kind ScheduleKind, state TaskState, next int64) {
		t.Helper()
		if _, err := s.CreateTask(ctx, Task{ID: id, Folder: "main", Prompt: "p " + id, ScheduleKind: kind, ScheduleExpr: "x", State: state, NextRunAt: next}); err != nil {
			t.Fatal(err)
		}
	}
	mk("t_interval", ScheduleInterval, TaskActive, now-1000)
	mk("t_once", ScheduleOnce, TaskActive, now)
	mk("t_later", ScheduleInterval, TaskActive, now+1)
	mk("t_paused", ScheduleInterval, TaskPaused, now-5000)

	claims, err := s.ClaimDueTasks(ctx, now, every(now, time.Minute), taskRun)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 2 || claims[0].Task.ID != "t_interval" || claims[1].Task.ID != "t_once" {
		t.Fatalf("claimed %+v, want t_interval then t_once", claims)
	}
	for _, cl := range claims {
		r := cl.Run
		if r.Kind != KindTask || r.TaskID != cl.Task.ID || r.Folder != "main" || r.State != RunQueued || cl.Task.LastRunID != r.ID || cl.Task.LastRunAt != now {
			t.Errorf("claim %+v", cl)
		}
		if !strings.Contains(string(r.Input), "scheduler-isolated:"+cl.Task.ID) {
			t.Errorf("run input %s", r.Input)
		}
		stored, _ := s.GetTask(ctx, cl.Task.ID)
		if *stored != cl.Task {
			t.Errorf("stored task %+v, claim says %+v", stored, cl.Task)
		}
	}
	if got := claims[0].Task; got.State != TaskActive || got.NextRunAt != now+60_000 {
		t.Errorf("interval task after claim: %+v", got)
	}
	if got := claims[1].Task; got.State != TaskCompleted || got.NextRunAt != 0 {
		t.Errorf("once task after claim: %+v", got)
	}

	again, err := s.ClaimDueTasks(ctx, now, every(now, time.Minute), taskRun)
	if err != nil || len(again) != 0 {
		t.Errorf("second claim at the same time: %+v, %v; want nothing", again, err)
	}
	later := now + 60_000
	again, _ = s.ClaimDueTasks(ctx, later, every(later, time.Minute), taskRun)
	if len(again) != 2 || again[0].Task.ID != "t_later" || again[1].Task.ID != "t_interval" {
		t.Errorf("claim a minute later: %+v, want t_later then t_interval", again)
	}
	runs, _ := s.ListRuns(ctx, RunFilter{TaskID: "t_interval"})
	if len(runs) != 2 {
		t.Errorf("t_interval has %d runs, want 2", len(runs))
	}
}

func TestClaimDueTasksAllOrNothing(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	now := c.MS()
	for _, id := range []string{"t_a", "t_b"} {
		if _, err := s.CreateTask(ctx, Task{ID: id, Folder: "main", Prompt: "p", ScheduleKind: ScheduleInterval, ScheduleExpr: "1000", NextRunAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	stuck := func(t Task) (int64, bool) {
		if t.ID == "t_b" {
			return now, false
		}
		return now + 1000, false
	}
	if _, err := s.ClaimDueTasks(ctx, now, stuck, taskRun); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "t_b") {
		t.Fatalf("next not after now: %v, want ErrInvalid naming t_b", err)
	}
	wrongFolder := func(Task) Run { return Run{Folder: "elsewhere"} }
	if _, err := s.ClaimDueTasks(ctx, now, every(now, time.Second), wrongFolder); !errors.Is(err, ErrInvalid) {
		t.Fatalf("run in another folder: %v, want ErrInvalid", err)
	}
	if runs, _ := s.ListRuns(ctx, RunFilter{}); len(runs) != 0 {
		t.Fatalf("failed claims left %d runs", len(runs))
	}
	claims, err := s.ClaimDueTasks(ctx, now, every(now, time.Second), taskRun)
	if err != nil || len(claims) != 2 {
		t.Errorf("after failed claims: %d claims, %v; want both tasks still due", len(claims), err)
	}
}
