package main

import (
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
