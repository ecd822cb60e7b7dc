package turn_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/internal/fakemodel"
	"github.com/arizuko/arizukod/store"
)

// TestModelMoneyBudget: a group's usd_per_day and usd_per_month are spent by its whole
// subtree at the price of each response's model (claude-sonnet-4-5: $15 per million
// output tokens; every answer here uses all of its max_tokens, 20,000: $0.30, and a
// request reserves as much). refuse refuses the request that could
// take the cost past the budget, naming it; park refuses it too and parks the group, with
// a notice; warn refuses nothing and sends one notice at 80% and one at 100%; a model
// with no price cannot be kept under a budget that refuses.
func TestModelMoneyBudget(t *testing.T) {
	const sonnet = "claude-sonnet-4-5"
	for _, tc := range []struct {
		name, config string
		asks         int
		want         []int  // statuses of the asks
		refusal      string // in the message of each 403
		notices      []string
		parked       string
	}{
		{name: "refuse", config: `{"model":{"usd_per_day":1}}`, asks: 5, want: []int{200, 200, 200, 403, 403},
			refusal: "budget reached: main and the groups below it spent $0.90 of its $1.00 this day"},
		{name: "refuse by month", config: `{"model":{"usd_per_month":0.7,"usd_per_day":100}}`, asks: 4, want: []int{200, 200, 403, 403},
			refusal: "(containerConfig.model.usd_per_month of main)"},
		{name: "park", config: `{"model":{"usd_per_day":0.5,"budget_action":"park"}}`, asks: 3, want: []int{200, 403, 403},
			refusal: "main/kid is parked until an operator runs `arizukod unpark --folder main/kid`",
			notices: []string{"Budget reached: main and the groups below it spent their $0.50 for this day."},
			parked:  "usd_per_day of main ($0.50) is spent for this day"},
		{name: "warn", config: `{"model":{"usd_per_day":1,"budget_action":"warn"}}`, asks: 5, want: []int{200, 200, 200, 200, 200},
			notices: []string{"have spent $0.90, 80% of their $1.00 for this day", "have spent $1.20, 100% of their $1.00 for this day"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newModelTurns(t, map[string]string{"main": tc.config, "main/kid": `{}`})
			m.fake.Reply = func(fakemodel.Request) fakemodel.Reply {
				return fakemodel.Reply{Text: "ok", InputTokens: 1, OutputTokens: 20_000}
			}
			var got []answer
			run, err := m.run(t, "main/kid", func(c *modelClient) string {
				for range tc.asks {
					got = append(got, c.ask(sonnet, 20_000, 10))
				}
				return ""
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range got {
				if a.code != tc.want[i] || (a.code == http.StatusForbidden && !strings.Contains(a.msg, tc.refusal)) {
					t.Errorf("ask %d: %d %q, want %d with %q", i, a.code, a.msg, tc.want[i], tc.refusal)
				}
			}
			items, err := m.st.ListOutbox(context.Background(), "main/kid", 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var notices []store.OutboxItem
			for _, it := range items {
				if it.Kind == store.OutboxNotice && it.RunID == run.ID {
					notices = append(notices, it)
				}
			}
			if len(notices) != len(tc.notices) {
				t.Errorf("notices %+v, want %q", notices, tc.notices)
			}
			for i := range min(len(notices), len(tc.notices)) {
				if !strings.Contains(notices[i].Content, tc.notices[i]) {
					t.Errorf("notice %d: %q, want %q", i, notices[i].Content, tc.notices[i])
				}
			}
			cur, err := m.st.ListCursors(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var parked string
			for _, c := range cur {
				if c.Folder == "main/kid" {
					parked = c.ParkedReason
				}
			}
			if (tc.parked == "") != (parked == "") || !strings.Contains(parked, tc.parked) {
				t.Errorf("main/kid parked for %q, want %q", parked, tc.parked)
			}
		})
	}
	t.Run("no price", func(t *testing.T) {
		m := newModelTurns(t, map[string]string{"main": `{"model":{"usd_per_day":1}}`})
		var a answer
		if _, err := m.run(t, "main", func(c *modelClient) string { a = c.ask("claude-unknown", 10, 10); return "" }); err != nil {
			t.Fatal(err)
		}
		if a.code != http.StatusForbidden || !strings.Contains(a.msg, `model "claude-unknown" has no price`) || !strings.Contains(a.msg, `[prices."claude-unknown"]`) {
			t.Errorf("a model without a price under a budget: %d %q", a.code, a.msg)
		}
	})
}
