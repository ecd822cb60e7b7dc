package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/contract"
)

// TestPrompt: each message of a batch says who wrote it, in which chat and when, as far as
// that is known; a message with nothing known is its content alone.
func TestPrompt(t *testing.T) {
	tests := []struct {
		name string
		msgs []contract.Message
		want string
	}{
		{"plain", []contract.Message{{Role: "user", Content: "hi"}}, "hi"},
		{"no role", []contract.Message{{Content: "hi"}}, "hi"},
		{"assistant", []contract.Message{{Role: "assistant", Content: "earlier"}}, "[assistant] earlier"},
		{"a batch of two senders", []contract.Message{
			{Role: "user", Content: "hello", SenderJID: "tg:1", ChatJID: "tg:-100", Time: "2030-01-02T15:04:05Z"},
			{Role: "user", Content: "me too", SenderJID: "tg:2", ChatJID: "tg:-100", Time: "2030-01-02T15:04:06Z"},
			{Role: "user", Content: "injected", Time: "2030-01-02T15:04:07Z"},
		}, "[from tg:1 in tg:-100 at 2030-01-02T15:04:05Z] hello\n\n" +
			"[from tg:2 in tg:-100 at 2030-01-02T15:04:06Z] me too\n\n" +
			"[at 2030-01-02T15:04:07Z] injected"},
		{"a system message with a sender", []contract.Message{{Role: "system", Content: "x", SenderJID: "task:1"}}, "[system from task:1] x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := prompt(tt.msgs); got != tt.want {
				t.Errorf("prompt:\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestResumable(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	const kept = "779a5771-d0fa-4cc6-951f-37875d4270c6"
	dir := filepath.Join(home, ".claude", "projects", "-workspace")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, kept+".jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{kept, true},
		{"0b0b0b0b-0000-4000-8000-000000000000", false}, // a UUID without a transcript
		{"example-main", false},                         // another agent's session
		{"*", false},
		{"../" + kept, false},
		{"", false},
	} {
		if got := resumable(tc.id); got != tc.want {
			t.Errorf("resumable(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

// TestEnvironmentEgressCA: with the egress CA mounted, the tools that read one bundle get
// the system's roots and the CA; a placeholder wins over a value of the env file.
func TestEnvironmentEgressCA(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ARIZUKO_EGRESS_CA", ca)
	t.Setenv("ARIZUKO_CREDENTIALS", "GH_TOKEN")
	t.Setenv("GH_TOKEN", "arizuko-placeholder-x")
	last := map[string]string{}
	for _, kv := range environment("127.0.0.1:1", "127.0.0.1:2") {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	for _, k := range []string{"SSL_CERT_FILE", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE"} {
		b, err := os.ReadFile(last[k])
		if err != nil || !strings.Contains(string(b), "TEST") {
			t.Errorf("%s=%s: %v %q", k, last[k], err, b)
		}
	}
	if last["GH_TOKEN"] != "arizuko-placeholder-x" {
		t.Errorf("GH_TOKEN=%q", last["GH_TOKEN"])
	}
}
