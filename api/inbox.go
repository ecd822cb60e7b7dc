package api

import (
	"net/http"
	"time"
)

// InboxMessage is a pending inbox message on the wire.
type InboxMessage struct {
	ID        int64  `json:"id"`
	SenderJID string `json:"senderJid,omitempty"`
	ChatJID   string `json:"chatJid,omitempty"`
	Role      string `json:"role"`
	Content   string `json:"content"`
	Source    string `json:"source"`
	CreatedAt string `json:"createdAt"`
}

// Inbox is the body of GET /v1/groups/{folder}/messages: the folder's cursor and the
// messages waiting past it (those of a turn still running included).
type Inbox struct {
	Folder        string         `json:"folder"`
	LastDoneID    int64          `json:"lastDoneId"`
	Retries       int            `json:"retries,omitempty"`
	LastError     string         `json:"lastError,omitempty"`
	NextAttemptAt string         `json:"nextAttemptAt,omitempty"`
	ParkedReason  string         `json:"parkedReason,omitempty"`
	ParkedAt      string         `json:"parkedAt,omitempty"`
	Pending       []InboxMessage `json:"pending"`
}

func (s *Server) listInbox(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok {
		return
	}
	limit, ok := queryInt(w, r, "limit", 100, 1, 10000)
	if !ok || !s.knownGroup(w, r, f) {
		return
	}
	c, err := s.store.GetCursor(r.Context(), string(f))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	msgs, err := s.store.PendingInbox(r.Context(), string(f), int(limit))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := Inbox{Folder: string(f), LastDoneID: c.LastDoneID, Retries: c.Retries, LastError: c.LastError,
		ParkedReason: c.ParkedReason, ParkedAt: msTime(c.ParkedAt), Pending: make([]InboxMessage, 0, len(msgs))}
	if c.NextAttemptAt > time.Now().UnixMilli() {
		out.NextAttemptAt = msTime(c.NextAttemptAt)
	}
	for _, m := range msgs {
		out.Pending = append(out.Pending, InboxMessage{ID: m.ID, SenderJID: m.SenderJID, ChatJID: m.ChatJID,
			Role: m.Role, Content: m.Content, Source: string(m.Source), CreatedAt: msTime(m.CreatedAt)})
	}
	writeJSON(w, http.StatusOK, out)
}
