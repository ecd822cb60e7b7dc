package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
)

// TestMoneyBudget runs the example agent's turns against the scripted Messages API, whose
// every answer reports 1,000 input tokens, 256 output (all of the agent's max_tokens),
// 2,000 read from the cache and 500 written to it, 200 of those to the 1-hour cache;
// arizukod.toml prices claude-test at $3, $15, $0.30, $3.75 and $6 (1-hour writes) per
// million: $0.009765 an answer. On every rootful engine:
//   - a group whose usd_per_day is $0.03 (refuse) gets three answers of a turn's six
//     requests and then the API's own error naming the budget, mid-turn;
//   - a group whose usd_per_day is $0.02 (warn) gets every answer, one notice in the
//     outbox at 80% and one at 100%, and a journald warning for each;
//   - a group whose usd_per_month is $0.01 (park) is parked at its second request;
//   - GET /v1/usage, `arizukod usage` and /metrics show what each cost, cache tokens too.
func TestMoneyBudget(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) { testMoneyBudget(t, e) })
	}
}

func testMoneyBudget(t *testing.T, e enginetest.Engine) {
	daemontest.JournalOn(t)
	fake := fakemodel.Start()
	defer fake.Close()
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Text: "echo: " + r.LastUserText(), InputTokens: 1000, OutputTokens: 256, CacheReadTokens: 2000, CacheWriteTokens: 500, CacheWrite1hTokens: 200}
	}
	// µ$: 1,000 × $3, 256 × $15, 2,000 × $0.30, 300 × $3.75 and 200 × $6 per million.
	const answer int64 = 3000 + 3840 + 600 + 1125 + 1200
	d := daemontest.New(t, daemontest.Config{Engine: e,
		EnvFile: "ANTHROPIC_API_KEY=sk-ant-test-" + daemontest.RandHex(16) + "\n",
		TOML: fmt.Sprintf("[model]\nupstream = %q\n\n[prices.\"claude-test\"]\ninput = 3\noutput = 15\ncache_read = 0.3\ncache_write = 3.75\ncache_write_1h = 6\n",
			fake.URL)})
	d.Start(t)
	d.PutGroup(t, "capped", `{"model": {"usd_per_day": 0.03}}`)
	d.AddGroup(t, "capped/kid")
	d.PutGroup(t, "watched", `{"model": {"usd_per_day": 0.02, "budget_action": "warn"}}`)
	d.PutGroup(t, "thrifty", `{"model": {"usd_per_month": 0.01, "budget_action": "park"}}`)

	statuses := func(r apiwire.Run) ([]int, string) {
		a := agentAnswer(t, r)
		var out []int
		for _, s := range a["statuses"].([]any) {
			n, _ := s.(float64)
			out = append(out, int(n))
		}
		b, _ := json.Marshal(a["error"])
		return out, string(b)
	}

	// Refuse, mid-turn: the child's requests spend its parent's budget.
	capped := d.Turn(t, "capped/kid", "model-seq 6 spend")
	got, refusal := statuses(capped)
	if !slices.Equal(got, []int{200, 200, 200, 403, 403, 403}) || !strings.Contains(refusal, `"type":"permission_error"`) ||
		!strings.Contains(refusal, "budget reached: capped and the groups below it spent $0.03 of its $0.03 this day") ||
		!strings.Contains(refusal, "containerConfig.model.usd_per_day of capped") {
		t.Errorf("six requests under a budget of $0.03: %v %s", got, refusal)
	}
	if u := d.GetRun(t, capped.ID).Usage; u == nil || u.Requests != 3 || u.CacheReadTokens != 6000 || u.CacheWriteTokens != 1500 || u.CacheWrite1hTokens != 600 || !strings.Contains(u.Refused, "usd_per_day of capped") {
		t.Errorf("the refused run's usage: %+v", u)
	}

	// Warn: nothing refused, a notice at 80% and at 100%, each once, and journald's warnings.
	watched := d.Turn(t, "watched", "model-seq 4 spend")
	if got, _ := statuses(watched); !slices.Equal(got, []int{200, 200, 200, 200}) {
		t.Errorf("a budget that warns refused: %v", got)
	}
	var out struct{ Items []apiwire.OutboxItem }
	if err := d.Client.Do(t.Context(), http.MethodGet, "/v1/groups/watched/outbox", nil, &out); err != nil {
		t.Fatal(err)
	}
	var notices []string
	for _, it := range out.Items {
		if it.Kind == "notice" {
			notices = append(notices, it.Content)
		}
	}
	if len(notices) != 2 || !strings.Contains(notices[0], "80% of their $0.02 for this day") || !strings.Contains(notices[1], "100% of their $0.02 for this day") {
		t.Errorf("the warn notices in the outbox: %q", notices)
	}
	es := daemontest.WaitJournal(t, 10*time.Second, func(es []daemontest.Entry) bool {
		n := 0
		for _, e := range es {
			if e["MESSAGE"] == "model budget reached" && e["PRIORITY"] == "4" {
				n++
			}
		}
		return n == 2
	}, "ARIZUKO_RUN_ID="+watched.ID)
	t.Logf("journald: %d entries of the warned run", len(es))

	// Park: refused, and the group's inbox parked with the budget as the reason.
	thrifty := d.Turn(t, "thrifty", "model-seq 3 spend")
	if got, refusal := statuses(thrifty); !slices.Equal(got, []int{200, 403, 403}) || !strings.Contains(refusal, "thrifty is parked until an operator runs `arizukod unpark --folder thrifty`") {
		t.Errorf("a budget that parks: %v %s", got, refusal)
	}
	var in apiwire.Inbox
	if err := d.Client.Do(t.Context(), http.MethodGet, "/v1/groups/thrifty/messages", nil, &in); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(in.ParkedReason, "usd_per_month of thrifty ($0.01) is spent for this month") {
		t.Errorf("thrifty's parked reason: %q", in.ParkedReason)
	}

	// What each cost, by the API, the command line and the metrics.
	var rep apiwire.UsageReport
	if err := d.Client.Do(t.Context(), http.MethodGet, "/v1/usage", nil, &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"capped": 0, "capped/kid": 3 * answer, "thrifty": answer, "watched": 4 * answer}
	for _, g := range rep.Groups {
		if w, ok := want[g.Folder]; !ok || g.Today.Micros != w || g.Month.Micros != w {
			t.Errorf("GET /v1/usage: %s cost %+v today, want %d µ$", g.Folder, g.Today, w)
		}
		delete(want, g.Folder)
		if g.Folder == "capped" && g.SubtreeToday.Micros != 3*answer {
			t.Errorf("capped's subtree cost %+v, want %d µ$", g.SubtreeToday, 3*answer)
		}
	}
	if len(want) > 0 || len(rep.Models) != 1 || rep.Models[0].CacheReadTokens != 8*2000 || rep.Models[0].CacheWrite1hTokens != 8*200 || rep.Models[0].Cost == nil || rep.Models[0].Cost.Micros != 8*answer {
		t.Errorf("GET /v1/usage: %+v, missing %v", rep, want)
	}
	cliOut, err := exec.Command(d.Bin, "usage", "--folder", "capped", "--socket", d.Socket).CombinedOutput()
	cli := string(cliOut)
	if err != nil || !strings.Contains(strings.Join(strings.Fields(cli), " "), "capped/kid $0.03 $0.03 $0.03 $0.03 $0.03 $0.03") {
		t.Errorf("arizukod usage --folder capped: %v\n%s", err, cli)
	}
	m := metricsOf(t, d)
	if v := m[`arizukod_model_cost_microdollars_total{folder="watched",model="claude-test"}`]; v != float64(4*answer) {
		t.Errorf("the cost metric of watched: %v, want %d", v, int64(4*answer))
	}
}
