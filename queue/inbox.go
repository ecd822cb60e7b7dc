package queue

import (
	"context"
	"encoding/json"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/store"
)

// makeInboxRuns turns each folder's pending inbox messages into one queued run.
func (q *Queue) makeInboxRuns(ctx context.Context) {
	folders, err := q.cfg.Store.PendingFolders(ctx)
	if err != nil {
		q.log.Error("pending inbox folders", "err", err)
		return
	}
	for _, f := range folders {
		run, err := q.cfg.Store.CreateInboxRun(ctx, f, q.cfg.InboxBatch, func(pending []store.InboxMessage) (store.Run, error) {
			b, err := json.Marshal(inboxInput(pending))
			return store.Run{Folder: f, Input: b}, err
		})
		if err != nil {
			q.log.Error("make inbox run", logging.FieldFolder, f, "err", err)
			continue
		}
		if run != nil {
			q.log.Info("inbox run queued", logging.FieldRunID, run.ID, logging.FieldFolder, f, "messages", run.InboxLast-run.InboxFirst+1)
		}
	}
}

// inboxInput is the input of a turn over pending inbox messages: each message with its
// sender, chat and time; the last sender's memory; the last chat as the one it answers.
func inboxInput(pending []store.InboxMessage) RunInput {
	in := RunInput{}
	for _, m := range pending {
		role := m.Role
		if role == "" {
			role = "user"
		}
		in.Messages = append(in.Messages, contract.Message{Role: role, Content: m.Content,
			SenderJID: m.SenderJID, ChatJID: m.ChatJID, Time: time.UnixMilli(m.CreatedAt).UTC().Format(time.RFC3339Nano)})
		if m.SenderJID != "" {
			in.SenderJID = m.SenderJID
		}
	}
	in.ChatJID = contract.ReplyChat(in.Messages)
	return in
}

// RunInput is the input JSON a run carries in the store.
type RunInput struct {
	Messages  []contract.Message `json:"messages"`
	SessionID string             `json:"sessionId,omitempty"`
	SenderJID string             `json:"senderJid,omitempty"`
	// ChatJID is the chat the turn answers; empty: the last message's that has one.
	ChatJID string `json:"chatJid,omitempty"`
}
