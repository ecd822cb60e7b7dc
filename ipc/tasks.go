package ipc

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/store"
)

// The task tools: schedule_task, get_task, update_task, cancel_task, list_tasks.

func (s *Server) taskDefaults(a args) error {
	if !a.has("folder") {
		a["folder"] = s.folder
	}
	return nil
}

// schedule checks a schedule and returns the expression the store keeps
// (intervals become milliseconds) and the next run in unix ms, which must
// lie in the future. What else makes a schedule valid (a minimum interval,
// cron descriptors) is ServerConfig.NextRun's to say.
func (s *Server) schedule(kind, expr string) (string, int64, error) {
	expr = strings.TrimSpace(expr)
	switch store.ScheduleKind(kind) {
	case store.ScheduleInterval:
		d, err := time.ParseDuration(expr)
		if err != nil {
			ms, nerr := strconv.ParseInt(expr, 10, 64)
			if nerr != nil {
				return "", 0, badArg("schedule", "%q is neither a duration (90m, 24h) nor a number of milliseconds", expr)
			}
			d = time.Duration(ms) * time.Millisecond
		}
		if d <= 0 {
			return "", 0, badArg("schedule", "interval %s is not positive", d)
		}
		expr = strconv.FormatInt(d.Milliseconds(), 10)
	case store.ScheduleOnce:
		if _, err := time.Parse(time.RFC3339, expr); err != nil {
			return "", 0, badArg("schedule", "%q is not an RFC 3339 time such as 2030-01-02T15:04:05Z", expr)
		}
	}
	now := s.now()
	next, err := s.cfg.NextRun(kind, expr, now)
	if err != nil {
		return "", 0, badArg("schedule", "%v", err)
	}
	if next <= now.UnixMilli() {
		return "", 0, badArg("schedule", "%s %q would next run at %s, which is not in the future", kind, expr, msTime(next))
	}
	return expr, next, nil
}

func (s *Server) scheduleTask(ctx context.Context, a args) (any, error) {
	folder, err := parseFolder("folder", a.str("folder"))
	if err != nil {
		return nil, err
	}
	if err := s.scope(ctx, "schedule_task", a, "folder", folder); err != nil {
		return nil, err
	}
	if _, err := s.registered(ctx, "folder", folder); err != nil {
		return nil, err
	}
	kind := a.str("schedule_kind")
	expr, next, err := s.schedule(kind, a.str("schedule"))
	if err != nil {
		return nil, err
	}
	t, err := s.store.CreateTask(ctx, store.Task{Folder: folder, Prompt: a.str("prompt"), ScheduleKind: store.ScheduleKind(kind),
		ScheduleExpr: expr, State: store.TaskActive, NextRunAt: next})
	if err != nil {
		return nil, err
	}
	s.log.Info("ipc: task scheduled", logging.FieldTaskID, t.ID, "for", folder, "kind", kind, "schedule", expr, "next_run_at", msTime(next))
	return viewTask(t), nil
}

// task returns a task the caller may see. A task of another subtree is
// "not found", like one that does not exist, so its existence is not leaked.
func (s *Server) task(ctx context.Context, id string) (*store.Task, error) {
	t, err := s.store.GetTask(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && !s.manages(t.Folder) {
		return nil, badArg("id", "task %s not found", id)
	}
	return t, err
}

func (s *Server) getTask(ctx context.Context, a args) (any, error) {
	t, err := s.task(ctx, a.str("id"))
	if err != nil {
		return nil, err
	}
	return viewTask(t), nil
}

func (s *Server) updateTask(ctx context.Context, a args) (any, error) {
	t, err := s.task(ctx, a.str("id"))
	if err != nil {
		return nil, err
	}
	if t.State == store.TaskCompleted {
		return nil, badArg("id", "task %s is completed; schedule a new one", t.ID)
	}
	var p store.TaskPatch
	if a.has("prompt") {
		prompt := a.str("prompt")
		p.Prompt = &prompt
	}
	reschedule := a.has("schedule")
	if a.has("schedule_kind") && !reschedule {
		return nil, badArg("schedule", "required when schedule_kind is given")
	}
	state := t.State
	if a.has("state") {
		state = store.TaskState(a.str("state"))
		p.State = &state
	}
	if reschedule || state == store.TaskActive && t.State != store.TaskActive {
		kind := string(t.ScheduleKind)
		if a.has("schedule_kind") {
			kind = a.str("schedule_kind")
		}
		expr := t.ScheduleExpr
		if reschedule {
			expr = a.str("schedule")
		}
		expr, next, err := s.schedule(kind, expr)
		if err != nil {
			return nil, err
		}
		k := store.ScheduleKind(kind)
		p.ScheduleKind, p.ScheduleExpr, p.NextRunAt = &k, &expr, &next
	}
	if p == (store.TaskPatch{}) {
		return nil, fail("nothing to update: give prompt, schedule (with schedule_kind to change the kind) or state")
	}
	t, err = s.store.UpdateTask(ctx, t.ID, p)
	if err != nil {
		return nil, err
	}
	s.log.Info("ipc: task updated", logging.FieldTaskID, t.ID, "state", string(t.State), "next_run_at", msTime(t.NextRunAt))
	return viewTask(t), nil
}

// cancelTask marks the task completed rather than deleting it: its runs
// keep naming it and get_task still shows how it ended.
func (s *Server) cancelTask(ctx context.Context, a args) (any, error) {
	t, err := s.task(ctx, a.str("id"))
	if err != nil {
		return nil, err
	}
	if t.State != store.TaskCompleted {
		done, none := store.TaskCompleted, int64(0)
		if t, err = s.store.UpdateTask(ctx, t.ID, store.TaskPatch{State: &done, NextRunAt: &none}); err != nil {
			return nil, err
		}
		s.log.Info("ipc: task cancelled", logging.FieldTaskID, t.ID)
	}
	return viewTask(t), nil
}

func (s *Server) listTasks(ctx context.Context, a args) (any, error) {
	ts, err := s.store.ListTasks(ctx, store.TaskFilter{Folder: s.folder, Subtree: true, State: store.TaskState(a.str("state"))})
	if err != nil {
		return nil, err
	}
	out := []taskView{}
	for i := range ts {
		if s.manages(ts[i].Folder) {
			out = append(out, viewTask(&ts[i]))
		}
	}
	return map[string]any{"tasks": out}, nil
}

// Routes.
