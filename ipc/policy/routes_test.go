package policy

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func mustMatch(t testing.TB, s string) Match {
	t.Helper()
	m, err := ParseMatch(s)
	if err != nil {
		t.Fatalf("ParseMatch(%q): %v", s, err)
	}
	return m
}

func TestParseMatch(t *testing.T) {
	tests := []struct{ in, canonical string }{
		{"", ""},
		{"   \t", ""},
		{"room=-5075870332", "room=-5075870332"},
		{"platform=telegram verb=mention", "platform=telegram verb=mention"},
		{"verb=mention   platform=\"telegram\"", "platform=telegram verb=mention"},
		{`sender="tg:*"`, "sender=tg:*"},
		{`verb=x sender=s chat_jid=c room=r platform=p`, "platform=p room=r chat_jid=c sender=s verb=x"},
		{`room="general chat"`, `room="general chat"`},
		{`room=""`, `room=""`},
		{`room=a\ b`, `room="a\ b"`},
		{`sender="say \"hi\""`, `sender="say \"hi\""`},
		{`sender=a=b`, `sender=a=b`},
		{`room=f(x),y`, `room="f(x),y"`},
		{"room=\"tab\there\"", "room=\"tab\there\""},
	}
	for _, tt := range tests {
		m, err := ParseMatch(tt.in)
		if err != nil {
			t.Errorf("ParseMatch(%q): %v", tt.in, err)
			continue
		}
		if m.String() != tt.canonical {
			t.Errorf("ParseMatch(%q).String() = %q, want %q", tt.in, m.String(), tt.canonical)
		}
		again := mustMatch(t, m.String())
		if again.String() != m.String() {
			t.Errorf("re-parse of %q gives %q", m.String(), again.String())
		}
	}
}

func TestParseMatchErrors(t *testing.T) {
	tests := []struct {
		in     string
		column int
		msg    string
	}{
		{"chat=1", 1, `unknown key "chat" (keys: platform, room, chat_jid, sender, verb)`},
		{"room=1 Room=2", 8, `unknown key "Room"`},
		{"room=1 room=2", 8, `key "room" given twice`},
		{"room", 5, `expected '=' right after key "room", found end of input`},
		{"room =1", 5, `expected '=' right after key "room", found ' '`},
		{"room=", 6, `missing value for room`},
		{"room= verb=x", 6, `missing value for room`},
		{"=x", 1, "expected a key"},
		{"room=1 -x", 8, "expected a key"},
		{`room=a"b`, 7, `unexpected '"'`},
		{`room="ab`, 6, "unterminated quoted value for room"},
		{`room="a"b`, 9, "after the quoted value of room"},
		{`room=[b`, 6, "unterminated character class"},
		{`room="x[b"`, 8, "unterminated character class"},
		{`room=ab\`, 8, "trailing backslash"},
		{"日本=1", 1, "expected a key"},
		{"room=\xff", 6, "invalid UTF-8"},
	}
	for _, tt := range tests {
		_, err := ParseMatch(tt.in)
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseMatch(%q) = %v, want a *SyntaxError", tt.in, err)
			continue
		}
		if se.What != "route match" || se.Column != tt.column || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("ParseMatch(%q): %v\nwant column %d containing %q", tt.in, err, tt.column, tt.msg)
		}
	}
}

func TestMatches(t *testing.T) {
	msg := InboundMessage{Platform: "telegram", Room: "-5075870332", ChatJID: "tg:-5075870332", Sender: "tg:42", Verb: "mention", Content: "hi"}
	tests := []struct {
		match string
		want  bool
	}{
		{"", true},
		{"room=-5075870332", true},
		{"room=-507587033", false},
		{"platform=telegram verb=mention", true},
		{"platform=telegram verb=message", false},
		{`sender="tg:*"`, true},
		{"sender=wa:*", false},
		{"chat_jid=tg:-100*", false},
		{"chat_jid=tg:-*", true},
		{"verb=[!m]*", false},
		{"platform=Telegram", false},
		{"platform=* room=* chat_jid=* sender=* verb=*", true},
	}
	for _, tt := range tests {
		if got := mustMatch(t, tt.match).Matches(msg); got != tt.want {
			t.Errorf("%q.Matches = %v, want %v", tt.match, got, tt.want)
		}
	}
	empty := InboundMessage{}
	if !mustMatch(t, "verb=*").Matches(empty) || mustMatch(t, "verb=?*").Matches(empty) {
		t.Error("verb=* must match a missing verb and verb=?* must not")
	}
	if !(Match{}).Matches(msg) || (Match{}).String() != "" {
		t.Error("the zero Match must match everything and render empty")
	}
}

func TestRoute(t *testing.T) {
	tg := InboundMessage{Platform: "telegram", Room: "1", Verb: "message"}
	tgMention := InboundMessage{Platform: "telegram", Room: "1", Verb: "mention"}
	discord := InboundMessage{Platform: "discord", Room: "2"}
	routes := []RouteEntry{
		{ID: 9, Seq: 100, Match: mustMatch(t, ""), Target: "main"},
		{ID: 4, Seq: 10, Match: mustMatch(t, "platform=telegram"), Target: "main/tg-late"},
		{ID: 3, Seq: 10, Match: mustMatch(t, "platform=telegram"), Target: "main/tg"},
		{ID: 1, Seq: 5, Match: mustMatch(t, "platform=telegram verb=mention"), Target: "main/mentions"},
		{ID: 2, Seq: -1, Match: mustMatch(t, "room=2 platform=slack"), Target: "main/slack"},
	}
	// Layers: main refines what the operator sends to main, main/a what main
	// sends to main/a; other tries every way to take main's messages.
	layered := append(slices.Clone(routes),
		RouteEntry{ID: 20, Seq: 1, Match: mustMatch(t, "platform=discord"), Target: "main/a", Owner: "main"},
		RouteEntry{ID: 21, Seq: 1, Match: mustMatch(t, "room=2"), Target: "main/a/b", Owner: "main/a"},
		RouteEntry{ID: 22, Seq: 0, Match: mustMatch(t, ""), Target: "main/a/b", Owner: "main/a/b"},
		RouteEntry{ID: 23, Seq: 5, Match: mustMatch(t, ""), Target: "main/a/b/c", Owner: "main/a/b"},
		RouteEntry{ID: 30, Seq: math.MinInt64, Match: mustMatch(t, ""), Target: "other", Owner: "other"},
		RouteEntry{ID: 31, Seq: math.MinInt64, Match: mustMatch(t, ""), Target: "main", Owner: "other"},
		RouteEntry{ID: 32, Seq: math.MinInt64, Match: mustMatch(t, "platform=telegram"), Target: "other", Owner: "main/tg"},
		RouteEntry{ID: 33, Seq: math.MinInt64, Match: mustMatch(t, ""), Target: "other", Owner: "main"},
	)
	forwards := []RouteEntry{
		{ID: 1, Seq: 1, Match: mustMatch(t, ""), Target: "other"},
		{ID: 2, Seq: 1, Match: mustMatch(t, "room=1"), Target: "main/x", Owner: "other"},
		{ID: 3, Seq: 2, Match: mustMatch(t, ""), Target: "other/y", Owner: "other"},
		{ID: 4, Seq: 1, Match: mustMatch(t, ""), Target: "other", Owner: "main/x"},
		{ID: 5, Seq: 2, Match: mustMatch(t, ""), Target: "main/x/z", Owner: "main/x"},
	}
	all := func(RouteEntry) bool { return true }
	tests := []struct {
		name   string
		routes []RouteEntry
		follow func(RouteEntry) bool
		msg    InboundMessage
		target string
		ok     bool
	}{
		{"lowest seq wins", routes, nil, tgMention, "main/mentions", true},
		{"same seq lowest id", routes, nil, tg, "main/tg", true},
		{"catch-all", routes, nil, discord, "main", true},
		{"no routes", nil, nil, tg, "", false},
		{"no match", routes[1:], nil, discord, "", false},
		{"group routes alone route nothing", layered[5:], all, tg, "", false},
		{"each layer refines within its subtree; a route to its owner stops", layered, nil, discord, "main/a/b", true},
		{"the operator's pick is not overridden by the parent", layered, nil, tg, "main/tg", true},
		{"a granted forward leaves the subtree", layered, all, tg, "other", true},
		{"a group's catch-all decides only for it", layered, nil, InboundMessage{Platform: "slack", Room: "2"}, "main/slack", true},
		{"other's routes never see main's messages", layered, func(r RouteEntry) bool { return r.Owner == "other" }, InboundMessage{Platform: "irc"}, "main", true},
		{"an ungranted forward is skipped", layered, nil, InboundMessage{Platform: "irc"}, "main", true},
		{"a granted forward is followed", forwards, all, tg, "main/x/z", true},
		{"a refused forward counts as absent", forwards, func(r RouteEntry) bool { return r.Owner != "other" }, tg, "other/y", true},
		{"a route back to a passed folder counts as absent", forwards, all, InboundMessage{Room: "1"}, "main/x/z", true},
	}
	for _, tt := range tests {
		target, ok := Route(tt.routes, tt.msg, tt.follow)
		if target != tt.target || ok != tt.ok {
			t.Errorf("%s: Route = %q, %v; want %q, %v", tt.name, target, ok, tt.target, tt.ok)
		}
	}
}
