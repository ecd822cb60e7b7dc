package pricing

import (
	"slices"
	"testing"
)

func TestCost(t *testing.T) {
	sonnet := Defaults().Prices["claude-sonnet-4-5"]
	haiku := Defaults().Prices["claude-haiku-5-5"]
	for _, tc := range []struct {
		name  string
		price Price
		tok   Tokens
		want  Micros
	}{
		{"nothing", sonnet, Tokens{}, 0},
		{"a million input tokens", sonnet, Tokens{Input: 1e6}, 3_000_000},
		{"every kind", sonnet, Tokens{Input: 1000, Output: 500, CacheRead: 10_000, CacheWrite: 2000}, 3000 + 7500 + 3000 + 7500},
		// 1 token of cache read at $0.01/MTok is 0.01 µ$: 49 of them round down, 50 up.
		{"fractions summed before rounding", haiku, Tokens{CacheRead: 49}, 0},
		{"half a micro-dollar rounds up", haiku, Tokens{CacheRead: 50}, 1},
		{"fractions of kinds add up", haiku, Tokens{Input: 3, CacheRead: 30, CacheWrite: 2}, 1}, // 0.3 + 0.3 + 0.25
		{"a billion tokens", sonnet, Tokens{Output: 1e9 + 1}, 15_000_000_015},
		// 1,000 cache writes at $3.75 per million, 400 of them at the 1-hour cache's $6.
		{"1-hour cache writes", sonnet, Tokens{CacheWrite: 1000, CacheWrite1h: 400}, 600*3.75 + 400*6},
		{"more 1-hour writes than writes", sonnet, Tokens{CacheWrite: 10, CacheWrite1h: 400}, 60},
		{"negative counts cost nothing", sonnet, Tokens{Input: -5}, 0},
	} {
		if got := tc.price.Cost(tc.tok); got != tc.want {
			t.Errorf("%s: Cost(%+v) = %d, want %d", tc.name, tc.tok, got, tc.want)
		}
	}
}

func TestLookup(t *testing.T) {
	tab := Defaults().With(map[string]Price{"claude-test": {Input: 1}, "claude-sonnet-4-5": {Input: 7}})
	for _, tc := range []struct {
		model string
		input Micros
		ok    bool
	}{
		{"claude-sonnet-4-5", 7, true},          // the operator's row replaces the default
		{"claude-sonnet-4-5-20250929", 7, true}, // a dated name is priced as its base
		{"claude-opus-4-1-20250805", 15e6, true},
		{"claude-test", 1, true},
		{"claude-opus-4-9", 0, false},            // no row: not the price of claude-opus-4
		{"claude-opus-4-2025092", 0, false},      // not a date
		{"claude-sonnet-4-5-2025092x", 0, false}, // not a date
		{"", 0, false},
	} {
		p, ok := tab.Lookup(tc.model)
		if ok != tc.ok || p.Input != tc.input {
			t.Errorf("Lookup(%q) = %+v %v, want input %d %v", tc.model, p, ok, tc.input, tc.ok)
		}
	}
	if Defaults().Prices["claude-sonnet-4-5"].Input != 3e6 {
		t.Error("With changed the defaults")
	}
}

func TestCostSum(t *testing.T) {
	tab := Defaults()
	var c Cost
	c.Add(tab, "claude-sonnet-4-5", Tokens{Input: 1e6})
	c.Add(tab, "mystery", Tokens{Output: 10})
	c.Add(tab, "", Tokens{})
	c.Add(tab, "alpha", Tokens{Input: 1})
	c.Add(tab, "mystery", Tokens{Input: 1})
	if c.Micros != 3e6 || !slices.Equal(c.Unpriced, []string{"alpha", "mystery"}) || c.Known() {
		t.Errorf("sum = %+v", c)
	}
	if got := c.String(); got != "at least $3.00 (no price for alpha, mystery)" {
		t.Errorf("String = %q", got)
	}
	var d Cost
	d.Plus(c)
	d.Plus(Cost{Micros: 4200, Unpriced: []string{"beta"}})
	if d.Micros != 3_004_200 || !slices.Equal(d.Unpriced, []string{"alpha", "beta", "mystery"}) {
		t.Errorf("Plus = %+v", d)
	}
}

func TestUSD(t *testing.T) {
	for m, want := range map[Micros]string{0: "$0.00", 4200: "$0.0042", 12_500_000: "$12.50", 1: "$0.000001", -1_230_000: "-$1.23", 1_234_567: "$1.23", 9_999: "$0.009999", 10_000: "$0.01", 900_048: "$0.90", 1_995_000: "$2.00"} {
		if got := m.USD(); got != want {
			t.Errorf("%d.USD() = %q, want %q", m, got, want)
		}
	}
}

func TestExact(t *testing.T) {
	for m, want := range map[Micros]string{0: "$0.00", 125_000: "$0.125", 3_000_000: "$3.00", 1_234_567: "$1.234567", 10_000: "$0.01", -2_500_000: "-$2.50"} {
		if got := m.Exact(); got != want {
			t.Errorf("%d.Exact() = %q, want %q", m, got, want)
		}
	}
}

func TestMicrosOf(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want Micros
		bad  bool
	}{{3.75, 3_750_000, false}, {0.3, 300_000, false}, {0.125, 125_000, false}, {0, 0, false}, {-1, 0, true}, {2e9, 0, true}} {
		got, err := MicrosOf(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("MicrosOf(%v) = %d, %v", tc.in, got, err)
		}
	}
	if err := (Price{Input: MaxPrice + 1}).Check(); err == nil {
		t.Error("a price over MaxPrice passed Check")
	}
	for name, p := range Defaults().Prices {
		if err := p.Check(); err != nil {
			t.Errorf("default %s: %v", name, err)
		}
	}
}
