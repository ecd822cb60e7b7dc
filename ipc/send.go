package ipc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/arizuko/arizukod/internal/agentdir"
	"github.com/arizuko/arizukod/ipc/policy"
	"github.com/arizuko/arizukod/store"
)

// The tools that send: into the outbox (send_message, send_reply, send_document), into
// an inbox (inject_message, the delegations), and clear_session.

// replyDefaults sends a reply without chat_jid to the chat the turn answers; a turn that
// answers none (a scheduled task, a message that came without a chat) must name one.
func (s *Server) replyDefaults(a args) error {
	if a.has("chat_jid") {
		return nil
	}
	if s.cfg.ReplyTo == "" {
		return badArg("chat_jid", "required: this turn answers no chat (none of its messages came with a chat_jid); pass the chat to reply in")
	}
	a["chat_jid"] = s.cfg.ReplyTo
	return nil
}

func (s *Server) sendMessage(ctx context.Context, a args) (any, error) {
	return s.send(ctx, store.OutboxItem{Kind: store.OutboxMessage, Target: a.str("chat_jid"), Content: a.str("text")})
}

func (s *Server) sendReply(ctx context.Context, a args) (any, error) {
	return s.send(ctx, store.OutboxItem{Kind: store.OutboxReply, Target: a.str("chat_jid"), Content: a.str("text")})
}

// maxLoggedText is how much of a sent text goes into the journal.
const maxLoggedText = 512

func (s *Server) send(ctx context.Context, it store.OutboxItem) (any, error) {
	it.Folder, it.RunID = s.folder, s.cfg.RunID
	out, err := s.store.AppendOutbox(ctx, it)
	if err != nil {
		return nil, err
	}
	text := it.Content
	if len(text) > maxLoggedText {
		text = text[:maxLoggedText] + "..."
	}
	s.log.Info("ipc: outbox", "kind", string(it.Kind), "chat_jid", it.Target, "outbox_id", out.ID, "bytes", len(it.Content),
		"text", text, "doc_path", it.DocPath, "doc_name", it.DocName)
	return map[string]any{"outbox_id": out.ID, "kind": out.Kind, "chat_jid": out.Target}, nil
}

// documentDefaults turns path into the path relative to /workspace, so
// that grant rules see one spelling, and defaults name to its last element.
func (s *Server) documentDefaults(a args) error {
	rel, err := workspaceRel(a.str("path"))
	if err != nil {
		return err
	}
	a["path"] = rel
	if !a.has("name") {
		a["name"] = path.Base(rel)
	}
	if strings.Contains(a.str("name"), "/") {
		return badArg("name", "must be a file name, without '/'")
	}
	return nil
}

// workspaceRel checks a path the agent gave for a file of its workspace
// and returns it relative to /workspace.
func workspaceRel(p string) (string, error) {
	rel := p
	if strings.HasPrefix(p, "/") {
		var ok bool
		if rel, ok = strings.CutPrefix(p, "/workspace/"); !ok {
			return "", badArg("path", "%s is not under /workspace", p)
		}
		// "/workspace//x" is /workspace/x: what is left must stay relative.
		rel = strings.TrimLeft(rel, "/")
	}
	for seg := range strings.SplitSeq(rel, "/") {
		if seg == ".." {
			return "", badArg("path", "%s must not contain '..'", p)
		}
	}
	rel = path.Clean(rel)
	if rel == "." {
		return "", badArg("path", "%s names /workspace itself, not a file", p)
	}
	return rel, nil
}

// sendDocument records a file of the group's directory (the container's
// /workspace) in the outbox, with its path relative to that directory. The
// file must be a regular file reached through no symlink, and must not itself
// be one.
func (s *Server) sendDocument(ctx context.Context, a args) (any, error) {
	rel := a.str("path")
	if s.cfg.OpenGroup == nil {
		return nil, fail("send_document is not available: the server has no group directory")
	}
	root, err := s.cfg.OpenGroup()
	if err != nil {
		return nil, fmt.Errorf("open group directory: %w", err)
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, badArg("path", "/workspace/%s does not exist", rel)
	case errors.Is(err, agentdir.ErrLink):
		return nil, badArg("path", "/workspace/%s is or passes through a symlink; send the file itself", rel)
	case err != nil:
		return nil, badArg("path", "/workspace/%s cannot be used: %v", rel, errors.Unwrap(err))
	case !fi.Mode().IsRegular():
		return nil, badArg("path", "/workspace/%s is not a regular file (%s)", rel, fi.Mode().Type())
	}
	return s.send(ctx, store.OutboxItem{Kind: store.OutboxDocument, Target: a.str("chat_jid"), DocPath: rel, DocName: a.str("name")})
}

// Sessions and inboxes.

func (s *Server) clearSession(ctx context.Context, _ args) (any, error) {
	if err := s.store.ClearSession(ctx, s.folder); err != nil {
		return nil, err
	}
	return map[string]any{"cleared": s.folder}, nil
}

// deliver appends one message to folder's inbox and wakes the queue.
func (s *Server) deliver(ctx context.Context, folder, sender string, source store.Source, text string) (any, error) {
	ids, err := s.store.AppendInbox(ctx, folder, store.InboxMessage{SenderJID: sender, Role: "user", Content: text, Source: source})
	if err != nil {
		return nil, err
	}
	s.log.Info("ipc: inbox", "to", folder, "source", string(source), "sender", sender, "inbox_id", ids[0], "bytes", len(text))
	s.wake(folder)
	return map[string]any{"folder": folder, "inbox_id": ids[0]}, nil
}

func (s *Server) injectMessage(ctx context.Context, a args) (any, error) {
	target, err := parseFolder("folder", a.str("folder"))
	if err != nil {
		return nil, err
	}
	if err := s.scope(ctx, "inject_message", a, "folder", target); err != nil {
		return nil, err
	}
	if _, err := s.registered(ctx, "folder", target); err != nil {
		return nil, err
	}
	return s.deliver(ctx, target, "inject:"+s.folder, store.SourceInject, a.str("text"))
}

func (s *Server) childDefaults(a args) error {
	if c := a.str("child"); !strings.Contains(c, "/") {
		a["child"] = s.folder + "/" + c
	}
	return nil
}

func (s *Server) delegateToChild(ctx context.Context, a args) (any, error) {
	child, err := parseFolder("child", a.str("child"))
	if err != nil {
		return nil, err
	}
	if !policy.IsChild(s.folder, child) {
		return nil, badArg("child", "%s is not a direct child of %s", child, s.folder)
	}
	if _, err := s.registered(ctx, "child", child); err != nil {
		return nil, err
	}
	return s.deliver(ctx, child, "delegate:"+s.folder, store.SourceDelegate, a.str("text"))
}

func (s *Server) delegateToParent(ctx context.Context, a args) (any, error) {
	parent, ok := policy.Parent(s.folder)
	if !ok {
		return nil, fail("%s is a root group: it has no parent to delegate to", s.folder)
	}
	if _, err := s.store.GetGroup(ctx, parent); errors.Is(err, store.ErrNotFound) {
		return nil, fail("the parent group %s is not registered", parent)
	} else if err != nil {
		return nil, err
	}
	return s.deliver(ctx, parent, "delegate:"+s.folder, store.SourceDelegate, a.str("text"))
}

// Groups.
