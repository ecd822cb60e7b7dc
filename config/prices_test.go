package config

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/pricing"
)

func TestPrices(t *testing.T) {
	p := writeFile(t, `[prices."claude-test"]
input = 3
output = 15.0
cache_read = 0.3
cache_write = 3.75
cache_write_1h = 6.5

[prices."claude-sonnet-4-5"]
input = 2.5
output = 12.5
cache_read = 0.25
cache_write = 3.125
`)
	c, err := Load(ModeSystem, p, env())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]pricing.Price{
		"claude-test":       {Input: 3_000_000, Output: 15_000_000, CacheRead: 300_000, CacheWrite: 3_750_000, CacheWrite1h: 6_500_000},
		"claude-sonnet-4-5": {Input: 2_500_000, Output: 12_500_000, CacheRead: 250_000, CacheWrite: 3_125_000, CacheWrite1h: 5_000_000},
	}
	if !maps.Equal(c.Prices, want) {
		t.Errorf("Prices = %+v, want %+v", c.Prices, want)
	}
	if c, err := Load(ModeSystem, writeFile(t, ""), env()); err != nil || c.Prices != nil {
		t.Errorf("no [prices]: %+v, %v", c.Prices, err)
	}
}

func TestPriceErrors(t *testing.T) {
	const ok = "input = 1\noutput = 2\ncache_read = 0.1\ncache_write = 1.25\n"
	for _, tt := range []struct {
		name, body, key, msg string
		line                 int
	}{
		{"missing", "[prices.\"m\"]\ninput = 1\noutput = 2\ncache_read = 0.1\n", `prices."m".cache_write`, "required", 4},
		{"unknown key", "[prices.\"m\"]\n" + ok + "batch = 0.5\n", `prices."m".batch`, "unknown key", 6},
		{"a string", "[prices.\"m\"]\ninput = \"3\"\n", `prices."m".input`, "want a number of dollars", 2},
		{"negative", "[prices.\"m\"]\noutput = -2\n", `prices."m".output`, "must not be negative", 2},
		{"too dear", "[prices.\"m\"]\n" + strings.Replace(ok, "input = 1", "input = 2000000", 1), `prices."m"`, "out of range", 5},
		{"empty name", "[prices.\"\"]\n" + ok, `prices.""`, "a model name", 2},
		{"not tables", "prices = 3\n", "prices", "want a table", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(ModeSystem, writeFile(t, tt.body), env())
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != tt.key || ce.Line != tt.line || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want key %s at line %d saying %q", err, tt.key, tt.line, tt.msg)
			}
		})
	}
}
