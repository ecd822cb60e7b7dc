package api

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/ipc/policy"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

func wireGroup(g *store.Group) apiwire.Group {
	return apiwire.Group{Folder: g.Folder, Parent: g.Parent, Name: g.Name, Description: g.Description,
		Tier: policy.FolderTier(g.Folder), ContainerConfig: g.ContainerConfig}
}

func (s *Server) putGroup(w http.ResponseWriter, r *http.Request) {
	var req apiwire.PutGroupRequest
	if !decode(w, r, &req) {
		return
	}
	f, err := parseFolder(req.Folder)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "folder", "%v", err)
		return
	}
	if len(req.ContainerConfig) > 0 && string(req.ContainerConfig) != "null" {
		c, err := turn.ParseContainerConfig(req.ContainerConfig, s.Networks)
		if err == nil {
			err = c.CheckRuntime(s.Runtimes)
		}
		if err != nil {
			field := "containerConfig"
			var ce *turn.ConfigError
			if errors.As(err, &ce) && ce.Field != "" {
				field += "." + ce.Field
			}
			writeErr(w, http.StatusBadRequest, field, "containerConfig: %v", err)
			return
		}
	} else {
		req.ContainerConfig = nil
	}
	parent, _ := f.Parent()
	g, err := s.store.UpsertGroup(r.Context(), store.Group{Folder: string(f), Parent: string(parent),
		Name: req.Name, Description: req.Description, ContainerConfig: req.ContainerConfig})
	if errors.Is(err, store.ErrNotFound) {
		writeErr(w, http.StatusBadRequest, "folder", "folder %q: its parent %q is not registered", f, parent)
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wireGroup(g))
}

func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) {
	groups, err := s.store.ListGroups(r.Context())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := make([]apiwire.Group, 0, len(groups))
	for i := range groups {
		out = append(out, wireGroup(&groups[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": out})
}

func (s *Server) getGroup(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok {
		return
	}
	g, err := s.store.GetGroup(r.Context(), string(f))
	if errors.Is(err, store.ErrNotFound) {
		writeErr(w, http.StatusNotFound, "folder", "unknown group %q", f)
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wireGroup(g))
}

func (s *Server) appendInbox(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok {
		return
	}
	var req apiwire.InboxRequest
	if !decode(w, r, &req) || !messagesField(w, "messages", req.Messages) ||
		!jidField(w, "senderJid", req.SenderJID) || !jidField(w, "chatJid", req.ChatJID) {
		return
	}
	for i, m := range req.Messages {
		if m.Time != "" {
			field := fmt.Sprintf("messages[%d].time", i)
			writeErr(w, http.StatusBadRequest, field, "%s: the inbox records when a message arrives; leave time out", field)
			return
		}
	}
	if !s.knownGroup(w, r, f) {
		return
	}
	msgs := make([]store.InboxMessage, 0, len(req.Messages))
	for _, m := range req.Messages {
		role := m.Role
		if role == "" {
			role = "user"
		}
		msgs = append(msgs, store.InboxMessage{SenderJID: cmp.Or(m.SenderJID, req.SenderJID), ChatJID: cmp.Or(m.ChatJID, req.ChatJID),
			Role: role, Content: m.Content, Source: store.SourceAPI})
	}
	ids, err := s.store.AppendInbox(r.Context(), string(f), msgs...)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.queue.Wake()
	writeJSON(w, http.StatusAccepted, map[string]any{"folder": f, "ids": ids})
}

func (s *Server) putGrants(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok {
		return
	}
	var req apiwire.GrantsRequest
	if !decode(w, r, &req, "rules") || !s.knownGroup(w, r, f) {
		return
	}
	if req.Rules == nil {
		writeErr(w, http.StatusBadRequest, "rules", `rules: required (use [] to allow nothing, ["*"] for the tier alone)`)
		return
	}
	for i, rule := range req.Rules {
		if _, err := policy.ParseRule(rule); err != nil {
			writeErr(w, http.StatusBadRequest, "rules", "rules[%d]: %v", i, err)
			return
		}
	}
	if err := s.store.SetGrants(r.Context(), string(f), req.Rules); err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"folder": f, "rules": req.Rules})
}

func (s *Server) getGrants(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok || !s.knownGroup(w, r, f) {
		return
	}
	rules, err := s.store.GetGrants(r.Context(), string(f))
	isDefault := errors.Is(err, store.ErrNotFound)
	if isDefault {
		rules, err = []string{"*"}, nil
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"folder": f, "rules": rules, "default": isDefault})
}

func (s *Server) listOutbox(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok || !s.knownGroup(w, r, f) {
		return
	}
	since, ok := queryInt(w, r, "since", 0, 0, 1<<62)
	if !ok {
		return
	}
	limit, ok := queryInt(w, r, "limit", 100, 1, 10000)
	if !ok {
		return
	}
	items, err := s.store.ListOutbox(r.Context(), string(f), since, int(limit))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := make([]apiwire.OutboxItem, 0, len(items))
	for _, it := range items {
		out = append(out, apiwire.OutboxItem{ID: it.ID, RunID: it.RunID, Kind: string(it.Kind), Target: it.Target,
			Content: it.Content, DocPath: it.DocPath, DocName: it.DocName, CreatedAt: msTime(it.CreatedAt)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"folder": f, "items": out})
}

func (s *Server) unpark(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok || !s.knownGroup(w, r, f) {
		return
	}
	c, err := s.store.Unpark(r.Context(), string(f))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.queue.Wake()
	writeJSON(w, http.StatusOK, map[string]any{"folder": f, "lastDoneId": c.LastDoneID})
}

// dropInbox drops a pending message of the folder: kept in the store as dropped, with who
// and when, and given to no turn; the folder's retries and parked state are cleared.
func (s *Server) dropInbox(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok || !s.knownGroup(w, r, f) {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeErr(w, http.StatusBadRequest, "id", "id: %q is not a message id (a positive number: `arizukod inbox list --folder %s` shows them)", r.PathValue("id"), f)
		return
	}
	var req apiwire.DropRequest
	if !decode(w, r, &req, "by") {
		return
	}
	if strings.TrimSpace(req.By) == "" || len(req.By) > 256 || strings.ContainsFunc(req.By, unicode.IsControl) {
		writeErr(w, http.StatusBadRequest, "by", "by: required: who drops the message, at most 256 bytes without control characters")
		return
	}
	c, err := s.store.DropInbox(r.Context(), string(f), id, req.By)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeErr(w, http.StatusNotFound, "id", "%v", errors.Unwrap(err))
		return
	case errors.Is(err, store.ErrConflict):
		writeErr(w, http.StatusConflict, "id", "%v", errors.Unwrap(err))
		return
	case err != nil:
		s.internal(w, r, err)
		return
	}
	s.queue.Wake()
	writeJSON(w, http.StatusOK, map[string]any{"folder": f, "dropped": id, "by": req.By, "lastDoneId": c.LastDoneID})
}

func (s *Server) inbound(w http.ResponseWriter, r *http.Request) {
	var req apiwire.InboundMessage
	if !decode(w, r, &req) {
		return
	}
	if req.Content == "" {
		writeErr(w, http.StatusBadRequest, "content", "content: required")
		return
	}
	if !jidField(w, "chatJid", req.ChatJID) || !jidField(w, "sender", req.Sender) {
		return
	}
	msg := policy.InboundMessage{Platform: req.Platform, Room: req.Room, ChatJID: req.ChatJID, Sender: req.Sender, Verb: req.Verb, Content: req.Content}
	target, ok, err := policy.RouteInbound(r.Context(), s.store, msg, func(rt store.Route, err error) {
		s.log.Warn("stored route does not parse; skipped", "route", rt.ID, "match", rt.Match, "err", err)
	})
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if !ok {
		writeErr(w, http.StatusUnprocessableEntity, "", "no route matches this message (platform=%q room=%q chatJid=%q sender=%q verb=%q)", req.Platform, req.Room, req.ChatJID, req.Sender, req.Verb)
		return
	}
	if _, err := groupfolder.Parse(target); err != nil {
		s.internal(w, r, err)
		return
	}
	ids, err := s.store.AppendInbox(r.Context(), target, store.InboxMessage{SenderJID: req.Sender, ChatJID: req.ChatJID, Role: "user", Content: req.Content, Source: store.SourceRoute})
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.queue.Wake()
	writeJSON(w, http.StatusAccepted, map[string]any{"folder": target, "ids": ids})
}
