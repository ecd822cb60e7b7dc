package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/arizuko/arizukod/pricing"
)

// priceKeys are the keys of a [prices."MODEL"] table, each a price in US dollars per
// million tokens; all but cache_write_1h are required, which is twice input without.
var priceKeys = map[string]func(p *pricing.Price) *pricing.Micros{
	"input":          func(p *pricing.Price) *pricing.Micros { return &p.Input },
	"output":         func(p *pricing.Price) *pricing.Micros { return &p.Output },
	"cache_read":     func(p *pricing.Price) *pricing.Micros { return &p.CacheRead },
	"cache_write":    func(p *pricing.Price) *pricing.Micros { return &p.CacheWrite },
	"cache_write_1h": func(p *pricing.Price) *pricing.Micros { return &p.CacheWrite1h },
}

// dollars reads a price: a float or an integer of dollars.
func dollars(v any) (pricing.Micros, error) {
	switch n := v.(type) {
	case int64:
		return pricing.MicrosOf(float64(n))
	case float64:
		return pricing.MicrosOf(n)
	}
	return 0, fmt.Errorf("want a number of dollars per million tokens, not %s", typeName(v))
}

// prices reads the [prices."MODEL"] tables of p: each replaces the shipped price of its
// model (pricing.Defaults) or prices one the defaults do not know.
func (l *loader) prices(md *toml.MetaData, path string, p toml.Primitive) error {
	var models map[string]map[string]toml.Primitive
	if err := l.value(md, path, "prices", p, isTable); err != nil {
		return err
	}
	if err := md.PrimitiveDecode(p, &models); err != nil {
		return &Error{Source: path, Line: lineOf(md, p), Key: "prices", Err: errors.New(`want [prices."MODEL"] tables of input, output, cache_read, cache_write and cache_write_1h`)}
	}
	names := make([]string, 0, len(models))
	for m := range models {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, model := range names {
		t := models[model]
		table := fmt.Sprintf("prices.%q", model)
		first := lineOf(md, p)
		for _, v := range t {
			if l := lineOf(md, v); first == 0 || (l > 0 && l < first) {
				first = l
			}
		}
		if model == "" || len(model) > 128 || strings.ContainsFunc(model, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return &Error{Source: path, Line: first, Key: table, Err: errors.New("a model name of 1 to 128 characters without spaces, as the API names it")}
		}
		var price pricing.Price
		line := 0
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		// The first mistake in the file is the one reported.
		sort.Slice(keys, func(a, b int) bool { return lineOf(md, t[keys[a]]) < lineOf(md, t[keys[b]]) })
		for _, k := range keys {
			v := t[k]
			field, ok := priceKeys[k]
			if !ok {
				return &Error{Source: path, Line: lineOf(md, v), Key: table + "." + k, Err: errors.New("unknown key (input, output, cache_read, cache_write, cache_write_1h)")}
			}
			var failed error
			err := md.PrimitiveDecode(v, unmarshaler(func(x any) error {
				*field(&price), failed = dollars(x)
				return failed
			}))
			if err != nil {
				if failed == nil {
					failed = err
				}
				return &Error{Source: path, Line: lineOf(md, v), Key: table + "." + k, Err: failed}
			}
			line = max(line, lineOf(md, v))
		}
		for _, k := range []string{"input", "output", "cache_read", "cache_write"} {
			if _, ok := t[k]; !ok {
				return &Error{Source: path, Line: line, Key: table + "." + k, Err: errors.New("required: input, output, cache_read and cache_write are given, in dollars per million tokens")}
			}
		}
		if _, ok := t["cache_write_1h"]; !ok {
			price.CacheWrite1h = 2 * price.Input // the API's price of a 1-hour cache write
		}
		if err := price.Check(); err != nil {
			return &Error{Source: path, Line: line, Key: table, Err: err}
		}
		if l.c.Prices == nil {
			l.c.Prices = map[string]pricing.Price{}
		}
		l.c.Prices[model] = price
	}
	return nil
}
