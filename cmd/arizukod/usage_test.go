package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/store"
)

// TestCLIUsage: `arizukod usage` prints what each group and its subtree cost today, this
// month and since a date, and each model's tokens and cost, from the usage the store
// recorded; a model with no price is unknown, not free; mistakes name the flag.
func TestCLIUsage(t *testing.T) {
	fx := newCLIFixture(t)
	ctx := context.Background()
	s := "--socket=" + fx.socket
	for _, u := range []struct {
		folder string
		usage  store.Usage
	}{
		// $3 per million input tokens and $15 per million output: $0.30 and $0.15.
		{"main", store.Usage{Model: "claude-sonnet-4-5-20250929", InputTokens: 100_000}},
		{"main/research", store.Usage{Model: "claude-sonnet-4-5", OutputTokens: 10_000}},
		{"main/research", store.Usage{Model: "claude-mystery", InputTokens: 5}},
	} {
		r, err := fx.st.CreateRun(ctx, store.Run{Folder: u.folder})
		if err != nil {
			t.Fatal(err)
		}
		if err := fx.st.AddUsage(ctx, r.ID, u.usage); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := fx.run(t, "usage", s, "--json")
	if code != 0 {
		t.Fatalf("usage --json: %d %s", code, errOut)
	}
	var rep apiwire.UsageReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Groups) != 2 || rep.Groups[0].Folder != "main" || rep.Groups[0].Today.Micros != 300_000 ||
		rep.Groups[0].SubtreeMonth.Micros != 450_000 || strings.Join(rep.Groups[0].SubtreeMonth.Unpriced, ",") != "claude-mystery" ||
		rep.Groups[1].Month.USD != "$0.15" || rep.Total.Micros != 450_000 {
		t.Errorf("usage --json: %s", out)
	}
	if len(rep.Models) != 3 || rep.Models[0].Model != "claude-mystery" || rep.Models[0].Cost != nil || rep.Models[1].Cost.Micros != 150_000 {
		t.Errorf("usage by model: %+v", rep.Models)
	}
	// words is text with every run of spaces one space: the columns' widths vary.
	words := func(text string) string { return strings.Join(strings.Fields(text), " ") }
	code, out, errOut = fx.run(t, "usage", s, "--folder", "main/research")
	for _, want := range []string{"model usage of main/research and the groups below it", "main/research $0.15+? $0.15+?",
		"claude-mystery 5 0 0 0 unknown: no price", "claude-sonnet-4-5 0 10000 0 0 $0.15", "TOTAL $0.15+?", "claude-mystery has no price"} {
		if code != 0 || !strings.Contains(words(out), want) {
			t.Errorf("usage --folder main/research: %d, want %q in\n%s%s", code, want, out, errOut)
		}
	}
	if strings.Contains(out, "main ") {
		t.Errorf("usage --folder main/research shows main:\n%s", out)
	}
	code, out, _ = fx.run(t, "usage", s, "--prices")
	if code != 0 || !strings.Contains(words(out), "claude-sonnet-4-5 $3.00 $15.00 $0.30 $3.75 $6.00") || !strings.Contains(words(out), "claude-haiku-5-5 $0.10 $0.50 $0.01 $0.125 $0.20") {
		t.Errorf("usage --prices: %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--since", "last week"}, 1, `since: "last week" is not a date`},
		{[]string{"--since", "2999-01-01"}, 1, "is in the future"},
		{[]string{"--folder", "../x"}, 1, "folder:"},
		{[]string{"--prices", "--folder", "main"}, 2, "--prices lists every model's price"},
		{[]string{"--bogus"}, 2, "flag provided but not defined"},
	} {
		code, out, errOut := fx.run(t, append([]string{"usage", s}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("usage %v: %d %q %q, want %d %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
}
