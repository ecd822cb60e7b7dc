package daemon_test

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a collector's OTLP/HTTP traces endpoint: it decodes each export as the
// protobuf ExportTraceServiceRequest it is and keeps the spans with their resource.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	res   []map[string]string // the resource attributes of each span
	paths map[string]int
}

func startReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{paths: map[string]int{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Authorization") != "Bearer collector-token" || r.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("OTLP export without the headers the variables name: %v", r.Header)
		}
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &req)
		}
		if err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP export %s %s %s: %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.paths[r.URL.Path]++
		for _, rs := range req.ResourceSpans {
			res := attrs(rs.GetResource().GetAttributes())
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					rc.spans = append(rc.spans, s)
					rc.res = append(rc.res, res)
				}
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// attrs are OTLP attributes as text.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.Value.(type) {
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(v.GetBoolValue())
		default:
			m[kv.Key] = v.GetStringValue()
		}
	}
	return m
}

// trace is the spans of one run's trace, found by its root's arizuko.run_id.
type trace struct {
	root     *tracepb.Span
	resource map[string]string
	children map[string][]*tracepb.Span // by name
	count    int
}

// waitTrace waits until the trace of run id has its root and the named spans.
func (rc *otlpReceiver) waitTrace(t *testing.T, id string, names ...string) trace {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		tr, ok := rc.trace(id)
		missing := []string{}
		for _, n := range names {
			if len(tr.children[n]) == 0 {
				missing = append(missing, n)
			}
		}
		if ok && len(missing) == 0 {
			return tr
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: no trace with its root and %v after 20s (root found: %v; have %v)", id, missing, ok, tr.children)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (rc *otlpReceiver) trace(id string) (trace, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	tr := trace{children: map[string][]*tracepb.Span{}}
	for i, s := range rc.spans {
		if s.Name == "turn" && attrs(s.Attributes)["arizuko.run_id"] == id {
			tr.root, tr.resource = s, rc.res[i]
		}
	}
	if tr.root == nil {
		return tr, false
	}
	for _, s := range rc.spans {
		if !bytes.Equal(s.TraceId, tr.root.TraceId) || s == tr.root {
			continue
		}
		tr.count++
		tr.children[s.Name] = append(tr.children[s.Name], s)
	}
	return tr, true
}

// TestTraces runs turns on every rootful engine with [tracing] naming an OTLP receiver:
// each turn is one trace whose root carries the run id and folder and whose children are
// its phases, its model request (model, tokens, time to first byte), its MCP tool call
// its egress connection and its sidecars' start, each the root's child within its time; a
// failed turn's root says so. `runs show` has the phases.
func TestTraces(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) { testTraces(t, e) })
	}
}

func testTraces(t *testing.T, e enginetest.Engine) {
	rc := startReceiver(t)
	fake := fakemodel.Start()
	defer fake.Close()
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Text: "echo: " + r.LastUserText(), InputTokens: 21, OutputTokens: 8}
	}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello through the egress proxy")
	}))
	defer target.Close()
	targetAddr := strings.TrimPrefix(target.URL, "http://")
	d := daemontest.New(t, daemontest.Config{Engine: e,
		EnvFile: "ANTHROPIC_API_KEY=sk-ant-test-" + daemontest.RandHex(16) + "\n",
		// The standard variables are honoured: the batch goes out after 100ms, not 5s,
		// compressed, with the collector's credential.
		Env: []string{"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_RESOURCE_ATTRIBUTES=deployment.environment=test",
			"OTEL_EXPORTER_OTLP_COMPRESSION=gzip", "OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20collector-token"},
		TOML: fmt.Sprintf("[model]\nupstream = %q\n[tracing]\nendpoint = %q\n", fake.URL, rc.URL)})
	d.Start(t)
	d.PutGroup(t, "main", fmt.Sprintf(`{"egress": [%q]}`, targetAddr))

	phases := []string{"queue.wait", "turn.prepare", "container.create", "container.start", "container.run", "turn.finish"}
	check := func(r apiwire.Run, extra ...string) trace {
		t.Helper()
		tr := rc.waitTrace(t, r.ID, append(phases, extra...)...)
		root := tr.root
		if len(root.ParentSpanId) != 0 {
			t.Errorf("run %s: the turn's span has parent %x", r.ID, root.ParentSpanId)
		}
		ra := attrs(root.Attributes)
		if ra["arizuko.folder"] != "main" || ra["arizuko.status"] != r.Status || ra["arizuko.container"] != r.Container {
			t.Errorf("run %s (%s, %s): root attributes %v", r.ID, r.Status, r.Container, ra)
		}
		if tr.resource["service.name"] != "arizukod" || tr.resource["service.instance.id"] != d.Instance || tr.resource["deployment.environment"] != "test" {
			t.Errorf("resource %v", tr.resource)
		}
		for name, ss := range tr.children {
			for _, s := range ss {
				if !bytes.Equal(s.ParentSpanId, root.SpanId) {
					t.Errorf("run %s: span %s has parent %x, not the turn's %x", r.ID, name, s.ParentSpanId, root.SpanId)
				}
				if s.StartTimeUnixNano < root.StartTimeUnixNano || s.EndTimeUnixNano > root.EndTimeUnixNano || s.EndTimeUnixNano < s.StartTimeUnixNano {
					t.Errorf("run %s: span %s [%d, %d] is not within the turn's [%d, %d]", r.ID, name,
						s.StartTimeUnixNano, s.EndTimeUnixNano, root.StartTimeUnixNano, root.EndTimeUnixNano)
				}
			}
		}
		for _, p := range phases {
			if len(tr.children[p]) != 1 {
				t.Errorf("run %s: %d %s spans, want 1", r.ID, len(tr.children[p]), p)
			}
		}
		// The phases follow one another.
		for i := 1; i < len(phases); i++ {
			prev, next := tr.children[phases[i-1]], tr.children[phases[i]]
			if len(prev) == 1 && len(next) == 1 && next[0].StartTimeUnixNano < prev[0].EndTimeUnixNano {
				t.Errorf("run %s: %s starts before %s ends", r.ID, phases[i], phases[i-1])
			}
		}
		got := d.GetRun(t, r.ID).Phases
		if got == nil || got.PrepareMs == nil || got.CreateMs == nil || got.StartMs == nil || got.RunMs == nil || got.FinishMs == nil {
			t.Errorf("run %s: phases %+v", r.ID, got)
		} else if sum := *got.PrepareMs + *got.CreateMs + *got.StartMs + *got.RunMs + *got.FinishMs; *got.RunMs <= 0 || sum > 60000 {
			t.Errorf("run %s: phases %+v", r.ID, *got)
		}
		return tr
	}

	r := d.Turn(t, "main", "model hello trace")
	if a := agentAnswer(t, r); a["status"] != float64(200) {
		t.Fatalf("model turn: %v", a)
	}
	tr := check(r, "model.request")
	if n := len(tr.children["model.request"]); n != 1 {
		t.Fatalf("%d model.request spans, want 1", n)
	}
	m := attrs(tr.children["model.request"][0].Attributes)
	if m["gen_ai.request.model"] != "claude-test" || m["gen_ai.usage.input_tokens"] != "21" || m["gen_ai.usage.output_tokens"] != "8" ||
		m["http.response.status_code"] != "200" || m["url.path"] != "/v1/messages" || m["arizuko.ttfb_ms"] == "" {
		t.Errorf("model.request attributes %v", m)
	}

	r = d.Turn(t, "main", "mcp list_tasks {}")
	if r.Status != "ok" {
		t.Fatalf("tool turn: %+v", r)
	}
	tr = check(r, "mcp.tool")
	if a := attrs(tr.children["mcp.tool"][0].Attributes); a["arizuko.tool"] != "list_tasks" || a["arizuko.outcome"] != "ok" {
		t.Errorf("mcp.tool attributes %v", a)
	}

	r = d.Turn(t, "main", "fetch "+target.URL+"/hi")
	tr = check(r, "egress")
	if a := attrs(tr.children["egress"][0].Attributes); a["server.address"] != targetAddr || a["arizuko.refused"] != "false" || a["arizuko.bytes_down"] == "0" {
		t.Errorf("egress attributes %v", a)
	}

	r = d.Turn(t, "main", "fatal on purpose")
	tr = check(r)
	if tr.root.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || !strings.Contains(tr.root.Status.GetMessage(), "on purpose") {
		t.Errorf("a fatal turn's root status: %v", tr.root.Status)
	}
	if tr.count != len(phases) {
		t.Errorf("the fatal turn has %d spans beside its root, want %d", tr.count, len(phases))
	}

	// A group's sidecars: their start is a span of its own, and a phase of the run.
	ensureSidecarImage(t, e, d.Eng)
	d.PutGroup(t, "main", `{"sidecars": [{"name": "echo", "image": "`+sidecarImage+`"}]}`)
	r = d.Turn(t, "main", `mcp-socket echo.sock echo {"text":"traced"}`)
	if r.Status != "ok" {
		t.Fatalf("sidecar turn: %+v", r)
	}
	tr = check(r, "sidecars.start")
	if a := attrs(tr.children["sidecars.start"][0].Attributes); a["arizuko.sidecars"] != "1" {
		t.Errorf("sidecars.start attributes %v", a)
	}
	if p := d.GetRun(t, r.ID).Phases; p == nil || p.SidecarsMs == nil || *p.SidecarsMs <= 0 {
		t.Errorf("sidecar run's phases %+v", p)
	}

	// One trace per turn: five roots, five trace ids.
	rc.mu.Lock()
	ids := map[string]bool{}
	for _, s := range rc.spans {
		if s.Name == "turn" {
			ids[hex.EncodeToString(s.TraceId)] = true
		}
	}
	for p := range rc.paths {
		if p != "/v1/traces" {
			t.Errorf("an export went to %s, want /v1/traces", p)
		}
	}
	rc.mu.Unlock()
	if len(ids) != 5 {
		t.Errorf("%d traces of turns, want 5", len(ids))
	}
}
