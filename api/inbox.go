package api

import (
	"net/http"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
)

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
	out := apiwire.Inbox{Folder: string(f), LastDoneID: c.LastDoneID, Retries: c.Retries, LastError: c.LastError,
		ParkedReason: c.ParkedReason, ParkedAt: msTime(c.ParkedAt), Pending: make([]apiwire.InboxMessage, 0, len(msgs))}
	if c.NextAttemptAt > time.Now().UnixMilli() {
		out.NextAttemptAt = msTime(c.NextAttemptAt)
	}
	for _, m := range msgs {
		out.Pending = append(out.Pending, apiwire.InboxMessage{ID: m.ID, SenderJID: m.SenderJID, ChatJID: m.ChatJID,
			Role: m.Role, Content: m.Content, Source: string(m.Source), CreatedAt: msTime(m.CreatedAt)})
	}
	writeJSON(w, http.StatusOK, out)
}
