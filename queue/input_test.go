package queue

import (
	"encoding/json"
	"testing"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/store"
)

// TestInboxInput: a batched turn lists every message with its own sender, chat and time;
// the turn answers the last chat named and holds the last sender's memory.
func TestInboxInput(t *testing.T) {
	const at = 1_700_000_000_000
	tests := []struct {
		name    string
		pending []store.InboxMessage
		want    []contract.Message
		sender  string
		chat    string
	}{
		{
			name: "two senders, two chats, an injected message last",
			pending: []store.InboxMessage{
				{SenderJID: "tg:1", ChatJID: "tg:-100", Role: "user", Content: "from alice", CreatedAt: at},
				{SenderJID: "tg:2", ChatJID: "tg:-200", Role: "user", Content: "from bob", CreatedAt: at + 1500},
				{Role: "user", Content: "injected", CreatedAt: at + 2000},
			},
			want: []contract.Message{
				{Role: "user", Content: "from alice", SenderJID: "tg:1", ChatJID: "tg:-100", Time: "2023-11-14T22:13:20Z"},
				{Role: "user", Content: "from bob", SenderJID: "tg:2", ChatJID: "tg:-200", Time: "2023-11-14T22:13:21.5Z"},
				{Role: "user", Content: "injected", Time: "2023-11-14T22:13:22Z"},
			},
			sender: "tg:2", chat: "tg:-200",
		},
		{
			name:    "no chat, no sender",
			pending: []store.InboxMessage{{Content: "hi", CreatedAt: at}},
			want:    []contract.Message{{Role: "user", Content: "hi", Time: "2023-11-14T22:13:20Z"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := inboxInput(tt.pending)
			if len(in.Messages) != len(tt.want) {
				t.Fatalf("%d messages, want %d", len(in.Messages), len(tt.want))
			}
			for i, w := range tt.want {
				if in.Messages[i] != w {
					t.Errorf("message %d: %+v, want %+v", i, in.Messages[i], w)
				}
			}
			if in.SenderJID != tt.sender || in.ChatJID != tt.chat {
				t.Errorf("sender %q chat %q, want %q %q", in.SenderJID, in.ChatJID, tt.sender, tt.chat)
			}
			// What the store keeps decodes to the same input.
			b, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			var back RunInput
			if err := json.Unmarshal(b, &back); err != nil || len(back.Messages) != len(in.Messages) || back.ChatJID != in.ChatJID {
				t.Errorf("round trip of %s: %+v %v", b, back, err)
			}
		})
	}
}
