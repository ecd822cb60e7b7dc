package turn

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/pricing"
	"github.com/arizuko/arizukod/store"
)

// reserved is what the model requests in flight of a folder's turns reserve: the tokens
// they may still use and what those may cost.
type reserved struct {
	tokens int64
	micros pricing.Micros
}

// reservations are the model requests in flight, by the folder of their turn: what they
// may still use, beyond the usage the store has of them.
type reservations struct {
	// mu is held from reading a budget's usage to reserving against it, so that no two
	// requests reserve the same tokens or money.
	mu   sync.Mutex
	held map[groupfolder.Folder]reserved
}

// inSubtree is what the requests of f and of the folders below it reserve.
func (r *reservations) inSubtree(f groupfolder.Folder) reserved {
	var n reserved
	for g, h := range r.held {
		if g == f || f.IsAncestorOf(g) {
			n.tokens += h.tokens
			n.micros += h.micros
		}
	}
	return n
}

// refuses says whether b has a money budget that refuses requests (refuse or park).
func (b Budget) refuses() bool {
	return (b.PerDay > 0 || b.PerMonth > 0) && (b.Action == BudgetRefuse || b.Action == BudgetPark)
}

// period is the calendar day or month, in the daemon's time zone, of a money budget.
type period struct {
	name   string // "day" or "month"
	key    string // the budget's key: usd_per_day or usd_per_month
	start  time.Time
	limit  pricing.Micros
	resets string
}

// periods are the money budgets of b with the period each counts now.
func periods(b Budget, now time.Time) []period {
	var ps []period
	if b.PerDay > 0 {
		ps = append(ps, period{name: "day", key: "usd_per_day", limit: b.PerDay, resets: "it resets at midnight",
			start: time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())})
	}
	if b.PerMonth > 0 {
		ps = append(ps, period{name: "month", key: "usd_per_month", limit: b.PerMonth, resets: "it resets on the 1st",
			start: time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, now.Location())})
	}
	return ps
}

// subtreeCost is what the model usage of folder's subtree cost from start until now, at
// the gateway's prices.
func (s *Services) subtreeCost(ctx context.Context, folder groupfolder.Folder, start, now time.Time) (pricing.Cost, error) {
	rows, err := s.Store.ModelUsage(ctx, string(folder), start.UnixMilli(), now.UnixMilli()+store.UsageBucket)
	if err != nil {
		return pricing.Cost{}, err
	}
	var c pricing.Cost
	for _, u := range rows {
		c.Add(s.Model.prices, u.Model, pricing.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens,
			CacheWrite: u.CacheWriteTokens, CacheWrite1h: u.CacheWrite1hTokens})
	}
	return c, nil
}

// askCost is the most a request may cost: its input at the dearest of the input and the
// cache-write prices (the agent may ask for all of it to be cached), its max_tokens at
// the output price. false: its model has no price.
func askCost(t pricing.Table, a gateway.Ask) (pricing.Micros, bool) {
	p, ok := t.Lookup(a.Model)
	if !ok {
		return 0, false
	}
	return pricing.Price{Input: max(p.Input, p.CacheWrite, p.CacheWrite1h), Output: p.Output}.Cost(pricing.Tokens{Input: a.Input, Output: a.Output}), true
}

// reserve reserves what a model request of a turn of req.Folder may use, once it fits
// in every budget on the folder's path that refuses, beside what that budget's subtree
// used in its period and what its requests in flight reserve: parallel requests cannot
// overshoot a budget by more than their reservations underestimate. A money budget that
// parks parks req.Folder as it refuses.
func (s *Services) reserve(req Request, chat string, budgets []Budget, log *slog.Logger) func(context.Context, gateway.Ask) (func(), error) {
	loc := s.location()
	r := s.Model.reserved
	f := req.Folder
	money := slices.ContainsFunc(budgets, Budget.refuses)
	return func(ctx context.Context, a gateway.Ask) (func(), error) {
		now := time.Now().In(loc)
		midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
		r.mu.Lock()
		defer r.mu.Unlock()
		ask := reserved{tokens: a.Tokens()}
		if money {
			c, ok := askCost(s.Model.prices, a)
			if !ok {
				return nil, fmt.Errorf("%w: model %q has no price, so no money budget on the path of %s can be kept (containerConfig.model.usd_per_day, usd_per_month); add [prices.%q] to arizukod.toml",
					gateway.ErrBudget, a.Model, f, a.Model)
			}
			ask.micros = c
		}
		for _, b := range budgets {
			held := r.inSubtree(b.Folder)
			if b.TokensPerDay > 0 {
				used, err := s.Store.SubtreeTokens(ctx, string(b.Folder), midnight.UnixMilli())
				if err != nil {
					return nil, err
				}
				if used+held.tokens+ask.tokens > b.TokensPerDay {
					return nil, fmt.Errorf("%w: %s and the groups below it used %d of its %d tokens today and %d more are reserved by requests in flight (containerConfig.model.tokens_per_day of %s); it resets at midnight",
						gateway.ErrBudget, b.Folder, used, b.TokensPerDay, held.tokens, b.Folder)
				}
			}
			if !b.refuses() {
				continue
			}
			for _, p := range periods(b, now) {
				used, err := s.subtreeCost(ctx, b.Folder, p.start, now)
				if err != nil {
					return nil, err
				}
				if used.Micros+held.micros+ask.micros <= p.limit {
					continue
				}
				err = fmt.Errorf("%w: %s and the groups below it spent %s of its %s this %s and %s more are reserved by requests in flight (containerConfig.model.%s of %s), and this request may cost up to %s; %s",
					gateway.ErrBudget, b.Folder, used, p.limit.USD(), p.name, held.micros.USD(), p.key, b.Folder, ask.micros.USD(), p.resets)
				if b.Action == BudgetPark {
					err = s.park(ctx, req, chat, b, p, err, log)
				}
				return nil, err
			}
		}
		h := r.held[f]
		h.tokens += ask.tokens
		h.micros += ask.micros
		r.held[f] = h
		return func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			h := r.held[f]
			h.tokens -= ask.tokens
			h.micros -= ask.micros
			if h == (reserved{}) {
				delete(r.held, f)
			} else {
				r.held[f] = h
			}
		}, nil
	}
}

// park parks the turn's folder for the money budget b that refused a request (why): its
// inbox runs no more until an operator unparks it. The chat and the log hear of it once
// a period.
func (s *Services) park(ctx context.Context, req Request, chat string, b Budget, p period, why error, log *slog.Logger) error {
	reason := fmt.Sprintf("budget reached: containerConfig.model.%s of %s (%s) is spent for this %s, and its budget_action is park", p.key, b.Folder, p.limit.USD(), p.name)
	if _, err := s.Store.Park(ctx, string(req.Folder), reason); err != nil {
		log.Error("park the group for its budget", "err", err)
		return why
	}
	first, err := s.Store.NoteBudget(ctx, string(req.Folder), "park-"+p.name, p.start.UnixMilli(), 100)
	if err != nil {
		log.Error("note the budget notice", "err", err)
	}
	if first {
		log.Warn("model budget reached: the group is parked", "budget", string(b.Folder), "period", p.name, "limit", p.limit.USD())
		s.notice(ctx, req, chat, fmt.Sprintf("Budget reached: %s and the groups below it spent their %s for this %s. The agent is paused until an operator runs `arizukod unpark --folder %s`.",
			b.Folder, p.limit.USD(), p.name, req.Folder), log)
	}
	return fmt.Errorf("%w; %s is parked until an operator runs `arizukod unpark --folder %s`", why, req.Folder, req.Folder)
}

// warnThresholds are the percents of a budget that warns at which its notice is sent.
var warnThresholds = []int{80, 100}

// warnBudgets sends, for each budget on the path whose action is warn, a notice to the
// turn's chat and a warning to the log once its subtree's cost in a period has reached
// 80% and once it has reached 100%: once a period each, and only the highest reached
// when one usage crosses both.
func (s *Services) warnBudgets(ctx context.Context, req Request, chat string, budgets []Budget, log *slog.Logger) {
	now := time.Now().In(s.location())
	for _, b := range budgets {
		if b.Action != BudgetWarn {
			continue
		}
		for _, p := range periods(b, now) {
			used, err := s.subtreeCost(ctx, b.Folder, p.start, now)
			if err != nil {
				log.Error("read the cost of a budget", "budget", string(b.Folder), "err", err)
				continue
			}
			reached := 0
			for _, t := range warnThresholds {
				if int64(used.Micros)*100 >= int64(p.limit)*int64(t) {
					reached = t
				}
			}
			if reached == 0 {
				continue
			}
			send := false
			for _, t := range warnThresholds[:slices.Index(warnThresholds, reached)+1] {
				first, err := s.Store.NoteBudget(ctx, string(b.Folder), p.name, p.start.UnixMilli(), t)
				if err != nil {
					log.Error("note the budget notice", "err", err)
				}
				send = send || (first && t == reached)
			}
			if !send {
				continue
			}
			log.Warn("model budget reached", "budget", string(b.Folder), "period", p.name, "percent", reached,
				"spent", used.String(), "limit", p.limit.USD())
			s.notice(ctx, req, chat, fmt.Sprintf("Budget: %s and the groups below it have spent %s, %d%% of their %s for this %s (containerConfig.model.%s of %s; budget_action warn, so nothing is refused).",
				b.Folder, used, reached, p.limit.USD(), p.name, p.key, b.Folder), log)
		}
	}
}

// notice puts a notice about a budget into the outbox, to the turn's chat.
func (s *Services) notice(ctx context.Context, req Request, chat, text string, log *slog.Logger) {
	it := store.OutboxItem{Folder: string(req.Folder), RunID: s.recordedID(req), Kind: store.OutboxNotice, Target: chat, Content: text}
	if _, err := s.Store.AppendOutbox(ctx, it); err != nil {
		log.Error("put a budget notice into the outbox", "err", err)
	}
}
