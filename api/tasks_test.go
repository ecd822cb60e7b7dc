package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/store"
)

// TestTasksAPI: GET /v1/tasks lists the tasks with their filters, pause, resume and cancel
// move a task through its states (resume computes its next run from now), and every
// mistake is a 4xx naming the field.
func TestTasksAPI(t *testing.T) {
	srv, st := messagesServer(t)
	ctx := context.Background()
	future := time.Now().Add(time.Hour).UnixMilli()
	mk := func(folder, kind, expr string, state store.TaskState) *store.Task {
		t.Helper()
		next := int64(0)
		if state == store.TaskActive {
			next = future
		}
		task, err := st.CreateTask(ctx, store.Task{Folder: folder, Prompt: "p " + expr, ScheduleKind: store.ScheduleKind(kind),
			ScheduleExpr: expr, State: state, NextRunAt: next})
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	if _, err := st.UpsertGroup(ctx, store.Group{Folder: "main/research", Parent: "main"}); err != nil {
		t.Fatal(err)
	}
	every := mk("main", "interval", "60000", store.TaskActive)
	cron := mk("main/research", "cron", "0 9 * * *", store.TaskPaused)
	once := mk("main", "once", "2001-01-01T00:00:00Z", store.TaskPaused)

	list := func(query string) []apiwire.Task {
		t.Helper()
		code, body := serve(t, srv, http.MethodGet, "/v1/tasks"+query, "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/tasks%s: %d %s", query, code, body)
		}
		var out struct{ Tasks []apiwire.Task }
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		return out.Tasks
	}
	ids := func(ts []apiwire.Task) (out []string) {
		for _, x := range ts {
			out = append(out, x.ID)
		}
		return out
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", []string{every.ID, once.ID, cron.ID}},
		{"?folder=main", []string{every.ID, once.ID}},
		{"?folder=main%2Fresearch", []string{cron.ID}},
		{"?folder=main-research", []string{cron.ID}},
		{"?state=paused", []string{once.ID, cron.ID}},
		{"?state=completed", nil},
	} {
		// Tasks list by folder, then creation: these were created within a millisecond.
		got := ids(list(c.query))
		slices.Sort(got)
		slices.Sort(c.want)
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("GET /v1/tasks%s = %v, want %v", c.query, got, c.want)
		}
	}

	verb := func(id, v string) (int, apiwire.Task, string) {
		t.Helper()
		code, body := serve(t, srv, http.MethodPost, "/v1/tasks/"+id+"/"+v, "")
		var task apiwire.Task
		if code == http.StatusOK {
			if err := json.Unmarshal([]byte(body), &task); err != nil {
				t.Fatal(err)
			}
		}
		return code, task, body
	}
	if code, task, body := verb(every.ID, "pause"); code != http.StatusOK || task.State != "paused" {
		t.Errorf("pause: %d %s", code, body)
	}
	before := time.Now()
	code, task, body := verb(cron.ID, "resume")
	if code != http.StatusOK || task.State != "active" {
		t.Fatalf("resume: %d %s", code, body)
	}
	if next, err := time.Parse(time.RFC3339Nano, task.NextRunAt); err != nil || !next.After(before) {
		t.Errorf("resumed task's nextRunAt %q, want a time after now", task.NextRunAt)
	}
	if code, task, body := verb(cron.ID, "resume"); code != http.StatusOK || task.State != "active" {
		t.Errorf("resume of an active task: %d %s", code, body)
	}
	for _, v := range []string{"cancel", "cancel"} {
		if code, task, body := verb(every.ID, v); code != http.StatusOK || task.State != "completed" || task.NextRunAt != "" {
			t.Errorf("%s: %d %s", v, code, body)
		}
	}
	if code, body := serve(t, srv, http.MethodGet, "/v1/tasks/"+every.ID, ""); code != http.StatusOK || !strings.Contains(body, `"completed"`) {
		t.Errorf("GET the cancelled task: %d %s", code, body)
	}

	for _, c := range []struct {
		method, path string
		code         int
		field, text  string
	}{
		{http.MethodGet, "/v1/tasks?state=done", 400, "state", "not active, paused or completed"},
		{http.MethodGet, "/v1/tasks?folder=..%2Fetc", 400, "folder", ""},
		{http.MethodGet, "/v1/tasks/t_nope", 404, "id", "GET /v1/tasks lists them"},
		{http.MethodPost, "/v1/tasks/t_nope/pause", 404, "id", "no task"},
		{http.MethodPost, "/v1/tasks/" + once.ID + "/delete", 404, "verb", "not pause, resume or cancel"},
		{http.MethodPost, "/v1/tasks/" + every.ID + "/resume", 409, "id", "schedule a new one"},
		{http.MethodPost, "/v1/tasks/" + every.ID + "/pause", 409, "id", "completed"},
		{http.MethodPost, "/v1/tasks/" + once.ID + "/resume", 409, "id", "cannot resume"},
	} {
		code, body := serve(t, srv, c.method, c.path, "")
		var e struct{ Error, Field string }
		json.Unmarshal([]byte(body), &e)
		if code != c.code || e.Field != c.field || !strings.Contains(e.Error, c.text) {
			t.Errorf("%s %s: %d %s, want %d naming %q with %q", c.method, c.path, code, body, c.code, c.field, c.text)
		}
	}
	if got, _ := st.GetTask(ctx, once.ID); got.State != store.TaskPaused {
		t.Errorf("a refused resume changed the task: %+v", got)
	}
}

// TestInboxList: GET /v1/groups/{folder}/messages shows the pending messages with their
// chat and sender and the cursor's state (parked and why); mistakes name the field.
func TestInboxList(t *testing.T) {
	srv, st := messagesServer(t)
	ctx := context.Background()
	if code, body := serve(t, srv, http.MethodPost, "/v1/groups/main/messages",
		`{"senderJid":"cli:ann","chatJid":"cli:ann","messages":[{"content":"one"},{"content":"two"}]}`); code != http.StatusAccepted {
		t.Fatalf("append: %d %s", code, body)
	}
	if _, err := st.Park(ctx, "main", "agent image missing"); err != nil {
		t.Fatal(err)
	}
	code, body := serve(t, srv, http.MethodGet, "/v1/groups/main/messages?limit=1", "")
	var in apiwire.Inbox
	if code != http.StatusOK || json.Unmarshal([]byte(body), &in) != nil {
		t.Fatalf("list: %d %s", code, body)
	}
	if in.Folder != "main" || in.LastDoneID != 0 || in.ParkedReason != "agent image missing" || in.ParkedAt == "" ||
		len(in.Pending) != 1 || in.Pending[0].Content != "one" || in.Pending[0].ChatJID != "cli:ann" ||
		in.Pending[0].SenderJID != "cli:ann" || in.Pending[0].Source != "api" {
		t.Errorf("inbox = %+v", in)
	}
	for _, c := range []struct {
		path        string
		code        int
		field, text string
	}{
		{"/v1/groups/main/messages?limit=0", 400, "limit", "whole number"},
		{"/v1/groups/main/messages?limit=x", 400, "limit", "whole number"},
		{"/v1/groups/nope/messages", 404, "folder", "register it first"},
		{"/v1/groups/Main!/messages", 400, "folder", ""},
	} {
		code, body := serve(t, srv, http.MethodGet, c.path, "")
		var e struct{ Error, Field string }
		json.Unmarshal([]byte(body), &e)
		if code != c.code || e.Field != c.field || !strings.Contains(e.Error, c.text) {
			t.Errorf("GET %s: %d %s, want %d naming %q with %q", c.path, code, body, c.code, c.field, c.text)
		}
	}
}
