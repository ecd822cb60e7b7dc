package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/queue"
	"github.com/arizuko/arizukod/store"
)

func msTime(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

func wireRun(r *store.Run) apiwire.Run {
	return apiwire.Run{
		ID: r.ID, Folder: r.Folder, Kind: string(r.Kind), TaskID: r.TaskID, Container: r.Container,
		State: string(r.State), Status: string(r.Status), Failure: string(r.Failure), Terminal: r.Terminal,
		ExitCode: r.ExitCode, Error: r.Error, Result: r.Result, NewSessionID: r.NewSessionID,
		Attempt: r.Attempt, InboxFirst: r.InboxFirst, InboxLast: r.InboxLast, TimeoutMs: r.TimeoutMS,
		CreatedAt: msTime(r.CreatedAt), StartedAt: msTime(r.StartedAt), EndedAt: msTime(r.EndedAt),
		Usage: wireUsage(r.Usage),
	}
}

func wireUsage(u store.Usage) *apiwire.Usage {
	if u == (store.Usage{}) {
		return nil
	}
	w := apiwire.Usage(u)
	return &w
}

// withEgress adds the run's egress and the phases of its turn to its answer.
func (s *Server) withEgress(ctx context.Context, run *store.Run) (apiwire.Run, error) {
	out := wireRun(run)
	eg, err := s.store.RunEgress(ctx, run.ID)
	if err != nil {
		return out, err
	}
	for _, e := range eg {
		out.Egress = append(out.Egress, apiwire.Egress(e))
	}
	p, err := s.store.RunPhases(ctx, run.ID)
	if err != nil {
		return out, err
	}
	out.Phases = wirePhases(run, p)
	return out, nil
}

// wirePhases are the phases of run's turn, with its wait in the queue; nil before it
// started.
func wirePhases(run *store.Run, p *store.Phases) *apiwire.Phases {
	if run.StartedAt == 0 {
		return nil
	}
	w := &apiwire.Phases{QueueWaitMs: max(0, run.StartedAt-run.CreatedAt)}
	if p != nil {
		w.PrepareMs, w.SidecarsMs, w.CreateMs = &p.PrepareMS, &p.SidecarsMS, &p.CreateMS
		w.StartMs, w.RunMs, w.FinishMs = &p.StartMS, &p.RunMS, &p.FinishMS
	}
	return w
}

func (s *Server) createRun(w http.ResponseWriter, r *http.Request) {
	var req apiwire.CreateRunRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Folder == "" {
		writeErr(w, http.StatusBadRequest, "folder", "folder: required")
		return
	}
	f, err := parseFolder(req.Folder)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "folder", "%v", err)
		return
	}
	if !messagesField(w, "messages", req.Messages) || !jidField(w, "senderJid", req.SenderJID) || !jidField(w, "chatJid", req.ChatJID) {
		return
	}
	var timeoutMS int64
	if req.Timeout != nil {
		d := time.Duration(*req.Timeout)
		if d < time.Second || d > 24*time.Hour {
			writeErr(w, http.StatusBadRequest, "timeout", "timeout: %s is outside 1s..24h", d)
			return
		}
		timeoutMS = d.Milliseconds()
	}
	if !s.knownGroup(w, r, f) {
		return
	}
	input, err := json.Marshal(queue.RunInput{Messages: req.Messages, SessionID: req.SessionID, SenderJID: req.SenderJID, ChatJID: req.ChatJID})
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if len(input) > contract.MaxInputBytes/2 {
		writeErr(w, http.StatusRequestEntityTooLarge, "messages", "messages: %d bytes leave no room for the system prompt in the 1 MiB turn input", len(input))
		return
	}
	run, err := s.store.CreateRun(r.Context(), store.Run{Folder: string(f), Input: input, TimeoutMS: timeoutMS})
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.queue.Wake()
	writeJSON(w, http.StatusAccepted, wireRun(run))
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > maxWait {
			writeErr(w, http.StatusBadRequest, "wait", "wait: %q is not a duration from 0 to %s", v, maxWait)
			return
		}
		wait = d
	}
	run, err := s.awaitRun(r.Context(), id, wait)
	if errors.Is(err, store.ErrNotFound) {
		writeErr(w, http.StatusNotFound, "id", "no run %q", id)
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out, err := s.withEgress(r.Context(), run)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// awaitRun reads run id once it is final or wait is over, woken only when that run's turn
// ends.
func (s *Server) awaitRun(ctx context.Context, id string, wait time.Duration) (*store.Run, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		ended, release := s.queue.Ended(id)
		run, err := s.store.GetRun(ctx, id)
		if err != nil || run.State.Final() || wait == 0 || wctx.Err() != nil {
			release()
			return run, err
		}
		select {
		case <-ended:
		case <-wctx.Done():
		}
		release()
	}
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter := store.RunFilter{State: store.RunState(q.Get("state"))}
	switch filter.State {
	case "", store.RunQueued, store.RunRunning, store.RunExited, store.RunError, store.RunKilled:
	default:
		writeErr(w, http.StatusBadRequest, "state", "state: %q is not queued, running, exited, error or killed", filter.State)
		return
	}
	if v := q.Get("folder"); v != "" {
		f, err := parseFolder(v)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "folder", "%v", err)
			return
		}
		filter.Folder = string(f)
	}
	limit, ok := queryInt(w, r, "limit", 100, 1, 10000)
	if !ok {
		return
	}
	filter.Limit = int(limit)
	runs, err := s.store.ListRuns(r.Context(), filter)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := make([]apiwire.Run, 0, len(runs))
	for i := range runs {
		out = append(out, wireRun(&runs[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out})
}

func (s *Server) killRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	run, err := s.store.RequestKill(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeErr(w, http.StatusNotFound, "id", "no run %q", id)
		return
	case errors.Is(err, store.ErrConflict):
		writeErr(w, http.StatusConflict, "id", "run %q has already ended", id)
		return
	case err != nil:
		s.internal(w, r, err)
		return
	}
	if run.State == store.RunRunning {
		s.queue.Kill(id)
	}
	writeJSON(w, http.StatusAccepted, wireRun(run))
}

func (s *Server) steerRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req apiwire.SteerRequest
	if !decode(w, r, &req) || !messagesField(w, "messages", req.Messages) {
		return
	}
	err := s.queue.Steer(r.Context(), id, req.Messages)
	if errors.Is(err, queue.ErrNotRunning) {
		if _, gerr := s.store.GetRun(r.Context(), id); errors.Is(gerr, store.ErrNotFound) {
			writeErr(w, http.StatusNotFound, "id", "no run %q", id)
			return
		}
		writeErr(w, http.StatusConflict, "id", "run %q is not running (queued, starting, being killed or ended): steer a run while it runs, or queue a new one", id)
		return
	}
	if errors.Is(err, errors.ErrUnsupported) {
		// Kubernetes has no signal API: the runner took the messages back.
		writeErr(w, http.StatusNotImplemented, "", "run %q cannot be steered on this engine (%v): nothing was delivered; send the messages as the group's next turn", id, err)
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"id": id, "steered": len(req.Messages)})
}
