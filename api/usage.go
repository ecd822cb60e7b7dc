package api

import (
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/pricing"
	"github.com/arizuko/arizukod/store"
)

// prices is the daemon's price table (Server.Prices), or the shipped one.
func (s *Server) prices() pricing.Table {
	if s.Prices == nil {
		return pricing.Defaults()
	}
	return s.Prices()
}

func (s *Server) location() *time.Location {
	if s.Location == nil {
		return time.Local
	}
	return s.Location
}

// parseSince reads since: a date (YYYY-MM-DD, its midnight in loc) or an RFC 3339 time;
// "" is def.
func parseSince(v string, loc *time.Location, def time.Time) (time.Time, bool) {
	if v == "" {
		return def, true
	}
	if t, err := time.ParseInLocation(time.DateOnly, v, loc); err == nil {
		return t, true
	}
	t, err := time.Parse(time.RFC3339, v)
	return t.In(loc), err == nil
}

func wireCost(c pricing.Cost) apiwire.Cost {
	return apiwire.Cost{Micros: int64(c.Micros), USD: c.Micros.USD(), Unpriced: c.Unpriced}
}

func tokensOf(u store.ModelUsage) pricing.Tokens {
	return pricing.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens, CacheWrite: u.CacheWriteTokens,
		CacheWrite1h: u.CacheWrite1hTokens}
}

// under says whether folder is g or below it.
func under(folder, g string) bool {
	return folder == g || groupfolder.Folder(g).IsAncestorOf(groupfolder.Folder(folder))
}

// getUsage answers GET /v1/usage?folder=F&since=D: what the model usage of F's subtree
// (every group's without F) cost today, this month and since D (default: the month's
// start), per group with its subtree's, and per model.
func (s *Server) getUsage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	folder := q.Get("folder")
	if folder != "" {
		if _, err := groupfolder.Parse(folder); err != nil {
			writeErr(w, http.StatusBadRequest, "folder", "folder: %v", err)
			return
		}
	}
	loc := s.location()
	now := time.Now().In(loc)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, loc)
	since, ok := parseSince(q.Get("since"), loc, month)
	if !ok {
		writeErr(w, http.StatusBadRequest, "since", "since: %q is not a date (2026-11-01) or an RFC 3339 time (2026-11-01T08:00:00Z)", q.Get("since"))
		return
	}
	if since.After(now) {
		writeErr(w, http.StatusBadRequest, "since", "since: %s is in the future", since.Format(time.RFC3339))
		return
	}
	prices := s.prices()
	end := now.UnixMilli() + store.UsageBucket
	ranges := []time.Time{today, month, since}
	rows := make([][]store.ModelUsage, len(ranges))
	for i, from := range ranges {
		var err error
		if rows[i], err = s.store.ModelUsage(r.Context(), folder, from.UnixMilli(), end); err != nil {
			s.internal(w, r, err)
			return
		}
	}
	// The groups: every folder with usage, its ancestors within the subtree, and folder.
	seen := map[string]bool{}
	if folder != "" {
		seen[folder] = true
	}
	for _, rs := range rows {
		for _, u := range rs {
			for f := groupfolder.Folder(u.Folder); f != ""; f, _ = f.Parent() {
				if folder != "" && !under(string(f), folder) {
					break
				}
				seen[string(f)] = true
			}
		}
	}
	groups := make([]string, 0, len(seen))
	for f := range seen {
		groups = append(groups, f)
	}
	sort.Strings(groups)
	rep := apiwire.UsageReport{Folder: folder, Since: since.Format(time.RFC3339), Today: today.Format(time.RFC3339),
		Month: month.Format(time.RFC3339), PricesAsOf: prices.AsOf, Groups: []apiwire.GroupUsage{}, Models: []apiwire.ModelUsage{}}
	for _, g := range groups {
		var own, sub [3]pricing.Cost
		for i, rs := range rows {
			for _, u := range rs {
				if u.Folder == g {
					own[i].Add(prices, u.Model, tokensOf(u))
				}
				if under(u.Folder, g) {
					sub[i].Add(prices, u.Model, tokensOf(u))
				}
			}
		}
		rep.Groups = append(rep.Groups, apiwire.GroupUsage{Folder: g,
			Today: wireCost(own[0]), Month: wireCost(own[1]), Since: wireCost(own[2]),
			SubtreeToday: wireCost(sub[0]), SubtreeMonth: wireCost(sub[1]), SubtreeSince: wireCost(sub[2])})
	}
	byModel := map[string]*pricing.Tokens{}
	var total pricing.Cost
	for _, u := range rows[2] {
		t := byModel[u.Model]
		if t == nil {
			t = &pricing.Tokens{}
			byModel[u.Model] = t
		}
		t.Add(tokensOf(u))
		total.Add(prices, u.Model, tokensOf(u))
	}
	models := slices.Sorted(func(yield func(string) bool) {
		for m := range byModel {
			if !yield(m) {
				return
			}
		}
	})
	for _, m := range models {
		t := byModel[m]
		mu := apiwire.ModelUsage{Model: m, InputTokens: t.Input, OutputTokens: t.Output, CacheReadTokens: t.CacheRead, CacheWriteTokens: t.CacheWrite,
			CacheWrite1hTokens: t.CacheWrite1h}
		if p, ok := prices.Lookup(m); ok {
			c := wireCost(pricing.Cost{Micros: p.Cost(*t)})
			mu.Cost = &c
		}
		rep.Models = append(rep.Models, mu)
	}
	rep.Total = wireCost(total)
	writeJSON(w, http.StatusOK, rep)
}

// getPrices answers GET /v1/prices: the daemon's price table.
func (s *Server) getPrices(w http.ResponseWriter, _ *http.Request) {
	t := s.prices()
	out := apiwire.Prices{AsOf: t.AsOf, Source: pricing.DefaultsSource, Prices: []apiwire.Price{}}
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for m := range t.Prices {
			if !yield(m) {
				return
			}
		}
	}) {
		p := t.Prices[m]
		c := func(v pricing.Micros) apiwire.Cost { return apiwire.Cost{Micros: int64(v), USD: v.Exact()} }
		out.Prices = append(out.Prices, apiwire.Price{Model: m, Input: c(p.Input), Output: c(p.Output), CacheRead: c(p.CacheRead), CacheWrite: c(p.CacheWrite),
			CacheWrite1h: c(p.CacheWrite1h)})
	}
	writeJSON(w, http.StatusOK, out)
}
