package ipc

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/ipc/policy"
)

// TestSpecsCoverTheTierTable: every tool of the tier table has a spec and
// no spec lacks a tier.
func TestSpecsCoverTheTierTable(t *testing.T) {
	var names []string
	for name, spec := range specs {
		names = append(names, name)
		if spec.name != name || spec.desc == "" || spec.run == nil {
			t.Errorf("spec %s is incomplete", name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, policy.Tools()) {
		t.Errorf("specs %v\ntools %v", names, policy.Tools())
	}
}

func TestRuleProblem(t *testing.T) {
	tests := []struct {
		rules []string
		tool  string
		want  string // "" for none
	}{
		{[]string{"*"}, "send_message", ""},
		{[]string{"!send_message(chat_jid=tg:*)"}, "send_message", ""},
		{[]string{"!send_message(chat=tg:*)"}, "send_message", "names parameter chat, which send_message does not have (its parameters: chat_jid, text)"},
		{[]string{"!send_message(chat=tg:*)"}, "send_reply", ""},
		// A glob rule may name a parameter only some of its tools have.
		{[]string{"!*(folder=main/secret*)"}, "get_groups", ""},
		{[]string{"!*(folder=main/secret*)"}, "inject_message", ""},
		{[]string{"send_*(child=x)"}, "send_reply", "which none of the tools it matches (send_document, send_message, send_reply) has"},
		{[]string{"*", "!*(chatjid=x)"}, "list_routes", "names parameter chatjid"},
	}
	for _, tt := range tests {
		rules, err := policy.ParseRules(tt.rules)
		if err != nil {
			t.Fatal(err)
		}
		got := policy.RuleProblem(rules, tt.tool)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("policy.RuleProblem(%q, %s) = %q, want %q", tt.rules, tt.tool, got, tt.want)
		}
	}
}

func TestWorkspaceRel(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"out/a.pdf", "out/a.pdf", ""},
		{"/workspace/out/a.pdf", "out/a.pdf", ""},
		{"./out//a.pdf", "out/a.pdf", ""},
		{"out/./a.pdf", "out/a.pdf", ""},
		{"out/../a.pdf", "", "must not contain '..'"},
		{"/workspace/../etc/passwd", "", "must not contain '..'"},
		{"/workspacex/a", "", "is not under /workspace"},
		{"/etc/passwd", "", "is not under /workspace"},
		{".", "", "names /workspace itself"},
		{"/workspace/", "", "names /workspace itself"},
	}
	for _, tt := range tests {
		got, err := workspaceRel(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "bad argument path") {
				t.Errorf("workspaceRel(%q) = %q, %v; want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("workspaceRel(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// FuzzWorkspaceRel: an accepted path is relative, clean and never climbs.
func FuzzWorkspaceRel(f *testing.F) {
	for _, s := range []string{"a", "/workspace/a/b", "../x", "a/../../b", "/workspace/..", "a//b/./c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := workspaceRel(p)
		if err != nil {
			return
		}
		if rel == "" || strings.HasPrefix(rel, "/") || rel == "." || slices.Contains(strings.Split(rel, "/"), "..") {
			t.Fatalf("workspaceRel(%q) = %q", p, rel)
		}
	})
}

// FuzzToolArgs feeds arbitrary JSON to every tool's argument check: it
// never panics, and what it accepts has only the tool's parameters, each
// within its limit.
func FuzzToolArgs(f *testing.F) {
	for _, s := range []string{`{}`, `null`, `[]`, `{"text":"x","chat_jid":"tg:1"}`, `{"seq":"7","match":"","target":"main"}`,
		`{"routes":[{"seq":1,"match":"room=1","target":"main/a"}]}`, `{"id":1e400}`, `{"seq":9007199254740993}`, `{"text":null}`} {
		f.Add(s)
	}
	tools := policy.Tools()
	f.Fuzz(func(t *testing.T, in string) {
		for _, name := range tools {
			spec := specs[name]
			m, err := decodeArgs(json.RawMessage(in))
			if err != nil {
				continue
			}
			a, err := checkArgs(spec.params, m, "")
			if err != nil {
				if !strings.HasPrefix(err.Error(), "bad argument ") {
					t.Fatalf("%s: error %q does not name an argument", name, err)
				}
				continue
			}
			for k, v := range a {
				i := slices.IndexFunc(spec.params, func(p param) bool { return p.name == k })
				if i < 0 {
					t.Fatalf("%s: accepted unknown %s", name, k)
				}
				if s, ok := v.(string); ok && len(s) > spec.params[i].max {
					t.Fatalf("%s: accepted %s of %d bytes", name, k, len(s))
				}
			}
			if name == "set_routes" {
				a.routes("routes")
			}
			if err := policy.CheckCall(name, policy.TierRoot, policy.DefaultRules(), a); err != nil {
				t.Fatalf("%s: default rules denied checked arguments: %v", name, err)
			}
		}
	})
}
