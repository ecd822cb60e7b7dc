package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/arizuko/arizukod/store"
)

// InboundMessage is a chat message arriving through POST /v1/messages, as far
// as routing is concerned.
type InboundMessage struct {
	Platform string
	Room     string
	ChatJID  string
	Sender   string
	Verb     string
	Content  string
}

// matchKey indexes the message fields a match may test, in canonical order.
type matchKey int

const (
	keyPlatform matchKey = iota
	keyRoom
	keyChatJID
	keySender
	keyVerb
	numMatchKeys
)

var matchKeyNames = [numMatchKeys]string{"platform", "room", "chat_jid", "sender", "verb"}

func (k matchKey) field(msg InboundMessage) string {
	switch k {
	case keyPlatform:
		return msg.Platform
	case keyRoom:
		return msg.Room
	case keyChatJID:
		return msg.ChatJID
	case keySender:
		return msg.Sender
	}
	return msg.Verb
}

type matchTerm struct {
	key  matchKey
	glob Glob
}

// Match is a parsed route match expression; see ROUTES.md. The zero Match
// has no terms and matches every message.
type Match struct {
	terms []matchTerm // at most one per key, in canonical key order
}

// ParseMatch parses a route match expression: whitespace-separated key=glob
// terms over platform, room, chat_jid, sender and verb, each key at most once,
// no space around '='. A value is bare (up to the next whitespace; '"' must be
// escaped) or quoted "..." (\" is a quote). An expression with no terms
// matches every message. Errors name the column and the problem.
func ParseMatch(text string) (Match, error) {
	s := &scanner{what: "route match", in: text}
	if !utf8.ValidString(text) {
		return Match{}, s.errAt(invalidUTF8At(text), "invalid UTF-8")
	}
	var byKey [numMatchKeys]*Glob
	for {
		s.skipSpace()
		if s.eof() {
			break
		}
		keyStart := s.pos
		name := s.ident()
		if name == "" {
			return Match{}, s.errAt(s.pos, "expected a key (%s), found %s", strings.Join(matchKeyNames[:], ", "), s.next())
		}
		key := matchKey(-1)
		for k, n := range matchKeyNames {
			if n == name {
				key = matchKey(k)
			}
		}
		if key < 0 {
			return Match{}, s.errAt(keyStart, "unknown key %q (keys: %s)", name, strings.Join(matchKeyNames[:], ", "))
		}
		if byKey[key] != nil {
			return Match{}, s.errAt(keyStart, "key %q given twice", name)
		}
		if s.eof() || s.peek() != '=' {
			return Match{}, s.errAt(s.pos, "expected '=' right after key %q, found %s", name, s.next())
		}
		s.pos++
		g, err := s.value(name, func(byte) bool { return false }, `"`, false)
		if err != nil {
			return Match{}, err
		}
		byKey[key] = &g
	}
	var m Match
	for k, g := range byKey {
		if g != nil {
			m.terms = append(m.terms, matchTerm{key: matchKey(k), glob: *g})
		}
	}
	return m, nil
}

// Matches reports whether every term's glob matches its field of msg.
func (m Match) Matches(msg InboundMessage) bool {
	for _, t := range m.terms {
		if !t.glob.Match(t.key.field(msg)) {
			return false
		}
	}
	return true
}

// String renders the canonical form: terms in the order platform, room,
// chat_jid, sender, verb, separated by one space, values quoted only when
// needed. ParseMatch of it gives the same Match.
func (m Match) String() string {
	parts := make([]string, len(m.terms))
	for i, t := range m.terms {
		parts[i] = matchKeyNames[t.key] + "=" + quoteValue(t.glob.pattern)
	}
	return strings.Join(parts, " ")
}

// RouteEntry is one row of the routes table.
type RouteEntry struct {
	ID     int64
	Seq    int64
	Match  Match
	Target string // folder whose inbox receives the message
	Owner  string // "" for the operator's routes, else the folder of the group that added it
}

// Route returns the folder whose inbox receives msg. Routes are taken in
// layers by owner, each layer in order of Seq, then ID (the order of routes
// does not matter):
//
//  1. The operator's routes (Owner ""): the first one matching msg picks a
//     folder. None matching: msg has no target.
//  2. The routes owned by the folder picked last: the first one matching msg
//     picks the next folder, and its routes are consulted in turn. A route to
//     its own owner stops there. None matching: msg goes to that folder.
//
// So a group's routes decide only for messages already routed to the group
// itself, never before or instead of the operator's or an ancestor's, and no
// seq or match of theirs takes anything that was not theirs. A group's route
// leaves its owner's subtree only where follow allows it (an operator's
// grant); follow nil allows none. A route back to a folder the message
// already passed, or one follow refuses, counts as absent.
func Route(routes []RouteEntry, msg InboundMessage, follow func(RouteEntry) bool) (target string, ok bool) {
	r := firstOf(routes, "", msg, nil)
	if r == nil {
		return "", false
	}
	target = r.Target
	passed := map[string]bool{target: true}
	for {
		next := firstOf(routes, target, msg, func(r *RouteEntry) bool {
			switch {
			case r.Target == target:
				return true
			case passed[r.Target]:
				return false
			case InSubtree(target, r.Target):
				return true
			}
			return follow != nil && follow(*r)
		})
		if next == nil || next.Target == target {
			return target, true
		}
		target = next.Target
		passed[target] = true
	}
}

// firstOf returns the first route of owner, in (Seq, ID) order, that matches
// msg and that usable (when not nil) accepts.
func firstOf(routes []RouteEntry, owner string, msg InboundMessage, usable func(*RouteEntry) bool) *RouteEntry {
	var best *RouteEntry
	for i := range routes {
		r := &routes[i]
		if r.Owner != owner || best != nil && (r.Seq > best.Seq || r.Seq == best.Seq && r.ID >= best.ID) {
			continue
		}
		if r.Match.Matches(msg) && (usable == nil || usable(r)) {
			best = r
		}
	}
	return best
}

// RouteSource is what routing reads: the routes and the grant rules of the
// groups that own routes out of their subtree. *store.Store implements it.
type RouteSource interface {
	ListRoutes(ctx context.Context) ([]store.Route, error)
	GetGrants(ctx context.Context, folder string) ([]string, error)
}

// RouteInbound is the routing of POST /v1/messages: it reads every route and
// resolves msg through them with Route. A route a group added out of its
// subtree is followed only while the group's tier and grant rules, read now,
// would still let it add that route (add_route with the route's seq, match
// and target, decided by a rule naming the target, see Rules.Reaches): when
// the operator takes the grant back, the route stops forwarding. A stored
// match that no longer parses is reported to skip and the route ignored.
func RouteInbound(ctx context.Context, src RouteSource, msg InboundMessage, skip func(store.Route, error)) (target string, ok bool, err error) {
	stored, err := src.ListRoutes(ctx)
	if err != nil {
		return "", false, err
	}
	routes := make([]RouteEntry, 0, len(stored))
	for _, r := range stored {
		m, err := ParseMatch(r.Match)
		if err != nil {
			if skip != nil {
				skip(r, err)
			}
			continue
		}
		routes = append(routes, RouteEntry{ID: r.ID, Seq: r.Seq, Match: m, Target: r.Target, Owner: r.Owner})
	}
	var readErr error
	target, ok = Route(routes, msg, func(r RouteEntry) bool {
		granted, err := forwardGranted(ctx, src, r)
		if err != nil && readErr == nil {
			readErr = err
		}
		return granted
	})
	if readErr != nil {
		return "", false, readErr
	}
	return target, ok, nil
}

// forwardGranted reports whether r's owner may still have r, a route out of
// its subtree: its tier has add_route, its rules parse, name no unknown
// parameter of add_route, and reach r's target.
func forwardGranted(ctx context.Context, src RouteSource, r RouteEntry) (bool, error) {
	if !TierAllows("add_route", FolderTier(r.Owner)) {
		return false, nil
	}
	list, err := src.GetGrants(ctx, r.Owner)
	if errors.Is(err, store.ErrNotFound) || err == nil && len(list) == 0 {
		return false, nil // the default "*" names no target; no rules allow nothing
	}
	if err != nil {
		return false, fmt.Errorf("ipc: grant rules of %s: %w", r.Owner, err)
	}
	rules, err := ParseRules(list)
	if err != nil || RuleProblem(rules, "add_route") != "" {
		return false, nil
	}
	params := map[string]any{"seq": json.Number(strconv.FormatInt(r.Seq, 10)), "match": r.Match.String(), "target": r.Target}
	return rules.Reaches("add_route", params, "target"), nil
}
