package ipc

import (
	"strings"
	"unicode/utf8"
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
		g, err := s.value(name, func(byte) bool { return false }, `"`)
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
}

// Route returns the target of the first route matching msg, routes taken in
// order of Seq, then ID (the order of routes does not matter).
func Route(routes []RouteEntry, msg InboundMessage) (target string, ok bool) {
	var best *RouteEntry
	for i := range routes {
		r := &routes[i]
		if best != nil && (r.Seq > best.Seq || r.Seq == best.Seq && r.ID >= best.ID) {
			continue
		}
		if r.Match.Matches(msg) {
			best = r
		}
	}
	if best == nil {
		return "", false
	}
	return best.Target, true
}
