package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/store"
)

// badRequest is one hostile or mistaken request and the answer it must get.
type badRequest struct {
	name   string
	method string
	path   string
	ctype  string // "" sends application/json when there is a body
	body   string
	code   int
	field  string // the field the error must name; "" when there is none to name
	// plain: the answer comes from the router, before any handler: a 4xx, not JSON.
	plain bool
}

func badRequests(finished, running string) []badRequest {
	msgs := `"messages":[{"content":"reply x"}]`
	huge := `{"folder":"main","messages":[{"content":"` + strings.Repeat("A", apiwire.MaxBody) + `"}]}`
	big := `{"folder":"main","messages":[{"content":"` + strings.Repeat("B", contract.MaxInputBytes/2) + `"}]}`
	deep := `{"folder":"main","messages":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`
	long := strings.Repeat("a", 300)
	run := func(name, body string, code int, field string) badRequest {
		return badRequest{name: name, method: http.MethodPost, path: "/v1/runs", body: body, code: code, field: field}
	}
	folder := func(name, f string) badRequest {
		b, _ := json.Marshal(f)
		return run("folder "+name, `{"folder":`+string(b)+`,`+msgs+`}`, http.StatusBadRequest, "folder")
	}
	network := func(name string, n any) badRequest {
		b, _ := json.Marshal(n)
		return badRequest{name: "containerConfig network " + name, method: http.MethodPost, path: "/v1/groups",
			body: `{"folder":"newg","containerConfig":{"network":` + string(b) + `}}`, code: 400, field: "containerConfig.network"}
	}
	runtime := func(name string, rt any) badRequest {
		b, _ := json.Marshal(rt)
		return badRequest{name: "containerConfig runtime " + name, method: http.MethodPost, path: "/v1/groups",
			body: `{"folder":"newg","containerConfig":{"runtime":` + string(b) + `}}`, code: 400, field: "containerConfig.runtime"}
	}
	return []badRequest{
		run("folder a number", `{"folder":5,`+msgs+`}`, 400, "folder"),
		run("messages a string", `{"folder":"main","messages":"x"}`, 400, "messages"),
		run("message a number", `{"folder":"main","messages":[5]}`, 400, "messages"),
		run("content an object", `{"folder":"main","messages":[{"content":{}}]}`, 400, "messages.content"),
		run("timeout a boolean", `{"folder":"main",`+msgs+`,"timeout":true}`, 400, "timeout"),
		run("timeout not a duration", `{"folder":"main",`+msgs+`,"timeout":"soon"}`, 400, "timeout"),
		run("timeout too short", `{"folder":"main",`+msgs+`,"timeout":"1ms"}`, 400, "timeout"),
		run("timeout too long", `{"folder":"main",`+msgs+`,"timeout":"25h"}`, 400, "timeout"),
		run("timeout negative", `{"folder":"main",`+msgs+`,"timeout":-5000}`, 400, "timeout"),
		run("sessionId a number", `{"folder":"main",`+msgs+`,"sessionId":5}`, 400, "sessionId"),
		run("no folder", `{`+msgs+`}`, 400, "folder"),
		run("no messages", `{"folder":"main"}`, 400, "messages"),
		run("empty messages", `{"folder":"main","messages":[]}`, 400, "messages"),
		run("empty content", `{"folder":"main","messages":[{"content":"  "}]}`, 400, "messages[0].content"),
		run("bad role", `{"folder":"main","messages":[{"content":"x","role":"robot"}]}`, 400, "messages[0].role"),
		run("unknown field", `{"folder":"main",`+msgs+`,"image":"evil"}`, 400, "image"),
		run("unknown field in a message", `{"folder":"main","messages":[{"content":"x","tool":"rm"}]}`, 400, "tool"),
		run("empty body", ``, 400, ""),
		run("null", `null`, 400, "folder"),
		run("an array", `[]`, 400, ""),
		run("trailing garbage", `{"folder":"main",`+msgs+`} x`, 400, ""),
		run("two objects", `{"folder":"main",`+msgs+`}{}`, 400, ""),
		run("malformed JSON", `{"folder":"main",`, 400, ""),
		run("nested too deep", deep, 400, ""),
		run("body over 1 MiB", huge, http.StatusRequestEntityTooLarge, ""),
		run("input over half the turn input", big, http.StatusRequestEntityTooLarge, "messages"),
		folder("traversal", "../etc"),
		folder("absolute", "/abs"),
		folder("dotdot inside", "main/../x"),
		folder("uppercase", "Main"),
		folder("empty segment", "main//a"),
		folder("reserved share", "main/share"),
		folder("NUL", "main\x00"),
		folder("300 bytes", long),
		folder("trailing slash", "main/"),
		folder("backslash", `main\x`),
		folder("non-ASCII", "maín"),
		folder("slug of a traversal", "main-..-x"),
		run("unknown folder", `{"folder":"nosuch",`+msgs+`}`, 404, "folder"),
		{name: "text/plain", method: "POST", path: "/v1/runs", ctype: "text/plain", body: `{"folder":"main",` + msgs + `}`, code: 415},
		{name: "form", method: "POST", path: "/v1/runs", ctype: "application/x-www-form-urlencoded", body: `folder=main`, code: 415},

		{name: "unknown run", method: "GET", path: "/v1/runs/r_0000000000000000", code: 404, field: "id"},
		{name: "unknown run with traversal", method: "GET", path: "/v1/runs/..%2F..%2Fetc", code: 404, field: "id"},
		{name: "kill unknown run", method: "DELETE", path: "/v1/runs/r_0000000000000000", code: 404, field: "id"},
		{name: "kill finished run", method: "DELETE", path: "/v1/runs/" + finished, code: 409, field: "id"},
		{name: "steer unknown run", method: "POST", path: "/v1/runs/r_0000000000000000/steer", body: `{"messages":[{"content":"x"}]}`, code: 404, field: "id"},
		{name: "steer finished run", method: "POST", path: "/v1/runs/" + finished + "/steer", body: `{"messages":[{"content":"x"}]}`, code: 409, field: "id"},
		{name: "steer without messages", method: "POST", path: "/v1/runs/" + running + "/steer", body: `{"messages":[]}`, code: 400, field: "messages"},
		{name: "steer unknown field", method: "POST", path: "/v1/runs/" + running + "/steer", body: `{"messages":[{"content":"x"}],"signal":"KILL"}`, code: 400, field: "signal"},
		{name: "wait not a duration", method: "GET", path: "/v1/runs/" + finished + "?wait=abc", code: 400, field: "wait"},
		{name: "wait negative", method: "GET", path: "/v1/runs/" + finished + "?wait=-1s", code: 400, field: "wait"},
		{name: "wait too long", method: "GET", path: "/v1/runs/" + finished + "?wait=11m", code: 400, field: "wait"},
		{name: "usage since not a date", method: "GET", path: "/v1/usage?since=yesterday", code: 400, field: "since"},
		{name: "usage since in the future", method: "GET", path: "/v1/usage?since=2999-01-01", code: 400, field: "since"},
		{name: "usage folder a traversal", method: "GET", path: "/v1/usage?folder=..%2Fx", code: 400, field: "folder"},
		{name: "limit zero", method: "GET", path: "/v1/runs?limit=0", code: 400, field: "limit"},
		{name: "limit a word", method: "GET", path: "/v1/runs?limit=many", code: 400, field: "limit"},
		{name: "limit huge", method: "GET", path: "/v1/runs?limit=99999999999999999999", code: 400, field: "limit"},
		{name: "state unknown", method: "GET", path: "/v1/runs?state=done", code: 400, field: "state"},
		{name: "list folder traversal", method: "GET", path: "/v1/runs?folder=..%2Fetc", code: 400, field: "folder"},

		{name: "inbox folder traversal", method: "POST", path: "/v1/groups/..%2Fetc/messages", body: `{` + msgs + `}`, code: 400, field: "folder"},
		{name: "inbox folder uppercase", method: "POST", path: "/v1/groups/Main/messages", body: `{` + msgs + `}`, code: 400, field: "folder"},
		{name: "inbox folder NUL", method: "POST", path: "/v1/groups/main%00/messages", body: `{` + msgs + `}`, code: 400, field: "folder"},
		{name: "inbox unknown folder", method: "POST", path: "/v1/groups/nosuch/messages", body: `{` + msgs + `}`, code: 404, field: "folder"},
		{name: "inbox no messages", method: "POST", path: "/v1/groups/main/messages", body: `{}`, code: 400, field: "messages"},
		{name: "inbox unknown field", method: "POST", path: "/v1/groups/main/messages", body: `{` + msgs + `,"folder":"other"}`, code: 400, field: "folder"},
		{name: "unpark unknown folder", method: "POST", path: "/v1/groups/nosuch/unpark", code: 404, field: "folder"},
		{name: "get unknown group", method: "GET", path: "/v1/groups/nosuch", code: 404, field: "folder"},
		{name: "remove group without by", method: "DELETE", path: "/v1/groups/main", body: `{}`, code: 400, field: "by"},
		{name: "remove group by with a newline", method: "DELETE", path: "/v1/groups/main", body: `{"by":"cli:x\n"}`, code: 400, field: "by"},
		{name: "remove group unknown field", method: "DELETE", path: "/v1/groups/main", body: `{"by":"cli:x","force":true}`, code: 400, field: "force"},
		{name: "remove group traversal", method: "DELETE", path: "/v1/groups/..%2Fetc", body: `{"by":"cli:x"}`, code: 400, field: "folder"},
		{name: "remove unknown group", method: "DELETE", path: "/v1/groups/nosuch", body: `{"by":"cli:x"}`, code: 404, field: "folder"},
		{name: "remove group with a run running", method: "DELETE", path: "/v1/groups/kill", body: `{"by":"cli:x"}`, code: 409, field: "folder"},
		{name: "removal of an unknown group", method: "GET", path: "/v1/groups/nosuch/removal", code: 404, field: "folder"},

		{name: "group without folder", method: "POST", path: "/v1/groups", body: `{}`, code: 400, field: "folder"},
		{name: "group folder traversal", method: "POST", path: "/v1/groups", body: `{"folder":"../x"}`, code: 400, field: "folder"},
		{name: "group without parent", method: "POST", path: "/v1/groups", body: `{"folder":"orphan/child"}`, code: 400, field: "folder"},
		{name: "containerConfig unknown field", method: "POST", path: "/v1/groups", body: `{"folder":"newg","containerConfig":{"privileged":true}}`, code: 400, field: "containerConfig"},
		{name: "containerConfig negative timeout", method: "POST", path: "/v1/groups", body: `{"folder":"newg","containerConfig":{"timeout":-1}}`, code: 400, field: "containerConfig.timeout"},
		{name: "containerConfig bad memory", method: "POST", path: "/v1/groups", body: `{"folder":"newg","containerConfig":{"memory":"lots"}}`, code: 400, field: "containerConfig.memory"},
		{name: "containerConfig a string", method: "POST", path: "/v1/groups", body: `{"folder":"newg","containerConfig":"x"}`, code: 400, field: "containerConfig"},
		{name: "containerConfig deliver_result a string", method: "POST", path: "/v1/groups", body: `{"folder":"newg","containerConfig":{"deliver_result":"no"}}`, code: 400, field: "containerConfig.deliver_result"},
		network("host", "host"),
		network("container id", "container:4f1c2a9b"),
		network("another container's name", "container:arizuko-main-1700000000000"),
		network("namespace path", "ns:/proc/1/ns/net"),
		network("namespace of pid 1 by netns", "netns:/proc/1/ns/net"),
		network("private", "private"),
		network("uppercase host", "HOST"),
		network("not allowed", "lab"),
		network("allowed with options", allowedNetwork+":ip=10.0.0.9"),
		network("slirp4netns with options", "slirp4netns:allow_host_loopback=true"),
		network("two networks", "bridge,host"),
		network("junk", "a b;c"),
		network("a number", 5),
		network("an object", map[string]string{"mode": "host"}),
		runtime("not allowed", "crun"),
		runtime("a path", "/usr/bin/runsc"),
		runtime("a number", 5),
		{name: "containerConfig sidecar on the host network", method: "POST", path: "/v1/groups", body: `{"folder":"newg","containerConfig":{"sidecars":[{"name":"a","image":"i","network":"host"}]}}`, code: 400, field: "containerConfig.sidecars"},
		{name: "containerConfig sidecar quadlet on a namespace", method: "POST", path: "/v1/groups", body: `{"folder":"newg","containerConfig":{"sidecars":[{"name":"a","quadlet":"[Container]\nImage=i\nNetwork=ns:/proc/1/ns/net\n"}]}}`, code: 400, field: "containerConfig.sidecars"},
		{name: "grants unknown tool", method: "PUT", path: "/v1/groups/main/grants", body: `{"rules":["no_such_tool"]}`, code: 400, field: "rules"},
		{name: "grants unterminated", method: "PUT", path: "/v1/groups/main/grants", body: `{"rules":["send_message(to="]}`, code: 400, field: "rules"},
		{name: "grants missing", method: "PUT", path: "/v1/groups/main/grants", body: `{}`, code: 400, field: "rules"},
		{name: "grants a string", method: "PUT", path: "/v1/groups/main/grants", body: `{"rules":"*"}`, code: 400, field: "rules"},
		{name: "grants unknown folder", method: "PUT", path: "/v1/groups/nosuch/grants", body: `{"rules":[]}`, code: 404, field: "folder"},
		{name: "outbox bad since", method: "GET", path: "/v1/groups/main/outbox?since=-1", code: 400, field: "since"},

		{name: "operator route without seq", method: "POST", path: "/v1/routes", body: `{"match":"","target":"main"}`, code: 400, field: "seq"},
		{name: "operator route seq a string", method: "POST", path: "/v1/routes", body: `{"seq":"1","match":"","target":"main"}`, code: 400, field: "seq"},
		{name: "operator route without match", method: "POST", path: "/v1/routes", body: `{"seq":1,"target":"main"}`, code: 400, field: "match"},
		{name: "operator route bad match", method: "POST", path: "/v1/routes", body: `{"seq":1,"match":"room = 5","target":"main"}`, code: 400, field: "match"},
		{name: "operator route unknown key", method: "POST", path: "/v1/routes", body: `{"seq":1,"match":"channel=x","target":"main"}`, code: 400, field: "match"},
		{name: "operator route target traversal", method: "POST", path: "/v1/routes", body: `{"seq":1,"match":"","target":"../etc"}`, code: 400, field: "target"},
		{name: "operator route unknown target", method: "POST", path: "/v1/routes", body: `{"seq":1,"match":"","target":"nosuch"}`, code: 400, field: "target"},
		{name: "operator route with an owner", method: "POST", path: "/v1/routes", body: `{"seq":1,"match":"","target":"main","owner":"main"}`, code: 400, field: "owner"},
		{name: "operator route match invalid UTF-8", method: "POST", path: "/v1/routes", body: "{\"seq\":1,\"match\":\"room=\xff\",\"target\":\"main\"}", code: 400, field: "match"},
		{name: "operator route match lone surrogate", method: "POST", path: "/v1/routes", body: `{"seq":1,"match":"room=\ud800","target":"main"}`, code: 400, field: "match"},
		{name: "operator route match invalid UTF-8, field in capitals", method: "POST", path: "/v1/routes", body: "{\"seq\":1,\"MATCH\":\"room=\xc3\",\"target\":\"main\"}", code: 400, field: "match"},
		{name: "grants invalid UTF-8", method: "PUT", path: "/v1/groups/main/grants", body: "{\"rules\":[\"*\",\"send_message(chat_jid=\xff)\"]}", code: 400, field: "rules[1]"},
		{name: "delete route not a number", method: "DELETE", path: "/v1/routes/x", code: 400, field: "id"},
		{name: "delete unknown route", method: "DELETE", path: "/v1/routes/999999", code: 404, field: "id"},
		{name: "inbox chatJid with a newline", method: "POST", path: "/v1/groups/main/messages", body: `{` + msgs + `,"chatJid":"tg:1\n"}`, code: 400, field: "chatJid"},
		{name: "inbox message time", method: "POST", path: "/v1/groups/main/messages", body: `{"messages":[{"content":"x","time":"2030-01-02T15:04:05Z"}]}`, code: 400, field: "messages[0].time"},
		run("chatJid too long", `{"folder":"main",`+msgs+`,"chatJid":"`+long+`"}`, 400, "chatJid"),
		{name: "route chatJid too long", method: "POST", path: "/v1/messages", body: `{"platform":"test","chatJid":"` + long + `","content":"x"}`, code: 400, field: "chatJid"},
		{name: "route without content", method: "POST", path: "/v1/messages", body: `{"platform":"test"}`, code: 400, field: "content"},
		{name: "route matches nothing", method: "POST", path: "/v1/messages", body: `{"platform":"nowhere","room":"r","content":"hi"}`, code: 422},

		{name: "unknown path", method: "GET", path: "/v1/nothing", code: 404, plain: true},
		{name: "wrong method", method: "PUT", path: "/v1/runs", body: `{}`, code: 405, plain: true},
	}
}

// TestBadInput sends every request of the table to the API over a real store, with a run
// that finished and one that is running: each gets its 4xx with a JSON error naming the
// field, never a 500, and nothing is created: no run, group, inbox message, grant or route.
func TestBadInput(t *testing.T) {
	srv, st := messagesServer(t)
	srv.Networks = []string{allowedNetwork}
	srv.Runtimes = []string{"runsc"}
	ctx := context.Background()
	if _, err := st.UpsertGroup(ctx, store.Group{Folder: "kill"}); err != nil {
		t.Fatal(err)
	}
	finished, running := storedRun(t, st, "main", true), storedRun(t, st, "kill", false)
	runsBefore, groupsBefore, routesBefore := counts(t, st)
	table := badRequests(finished, running)
	for _, c := range table {
		t.Run(c.name, func(t *testing.T) {
			var body string
			req := httptest.NewRequest(c.method, "http://arizukod"+c.path, strings.NewReader(c.body))
			if c.body != "" || c.method == http.MethodPost {
				body = c.body
				ctype := c.ctype
				if ctype == "" {
					ctype = "application/json"
				}
				req.Header.Set("Content-Type", ctype)
			}
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, req)
			if w.Code != c.code {
				t.Errorf("%s %s %.80q: HTTP %d %s, want %d", c.method, c.path, body, w.Code, w.Body, c.code)
			}
			if c.plain {
				return
			}
			var e struct {
				Error string `json:"error"`
				Field string `json:"field"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Errorf("%s %s: not a JSON error: %q (%v)", c.method, c.path, w.Body, err)
			}
			if e.Field != c.field {
				t.Errorf("%s %s: field %q, want %q (error %q)", c.method, c.path, e.Field, c.field, e.Error)
			}
		})
	}
	runsAfter, groupsAfter, routesAfter := counts(t, st)
	if runsAfter != runsBefore || groupsAfter != groupsBefore || routesAfter != routesBefore {
		t.Errorf("the table made runs, groups or routes: %d/%d/%d before, %d/%d/%d after",
			runsBefore, groupsBefore, routesBefore, runsAfter, groupsAfter, routesAfter)
	}
	if pending, err := st.PendingInbox(ctx, "main", 0); err != nil || len(pending) != 0 {
		t.Errorf("the table appended to main's inbox: %+v %v", pending, err)
	}
	if rules, err := st.GetGrants(ctx, "main"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the table set main's grants: %v %v", rules, err)
	}
	if r, err := st.GetRun(ctx, running); err != nil || r.State != store.RunRunning || r.KillRequestedAt != 0 {
		t.Errorf("the running run after the table: %+v %v, want it running, not killed", r, err)
	}
	t.Logf("bad input: %d requests refused, no run, group, message, grant or route made", len(table))
}

// storedRun makes a run of folder in the store: started and, when finished, ended ok.
func storedRun(t *testing.T, st *store.Store, folder string, finished bool) string {
	t.Helper()
	ctx := context.Background()
	in, _ := json.Marshal(map[string]any{"messages": []contract.Message{{Role: "user", Content: "x"}}})
	r, err := st.CreateRun(ctx, store.Run{Folder: folder, Input: in})
	if err != nil {
		t.Fatal(err)
	}
	started, err := st.StartNext(ctx, 5)
	if err != nil || started == nil || started.ID != r.ID {
		t.Fatalf("start %s: %+v %v", r.ID, started, err)
	}
	if finished {
		if _, err := st.FinishRun(ctx, r.ID, store.Outcome{State: store.RunExited, Status: store.StatusOK}); err != nil {
			t.Fatal(err)
		}
	}
	return r.ID
}

// counts are the numbers of runs, groups and routes in st.
func counts(t *testing.T, st *store.Store) (runs, groups, routes int) {
	t.Helper()
	ctx := context.Background()
	rs, err := st.ListRuns(ctx, store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := st.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ros, err := st.ListRoutes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return len(rs), len(gs), len(ros)
}
