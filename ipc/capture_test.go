package ipc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/ipc"
	"github.com/arizuko/arizukod/queue"
	"github.com/arizuko/arizukod/store"
)

// operator is the daemon's real API handler over the env's store: the path of
// POST /v1/messages, POST /v1/routes and PUT /v1/groups/{folder}/grants.
type operator struct{ srv *api.Server }

// idleQueue runs nothing: routing writes inboxes, turns are not the point here.
type idleQueue struct{}

func (idleQueue) Wake()            {}
func (idleQueue) Kill(string) bool { return false }
func (idleQueue) Steer(context.Context, string, []contract.Message) error {
	return queue.ErrNotRunning
}
func (idleQueue) Ended(string) (<-chan struct{}, func()) { return nil, func() {} }

type okHealth struct{}

func (okHealth) Health(context.Context) apiwire.HealthReport {
	return apiwire.HealthReport{Status: "ok"}
}

func newOperator(e *env) operator {
	return operator{srv: api.New(e.st, idleQueue{}, okHealth{}, slog.New(slog.NewTextHandler(io.Discard, nil)))}
}

// do sends one request and decodes the JSON answer into out (when not nil),
// failing unless the status is code.
func (o operator) do(t testing.TB, method, path string, body any, code int, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(method, "http://arizukod"+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	o.srv.ServeHTTP(w, req)
	if w.Code != code {
		t.Fatalf("%s %s %s: HTTP %d %s, want %d", method, path, b, w.Code, w.Body, code)
	}
	if out != nil {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, w.Body)
		}
	}
}

func (o operator) addRoute(t testing.TB, seq int64, match, target string) int64 {
	t.Helper()
	var r apiwire.Route
	o.do(t, http.MethodPost, "/v1/routes", apiwire.AddRouteRequest{Seq: &seq, Match: &match, Target: target}, http.StatusCreated, &r)
	if r.Owner != "" || r.Target != target {
		t.Fatalf("operator route %+v", r)
	}
	return r.ID
}

func (o operator) grant(t testing.TB, folder string, rules ...string) {
	t.Helper()
	o.do(t, http.MethodPut, "/v1/groups/"+strings.ReplaceAll(folder, "/", "%2F")+"/grants", apiwire.GrantsRequest{Rules: rules}, http.StatusOK, nil)
}

// deliver posts an inbound message and returns the folder it reached, or ""
// when no route takes it (422).
func (o operator) deliver(t testing.TB, msg apiwire.InboundMessage) string {
	t.Helper()
	b, _ := json.Marshal(msg)
	req := httptest.NewRequest(http.MethodPost, "http://arizukod/v1/messages", bytes.NewReader(b))
	w := httptest.NewRecorder()
	o.srv.ServeHTTP(w, req)
	switch w.Code {
	case http.StatusUnprocessableEntity:
		return ""
	case http.StatusAccepted:
		var out struct{ Folder string }
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		return out.Folder
	}
	t.Fatalf("POST /v1/messages %s: HTTP %d %s", b, w.Code, w.Body)
	return ""
}

// captureAttempt is one way a group might try to take messages that are not
// its own, and the answer it must get: "" when the call is allowed (it must
// then change nothing outside the group's own routing), else the refusal.
type captureAttempt struct {
	name   string
	folder string
	tool   string
	args   func(ids map[string]int64) map[string]any
	refuse string
}

// runCapture sets up the operator's routes and main's own refinement, lets
// groups of both trees try every way of taking messages outside their
// subtree, checks each refusal left the store as it was, then routes
// messages through POST /v1/messages and checks each reaches its owner. It
// ends with a forward across trees, in force exactly while the operator's
// grant is. callerOf gives a client of a group's MCP server: in-process or
// from inside a container.
func runCapture(t *testing.T, e *env, callerOf func(folder string) caller) {
	op := newOperator(e)
	ids := map[string]int64{
		"op-main":   op.addRoute(t, 10, "platform=tg room=main", "main"),
		"op-z":      op.addRoute(t, 10, "platform=tg room=z", "main/z"),
		"op-other":  op.addRoute(t, 10, "platform=tg room=other", "other"),
		"op-a":      op.addRoute(t, 20, "room=a", "main/a"),
		"op-all":    op.addRoute(t, 1000, "", "main"),
		"op-other2": op.addRoute(t, 30, "room=o2", "other/a"),
	}
	r := mustOK(t, "main's own route", callerOf("main").call(t, "set_routes", map[string]any{"routes": []any{
		map[string]any{"seq": 1, "match": "verb=mention", "target": "main/a/b"},
	}}))
	ids["main-b"] = int64(r["routes"].([]any)[0].(map[string]any)["id"].(float64))
	r = mustOK(t, "other/a's own route", callerOf("other/a").call(t, "add_route", map[string]any{"seq": 1, "match": "", "target": "other/a/b"}))
	ids["other-a-b"] = int64(r["id"].(float64))

	catchAll := func(target string) func(map[string]int64) map[string]any {
		return func(map[string]int64) map[string]any {
			return map[string]any{"seq": math.MinInt64, "match": "", "target": target}
		}
	}
	setAll := func(target string) func(map[string]int64) map[string]any {
		return func(map[string]int64) map[string]any {
			return map[string]any{"routes": []any{map[string]any{"seq": math.MinInt64, "match": "", "target": target}}}
		}
	}
	noRoutes := func(map[string]int64) map[string]any { return map[string]any{"routes": []any{}} }
	del := func(key string) func(map[string]int64) map[string]any {
		return func(ids map[string]int64) map[string]any { return map[string]any{"id": ids[key]} }
	}
	outside := func(f, target string) string {
		return fmt.Sprintf("denied: add_route acts only inside %s's subtree (%s and the groups below it), and target %s is outside it", f, f, target)
	}
	attempts := []captureAttempt{
		{"a root's catch-all into another root", "other", "add_route", catchAll("main"), outside("other", "main")},
		{"a root's catch-all below another root", "other", "add_route", catchAll("main/a/b"), outside("other", "main/a/b")},
		{"a root sets routes into another root", "other", "set_routes", setAll("main"), "denied: set_routes sets routes to other and the groups below it only"},
		{"a root deletes the operator's route to another root", "other", "delete_route", del("op-main"), "not found"},
		{"a root deletes another root's own route", "other", "delete_route", del("main-b"), "not found"},
		{"a root's empty set_routes keeps the operator's and its children's", "other", "set_routes", noRoutes, ""},
		{"a root's catch-all to itself takes only its own messages", "other", "add_route", catchAll("other"), ""},
		{"a world's catch-all to its parent", "main/a", "add_route", catchAll("main"), outside("main/a", "main")},
		{"a world's catch-all to its sibling", "main/a", "add_route", catchAll("main/z"), outside("main/a", "main/z")},
		{"a world's route into another tree", "main/a", "add_route", catchAll("other/a"), outside("main/a", "other/a")},
		{"a world sets a route to its parent", "main/a", "set_routes", setAll("main"), "denied: set_routes sets routes to main/a and the groups below it only"},
		{"a world deletes the operator's route to itself", "main/a", "delete_route", del("op-a"),
			"was added by the operator; main/a deletes only routes it or a group below it added"},
		{"a world deletes its parent's route into it", "main/a", "delete_route", del("main-b"),
			"was added by group main; main/a deletes only routes it or a group below it added"},
		{"a world deletes the operator's catch-all", "main/a", "delete_route", del("op-all"), "not found"},
		{"a world's empty set_routes keeps its parent's and the operator's routes into it", "main/a", "set_routes", noRoutes, ""},
		{"a world's low catch-all below itself takes only its own messages", "main/a", "add_route", catchAll("main/a/b/c"), ""},
		{"an agent may not route at all", "main/a/b", "add_route", catchAll("main/a/b"), "denied: tier 2 (agent) may not call add_route"},
		{"a world deletes another tree's route", "other/a", "delete_route", del("main-b"), "not found"},
		{"a root routes into another tree", "main", "add_route", catchAll("other"), outside("main", "other")},
	}
	for _, a := range attempts {
		before := e.dump(t)
		res := callerOf(a.folder).call(t, a.tool, a.args(ids))
		if a.refuse == "" {
			mustOK(t, a.name, res)
			continue
		}
		mustFail(t, a.name, res, a.refuse)
		e.unchanged(t, a.name, before)
	}
	for key, id := range ids {
		if !routeExists(t, e, id) {
			t.Errorf("route %s (%d) is gone", key, id)
		}
	}

	deliveries := []struct {
		msg  apiwire.InboundMessage
		want string
	}{
		{apiwire.InboundMessage{Platform: "tg", Room: "main", Content: "to main"}, "main"},
		{apiwire.InboundMessage{Platform: "tg", Room: "main", Verb: "mention", Content: "refined by main"}, "main/a/b"},
		{apiwire.InboundMessage{Platform: "tg", Room: "z", Content: "to main/z"}, "main/z"},
		{apiwire.InboundMessage{Platform: "tg", Room: "other", Content: "to other"}, "other"},
		{apiwire.InboundMessage{Platform: "irc", Room: "o2", Content: "to other/a, refined by it"}, "other/a/b"},
		{apiwire.InboundMessage{Platform: "irc", Room: "a", Content: "to main/a, refined by it"}, "main/a/b/c"},
		{apiwire.InboundMessage{Platform: "irc", Content: "anything else"}, "main"},
		{apiwire.InboundMessage{Platform: "irc", Verb: "mention", Content: "anything else, mentioned"}, "main/a/b"},
	}
	for _, d := range deliveries {
		if got := op.deliver(t, d.msg); got != d.want {
			t.Errorf("%q reached %q, want %q", d.msg.Content, got, d.want)
		}
		if msgs := inboxOf(t, e, d.want, store.SourceRoute); len(msgs) == 0 || msgs[len(msgs)-1].Content != d.msg.Content {
			t.Errorf("inbox of %s = %+v, want %q last", d.want, msgs, d.msg.Content)
		}
	}

	// A forward across trees: only by the operator's grant naming the target,
	// only for main's own messages, and only while the grant stands.
	fwd := map[string]any{"seq": 0, "match": "sender=desk", "target": "other/a"}
	mustFail(t, "forward without a grant", callerOf("main").call(t, "add_route", fwd), outside("main", "other/a"))
	op.grant(t, "main", "*", "add_route(target=other/a)")
	mustFail(t, "the grant is main's, not main/a's", callerOf("main/a").call(t, "add_route", fwd), outside("main/a", "other/a"))
	mustFail(t, "the grant names other/a only", callerOf("main").call(t, "add_route", map[string]any{"seq": 0, "match": "", "target": "other"}), outside("main", "other"))
	mustOK(t, "granted forward", callerOf("main").call(t, "add_route", fwd))
	forwarded := apiwire.InboundMessage{Platform: "irc", Sender: "desk", Content: "main's message for the desk"}
	if got := op.deliver(t, forwarded); got != "other/a/b" {
		t.Errorf("forwarded message reached %q, want other/a (refined by other/a to other/a/b)", got)
	}
	if got := op.deliver(t, apiwire.InboundMessage{Platform: "tg", Room: "other", Sender: "desk", Content: "other's own"}); got != "other" {
		t.Errorf("other's message with the forward's sender reached %q, want other", got)
	}
	op.grant(t, "main", "*")
	if got := op.deliver(t, forwarded); got != "main" {
		t.Errorf("after the grant was taken back the message reached %q, want main", got)
	}
}

// TestRouteCapture runs runCapture with mcp-go's client on each group's socket.
func TestRouteCapture(t *testing.T) {
	e := newEnv(t)
	clients := map[string]caller{}
	runCapture(t, e, func(f string) caller {
		if c, ok := clients[f]; ok {
			return c
		}
		clients[f] = mcpCaller{dial(t, e.start(t, f, nil).SocketPath())}
		return clients[f]
	})
}

// TestNoToolWritesGrants: grants are the operator's. The store the tools get
// has no method that writes them, so no tool, whatever its arguments, can
// change what any group may do.
func TestNoToolWritesGrants(t *testing.T) {
	st := reflect.TypeFor[ipc.Store]()
	for i := range st.NumMethod() {
		if name := st.Method(i).Name; strings.Contains(name, "Grant") && name != "GetGrants" {
			t.Errorf("ipc.Store has %s: a tool could change grant rules", name)
		}
	}
}
