package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/scheduler"
	"github.com/arizuko/arizukod/store"
)

func wireTask(t *store.Task) apiwire.Task {
	return apiwire.Task{ID: t.ID, Folder: t.Folder, Prompt: t.Prompt, ScheduleKind: string(t.ScheduleKind),
		Schedule: t.ScheduleExpr, State: string(t.State), NextRunAt: msTime(t.NextRunAt),
		LastRunAt: msTime(t.LastRunAt), LastRunID: t.LastRunID, CreatedAt: msTime(t.CreatedAt), UpdatedAt: msTime(t.UpdatedAt)}
}

// listTasks is GET /v1/tasks?folder=F&state=S: the tasks agents scheduled, by folder.
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var f store.TaskFilter
	switch st := store.TaskState(q.Get("state")); st {
	case "", store.TaskActive, store.TaskPaused, store.TaskCompleted:
		f.State = st
	default:
		writeErr(w, http.StatusBadRequest, "state", "state: %q is not active, paused or completed", st)
		return
	}
	if v := q.Get("folder"); v != "" {
		folder, err := parseFolder(v)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "folder", "%v", err)
			return
		}
		f.Folder = string(folder)
	}
	tasks, err := s.store.ListTasks(r.Context(), f)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := make([]apiwire.Task, 0, len(tasks))
	for i := range tasks {
		out = append(out, wireTask(&tasks[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"tasks": out})
}

// task reads {id}: a task that exists, or the 404 is written.
func (s *Server) task(w http.ResponseWriter, r *http.Request) (*store.Task, bool) {
	id := r.PathValue("id")
	t, err := s.store.GetTask(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeErr(w, http.StatusNotFound, "id", "no task %q (GET /v1/tasks lists them)", id)
		return nil, false
	case err != nil:
		s.internal(w, r, err)
		return nil, false
	}
	return t, true
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	if t, ok := s.task(w, r); ok {
		writeJSON(w, http.StatusOK, wireTask(t))
	}
}

// taskVerb is POST /v1/tasks/{id}/{verb}: pause keeps an active task from firing, resume
// makes a paused one fire again from now on, cancel completes it for good (its runs keep
// naming it). Pausing a paused task or cancelling a completed one changes nothing.
func (s *Server) taskVerb(w http.ResponseWriter, r *http.Request) {
	verb := r.PathValue("verb")
	past, known := map[string]string{"pause": "paused", "resume": "resumed", "cancel": "cancelled"}[verb]
	if !known {
		writeErr(w, http.StatusNotFound, "verb", "%q is not pause, resume or cancel", verb)
		return
	}
	t, ok := s.task(w, r)
	if !ok {
		return
	}
	var p store.TaskPatch
	switch verb {
	case "pause":
		if t.State == store.TaskCompleted {
			writeErr(w, http.StatusConflict, "id", "task %q is completed: schedule a new one", t.ID)
			return
		}
		paused := store.TaskPaused
		p.State = &paused
	case "resume":
		if t.State == store.TaskCompleted {
			writeErr(w, http.StatusConflict, "id", "task %q is completed: schedule a new one", t.ID)
			return
		}
		if t.State == store.TaskActive {
			writeJSON(w, http.StatusOK, wireTask(t))
			return
		}
		next, err := scheduler.NextRun(string(t.ScheduleKind), t.ScheduleExpr, time.Now(), s.Location)
		if err != nil {
			writeErr(w, http.StatusConflict, "id", "task %q cannot resume: %v: cancel it and schedule a new one", t.ID, err)
			return
		}
		active := store.TaskActive
		p.State, p.NextRunAt = &active, &next
	case "cancel":
		if t.State == store.TaskCompleted {
			writeJSON(w, http.StatusOK, wireTask(t))
			return
		}
		done, none := store.TaskCompleted, int64(0)
		p.State, p.NextRunAt = &done, &none
	}
	t, err := s.store.UpdateTask(r.Context(), t.ID, p)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.log.Info("api: task "+past, logging.FieldTaskID, t.ID, "state", string(t.State), "next_run_at", msTime(t.NextRunAt))
	writeJSON(w, http.StatusOK, wireTask(t))
}
