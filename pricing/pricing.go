// Package pricing turns model usage into money: the price table per model (shipped
// defaults, overridden by arizukod.toml's [prices."MODEL"] tables) and the exact integer
// arithmetic of a cost, in micro-dollars, never in floats.
//
// It owns the table, the matching of a model the API names to its row, and the sum of
// costs that knows which part is unknown. It touches no store, network or file: callers
// hand it token counts.
package pricing

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Micros is an amount of US dollars in millionths of a dollar.
type Micros int64

// USD writes m as dollars: to the cent from a cent up ("$12.50", "$0.90"), else with up
// to 6 decimals ("$0.0042"). The exact amount is m itself.
func (m Micros) USD() string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	if m >= 10_000 {
		cents := (m + 5_000) / 10_000
		return fmt.Sprintf("%s$%d.%02d", sign, cents/100, cents%100)
	}
	s := strings.TrimRight(fmt.Sprintf("0.%06d", m), "0")
	if len(s) < 4 {
		s = "0.00"
	}
	return sign + "$" + s
}

// Exact writes m as dollars with every decimal it has, at least 2: "$0.125", "$3.00".
func (m Micros) Exact() string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	s := strings.TrimRight(fmt.Sprintf("%d.%06d", m/1e6, m%1e6), "0")
	if i := strings.IndexByte(s, '.'); len(s)-i < 3 {
		s += strings.Repeat("0", 3-(len(s)-i))
	}
	return sign + "$" + s
}

// MicrosOf is dollars (a float from a config file, "3.75") in micro-dollars, rounded to
// the nearest: a price never needs more than six decimals. It refuses a negative, NaN or
// infinite amount, and one over a billion dollars.
func MicrosOf(dollars float64) (Micros, error) {
	switch {
	case math.IsNaN(dollars) || math.IsInf(dollars, 0):
		return 0, errors.New("not a number of dollars")
	case dollars < 0:
		return 0, fmt.Errorf("%v: must not be negative", dollars)
	case dollars > 1e9:
		return 0, fmt.Errorf("%v: more than a billion dollars", dollars)
	}
	return Micros(math.Round(dollars * 1e6)), nil
}

// Price is what a model costs per million tokens of each kind, in micro-dollars:
// CacheWrite is a write to the 5-minute cache, CacheWrite1h one to the 1-hour cache.
type Price struct {
	Input, Output, CacheRead, CacheWrite, CacheWrite1h Micros
}

// MaxPrice bounds a price per million tokens ($1,000,000), which keeps Cost's
// arithmetic far from overflow.
const MaxPrice Micros = 1e12

// Check says which price of p is out of bounds, by its key in arizukod.toml.
func (p Price) Check() error {
	for _, k := range [...]struct {
		name string
		v    Micros
	}{{"input", p.Input}, {"output", p.Output}, {"cache_read", p.CacheRead}, {"cache_write", p.CacheWrite}, {"cache_write_1h", p.CacheWrite1h}} {
		if k.v < 0 || k.v > MaxPrice {
			return fmt.Errorf("%s: %s per million tokens is out of range ($0 to %s)", k.name, k.v.USD(), MaxPrice.USD())
		}
	}
	return nil
}

// Tokens are the counts of each kind a model's requests used; CacheWrite1h are the
// cache writes, of CacheWrite, to the 1-hour cache.
type Tokens struct {
	Input, Output, CacheRead, CacheWrite, CacheWrite1h int64
}

// Add adds u's counts to t.
func (t *Tokens) Add(u Tokens) {
	t.Input += u.Input
	t.Output += u.Output
	t.CacheRead += u.CacheRead
	t.CacheWrite += u.CacheWrite
	t.CacheWrite1h += u.CacheWrite1h
}

// Cost is what t costs at p, rounded once to the nearest micro-dollar: the products are
// summed exactly (tokens × micro-dollars per million) before the one division. The cache
// writes that are not to the 1-hour cache are the 5-minute cache's.
func (p Price) Cost(t Tokens) Micros {
	var whole, rest int64 // the sum is whole*1e6 + rest, over a million
	write1h := min(max(t.CacheWrite1h, 0), max(t.CacheWrite, 0))
	for _, k := range [...]struct {
		n     int64
		price Micros
	}{{t.Input, p.Input}, {t.Output, p.Output}, {t.CacheRead, p.CacheRead}, {t.CacheWrite - write1h, p.CacheWrite}, {write1h, p.CacheWrite1h}} {
		if k.n <= 0 || k.price <= 0 {
			continue
		}
		// n = q*1e6 + r: n*price/1e6 = q*price + r*price/1e6, and r*price stays far from
		// overflow for any price Check accepts.
		q, r := k.n/1e6, k.n%1e6
		whole += q * int64(k.price)
		rest += r * int64(k.price)
		whole += rest / 1e6
		rest %= 1e6
	}
	if rest >= 5e5 {
		whole++
	}
	return Micros(whole)
}

// Table is the price of each model, and the date its prices were taken.
type Table struct {
	// AsOf is the date the prices were taken from the provider's published list
	// (YYYY-MM-DD), or "arizukod.toml" for a table the operator changed.
	AsOf   string
	Prices map[string]Price
}

// DefaultsAsOf is the date the shipped prices were taken.
const DefaultsAsOf = "2026-11-27"

// DefaultsSource is where they were taken from.
const DefaultsSource = "https://platform.claude.com/docs/en/about-claude/pricing and the models' overview pages"

// usd is dollars in micro-dollars, for the literal table below.
func usd(d float64) Micros { return Micros(math.Round(d * 1e6)) }

func price(in, out, cacheRead, cacheWrite, cacheWrite1h float64) Price {
	return Price{Input: usd(in), Output: usd(out), CacheRead: usd(cacheRead), CacheWrite: usd(cacheWrite), CacheWrite1h: usd(cacheWrite1h)}
}

// Defaults is the shipped table: Anthropic's published prices per million tokens of the
// current Claude models on DefaultsAsOf (input, output, cache hits, 5-minute and 1-hour
// cache writes), from DefaultsSource. Claude Haiku 5.5 is priced at its band for prompts
// up to 100,000 tokens.
func Defaults() Table {
	return Table{AsOf: DefaultsAsOf, Prices: map[string]Price{
		"claude-fable-5-1":  price(10, 50, 0.25, 12.50, 20),
		"claude-fable-5":    price(10, 50, 1, 12.50, 20),
		"claude-opus-5-5":   price(4, 20, 0.20, 5, 8),
		"claude-opus-5":     price(5, 25, 0.50, 6.25, 10),
		"claude-opus-4-8":   price(5, 25, 0.50, 6.25, 10),
		"claude-opus-4-7":   price(5, 25, 0.50, 6.25, 10),
		"claude-opus-4-6":   price(5, 25, 0.50, 6.25, 10),
		"claude-opus-4-5":   price(5, 25, 0.50, 6.25, 10),
		"claude-opus-4-1":   price(15, 75, 1.50, 18.75, 30),
		"claude-opus-4":     price(15, 75, 1.50, 18.75, 30),
		"claude-sonnet-5-5": price(2, 10, 0.20, 2.50, 4),
		"claude-sonnet-5":   price(2, 10, 0.20, 2.50, 4),
		"claude-sonnet-4-6": price(3, 15, 0.30, 3.75, 6),
		"claude-sonnet-4-5": price(3, 15, 0.30, 3.75, 6),
		"claude-sonnet-4":   price(3, 15, 0.30, 3.75, 6),
		"claude-haiku-5-5":  price(0.10, 0.50, 0.01, 0.125, 0.20),
		"claude-haiku-4-5":  price(1, 5, 0.10, 1.25, 2),
		"claude-3-5-haiku":  price(0.80, 4, 0.08, 1, 1.6),
	}}
}

// With is t with the operator's prices added, each replacing the default of its model.
func (t Table) With(over map[string]Price) Table {
	if len(over) == 0 {
		return t
	}
	n := Table{AsOf: t.AsOf + ", with arizukod.toml's [prices]", Prices: make(map[string]Price, len(t.Prices)+len(over))}
	for k, v := range t.Prices {
		n.Prices[k] = v
	}
	for k, v := range over {
		n.Prices[k] = v
	}
	return n
}

// Lookup is the price of model: its own row, or the row of the name it has with its
// date suffix removed ("claude-sonnet-4-5-20250929" is priced as "claude-sonnet-4-5").
// A model with neither has no known price: its cost is unknown, never zero.
func (t Table) Lookup(model string) (Price, bool) {
	if p, ok := t.Prices[model]; ok {
		return p, true
	}
	if base, ok := withoutDate(model); ok {
		p, ok := t.Prices[base]
		return p, ok
	}
	return Price{}, false
}

// withoutDate is model without a "-YYYYMMDD" suffix, if it has one.
func withoutDate(model string) (string, bool) {
	i := strings.LastIndexByte(model, '-')
	if i < 0 || len(model)-i-1 != 8 {
		return "", false
	}
	for _, c := range model[i+1:] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return model[:i], true
}

// Cost is a sum of costs that knows its unknown part: Micros is what the priced models
// cost, Unpriced names the models whose tokens it could not price (sorted, without
// repeats). A cost with an unpriced model is at least Micros, never exactly it.
type Cost struct {
	Micros   Micros
	Unpriced []string
}

// Known says whether every model of c had a price.
func (c Cost) Known() bool { return len(c.Unpriced) == 0 }

// Add adds what model's tokens cost at t; a model with no price is named in Unpriced,
// and tokens of none ("" with no tokens) add nothing.
func (c *Cost) Add(t Table, model string, tok Tokens) {
	if tok == (Tokens{}) {
		return
	}
	p, ok := t.Lookup(model)
	if !ok {
		c.addUnpriced(model)
		return
	}
	c.Micros += p.Cost(tok)
}

// Plus adds o to c.
func (c *Cost) Plus(o Cost) {
	c.Micros += o.Micros
	for _, m := range o.Unpriced {
		c.addUnpriced(m)
	}
}

func (c *Cost) addUnpriced(model string) {
	if i, found := slices.BinarySearch(c.Unpriced, model); !found {
		c.Unpriced = slices.Insert(c.Unpriced, i, model)
	}
}

// String is the cost in dollars, "$1.25", or "at least $1.25 (no price for x, y)".
func (c Cost) String() string {
	if c.Known() {
		return c.Micros.USD()
	}
	return fmt.Sprintf("at least %s (no price for %s)", c.Micros.USD(), strings.Join(c.Unpriced, ", "))
}
