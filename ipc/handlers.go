package ipc

import (
	"context"
	"errors"
	"fmt"
	"github.com/arizuko/arizukod/ipc/policy"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/store"
)

// What the tools answer, as JSON.
type (
	groupView struct {
		Folder      string `json:"folder"`
		Parent      string `json:"parent,omitempty"`
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		Tier        int    `json:"tier"`
	}
	taskView struct {
		ID           string `json:"id"`
		Folder       string `json:"folder"`
		Prompt       string `json:"prompt"`
		ScheduleKind string `json:"schedule_kind"`
		Schedule     string `json:"schedule"`
		State        string `json:"state"`
		NextRunAt    string `json:"next_run_at,omitempty"`
		LastRunAt    string `json:"last_run_at,omitempty"`
		LastRunID    string `json:"last_run_id,omitempty"`
	}
	routeView struct {
		ID     int64  `json:"id"`
		Seq    int64  `json:"seq"`
		Match  string `json:"match"`
		Target string `json:"target"`
		Owner  string `json:"owner"` // "" for the operator's routes
	}
)

func viewGroup(g store.Group) groupView {
	return groupView{Folder: g.Folder, Parent: g.Parent, Name: g.Name, Description: g.Description, Tier: policy.FolderTier(g.Folder)}
}

func msTime(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func viewTask(t *store.Task) taskView {
	return taskView{ID: t.ID, Folder: t.Folder, Prompt: t.Prompt, ScheduleKind: string(t.ScheduleKind), Schedule: t.ScheduleExpr,
		State: string(t.State), NextRunAt: msTime(t.NextRunAt), LastRunAt: msTime(t.LastRunAt), LastRunID: t.LastRunID}
}

func viewRoutes(rs []store.Route) []routeView {
	out := make([]routeView, 0, len(rs))
	for _, r := range rs {
		out = append(out, routeView{ID: r.ID, Seq: r.Seq, Match: r.Match, Target: r.Target, Owner: r.Owner})
	}
	return out
}

// manages reports whether folder lies in the caller's subtree, where its
// tools act: a root group's tree, any other group's own folder and those
// below it. Every tier is scoped the same way; see scope for the one way out.
func (s *Server) manages(folder string) bool {
	return policy.InSubtree(s.folder, folder)
}

// scope lets a call of tool act on folder, named by its parameter param:
// folder lies in the caller's subtree, or the caller's grant rules (read
// again now) reach it because the rule deciding this call names param
// (Rules.Reaches). Otherwise the call is denied, saying which grant the
// operator would have to give. Only the operator sets grants, so no agent
// can widen its own reach.
func (s *Server) scope(ctx context.Context, tool string, a args, param, folder string) error {
	if s.manages(folder) {
		return nil
	}
	rules, refusal, err := s.grants(ctx)
	if err != nil {
		return err
	}
	if refusal == "" && rules.Reaches(tool, a, param) {
		s.log.Info("ipc: granted outside the subtree", "tool", tool, "to", folder)
		return nil
	}
	return &policy.DeniedError{Tool: tool, Tier: s.tier, Reason: fmt.Sprintf(
		"%s acts only inside %s's subtree (%s and the groups below it), and %s %s is outside it; "+
			"only the operator can allow this, with a grant rule naming the folder, such as %s(%s=%s)",
		tool, s.folder, s.folder, param, folder, tool, param, folder)}
}

// parseFolder validates the folder name in argument arg.
func parseFolder(arg, name string) (string, error) {
	f, err := groupfolder.Parse(name)
	if err != nil {
		return "", badArg(arg, "%v", err)
	}
	return string(f), nil
}

// registered returns folder's group, or a tool error naming arg.
func (s *Server) registered(ctx context.Context, arg, folder string) (*store.Group, error) {
	g, err := s.store.GetGroup(ctx, folder)
	if errors.Is(err, store.ErrNotFound) {
		return nil, badArg(arg, "group %s is not registered", folder)
	}
	return g, err
}

func (s *Server) wake(folder string) {
	if s.cfg.Wake != nil {
		s.cfg.Wake(folder)
	}
}

// Messaging.

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
// file must be a regular file reached without leaving the group directory
// through a symlink, and must not itself be a symlink.
func (s *Server) sendDocument(ctx context.Context, a args) (any, error) {
	rel := a.str("path")
	if s.cfg.GroupDir == "" {
		return nil, fail("send_document is not available: the server has no group directory")
	}
	root, err := os.OpenRoot(s.cfg.GroupDir)
	if err != nil {
		return nil, fmt.Errorf("open group directory: %w", err)
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, badArg("path", "/workspace/%s does not exist", rel)
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

func (s *Server) registerGroup(ctx context.Context, a args) (any, error) {
	target, err := parseFolder("folder", a.str("folder"))
	if err != nil {
		return nil, err
	}
	if target == s.folder {
		return nil, badArg("folder", "%s is not below %s; a group registers only groups below itself", target, s.folder)
	}
	if err := s.scope(ctx, "register_group", a, "folder", target); err != nil {
		return nil, err
	}
	g, err := s.create(ctx, target, a)
	if err != nil {
		return nil, err
	}
	return viewGroup(*g), nil
}

// create registers folder as a new group; an existing registration is not
// touched. The check and the write are two steps: a group registered in
// between by someone else gets the new name and description.
func (s *Server) create(ctx context.Context, folder string, a args) (*store.Group, error) {
	_, err := s.store.GetGroup(ctx, folder)
	switch {
	case err == nil:
		return nil, badArg("folder", "group %s is already registered", folder)
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	parent, _ := policy.Parent(folder)
	g, err := s.store.UpsertGroup(ctx, store.Group{Folder: folder, Parent: parent, Name: a.str("name"), Description: a.str("description")})
	if errors.Is(err, store.ErrNotFound) {
		return nil, badArg("folder", "the parent group %s is not registered; register it first", parent)
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("ipc: group registered", "group", folder)
	return g, nil
}

func (s *Server) getGroups(ctx context.Context, _ args) (any, error) {
	gs, err := s.store.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	out := []groupView{}
	for _, g := range gs {
		if s.manages(g.Folder) {
			out = append(out, viewGroup(g))
		}
	}
	return map[string]any{"groups": out}, nil
}

func (s *Server) spawnGroup(ctx context.Context, a args) (any, error) {
	target, err := parseFolder("folder", a.str("folder"))
	if err != nil {
		return nil, err
	}
	if err := s.scope(ctx, "spawn_group", a, "folder", target); err != nil {
		return nil, err
	}
	g, err := s.create(ctx, target, a)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"group": viewGroup(*g)}
	if p := a.str("prompt"); p != "" {
		d, err := s.deliver(ctx, target, "spawn:"+s.folder, store.SourceInject, p)
		if err != nil {
			return nil, err
		}
		out["inbox_id"] = d.(map[string]any)["inbox_id"]
	}
	return out, nil
}

// Scheduled tasks.

func (s *Server) taskDefaults(a args) error {
	if !a.has("folder") {
		a["folder"] = s.folder
	}
	return nil
}

// schedule checks a schedule and returns the expression the store keeps
// (intervals become milliseconds) and the next run in unix ms, which must
// lie in the future. What else makes a schedule valid (a minimum interval,
// cron descriptors) is ServerConfig.NextRun's to say.
func (s *Server) schedule(kind, expr string) (string, int64, error) {
	expr = strings.TrimSpace(expr)
	switch store.ScheduleKind(kind) {
	case store.ScheduleInterval:
		d, err := time.ParseDuration(expr)
		if err != nil {
			ms, nerr := strconv.ParseInt(expr, 10, 64)
			if nerr != nil {
				return "", 0, badArg("schedule", "%q is neither a duration (90m, 24h) nor a number of milliseconds", expr)
			}
			d = time.Duration(ms) * time.Millisecond
		}
		if d <= 0 {
			return "", 0, badArg("schedule", "interval %s is not positive", d)
		}
		expr = strconv.FormatInt(d.Milliseconds(), 10)
	case store.ScheduleOnce:
		if _, err := time.Parse(time.RFC3339, expr); err != nil {
			return "", 0, badArg("schedule", "%q is not an RFC 3339 time such as 2030-01-02T15:04:05Z", expr)
		}
	}
	now := s.now()
	next, err := s.cfg.NextRun(kind, expr, now)
	if err != nil {
		return "", 0, badArg("schedule", "%v", err)
	}
	if next <= now.UnixMilli() {
		return "", 0, badArg("schedule", "%s %q would next run at %s, which is not in the future", kind, expr, msTime(next))
	}
	return expr, next, nil
}

func (s *Server) scheduleTask(ctx context.Context, a args) (any, error) {
	folder, err := parseFolder("folder", a.str("folder"))
	if err != nil {
		return nil, err
	}
	if err := s.scope(ctx, "schedule_task", a, "folder", folder); err != nil {
		return nil, err
	}
	if _, err := s.registered(ctx, "folder", folder); err != nil {
		return nil, err
	}
	kind := a.str("schedule_kind")
	expr, next, err := s.schedule(kind, a.str("schedule"))
	if err != nil {
		return nil, err
	}
	t, err := s.store.CreateTask(ctx, store.Task{Folder: folder, Prompt: a.str("prompt"), ScheduleKind: store.ScheduleKind(kind),
		ScheduleExpr: expr, State: store.TaskActive, NextRunAt: next})
	if err != nil {
		return nil, err
	}
	s.log.Info("ipc: task scheduled", "task", t.ID, "for", folder, "kind", kind, "schedule", expr, "next_run_at", msTime(next))
	return viewTask(t), nil
}

// task returns a task the caller may see. A task of another subtree is
// "not found", like one that does not exist, so its existence is not leaked.
func (s *Server) task(ctx context.Context, id string) (*store.Task, error) {
	t, err := s.store.GetTask(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && !s.manages(t.Folder) {
		return nil, badArg("id", "task %s not found", id)
	}
	return t, err
}

func (s *Server) getTask(ctx context.Context, a args) (any, error) {
	t, err := s.task(ctx, a.str("id"))
	if err != nil {
		return nil, err
	}
	return viewTask(t), nil
}

func (s *Server) updateTask(ctx context.Context, a args) (any, error) {
	t, err := s.task(ctx, a.str("id"))
	if err != nil {
		return nil, err
	}
	if t.State == store.TaskCompleted {
		return nil, badArg("id", "task %s is completed; schedule a new one", t.ID)
	}
	var p store.TaskPatch
	if a.has("prompt") {
		prompt := a.str("prompt")
		p.Prompt = &prompt
	}
	reschedule := a.has("schedule")
	if a.has("schedule_kind") && !reschedule {
		return nil, badArg("schedule", "required when schedule_kind is given")
	}
	state := t.State
	if a.has("state") {
		state = store.TaskState(a.str("state"))
		p.State = &state
	}
	if reschedule || state == store.TaskActive && t.State != store.TaskActive {
		kind := string(t.ScheduleKind)
		if a.has("schedule_kind") {
			kind = a.str("schedule_kind")
		}
		expr := t.ScheduleExpr
		if reschedule {
			expr = a.str("schedule")
		}
		expr, next, err := s.schedule(kind, expr)
		if err != nil {
			return nil, err
		}
		k := store.ScheduleKind(kind)
		p.ScheduleKind, p.ScheduleExpr, p.NextRunAt = &k, &expr, &next
	}
	if p == (store.TaskPatch{}) {
		return nil, fail("nothing to update: give prompt, schedule (with schedule_kind to change the kind) or state")
	}
	t, err = s.store.UpdateTask(ctx, t.ID, p)
	if err != nil {
		return nil, err
	}
	s.log.Info("ipc: task updated", "task", t.ID, "state", string(t.State), "next_run_at", msTime(t.NextRunAt))
	return viewTask(t), nil
}

// cancelTask marks the task completed rather than deleting it: its runs
// keep naming it and get_task still shows how it ended.
func (s *Server) cancelTask(ctx context.Context, a args) (any, error) {
	t, err := s.task(ctx, a.str("id"))
	if err != nil {
		return nil, err
	}
	if t.State != store.TaskCompleted {
		done, none := store.TaskCompleted, int64(0)
		if t, err = s.store.UpdateTask(ctx, t.ID, store.TaskPatch{State: &done, NextRunAt: &none}); err != nil {
			return nil, err
		}
		s.log.Info("ipc: task cancelled", "task", t.ID)
	}
	return viewTask(t), nil
}

func (s *Server) listTasks(ctx context.Context, a args) (any, error) {
	ts, err := s.store.ListTasks(ctx, store.TaskFilter{Folder: s.folder, Subtree: true, State: store.TaskState(a.str("state"))})
	if err != nil {
		return nil, err
	}
	out := []taskView{}
	for i := range ts {
		if s.manages(ts[i].Folder) {
			out = append(out, viewTask(&ts[i]))
		}
	}
	return map[string]any{"tasks": out}, nil
}

// Routes.

// routeDefaults gives add_route's match in canonical form, the form the store
// keeps, so that grant rules see one spelling, here and when routing checks
// a route out of the subtree again (RouteInbound).
func (s *Server) routeDefaults(a args) error {
	match, err := canonicalMatch("match", a.str("match"))
	if err != nil {
		return err
	}
	a["match"] = match
	return nil
}

// canonicalMatch parses a match expression and returns its canonical form,
// which is what the store keeps.
func canonicalMatch(arg, text string) (string, error) {
	m, err := policy.ParseMatch(text)
	if err != nil {
		return "", badArg(arg, "%v", err)
	}
	return m.String(), nil
}

// visibleRoute reports whether the caller sees r: it or a group below it
// added r, or r delivers into its subtree (the operator's routes to it, its
// ancestors' routes to it, forwards granted to others).
func (s *Server) visibleRoute(r store.Route) bool {
	return s.manages(r.Target) || r.Owner != "" && s.manages(r.Owner)
}

func (s *Server) listRoutes(ctx context.Context, _ args) (any, error) {
	rs, err := s.store.ListRoutes(ctx)
	if err != nil {
		return nil, err
	}
	visible := rs[:0]
	for _, r := range rs {
		if s.visibleRoute(r) {
			visible = append(visible, r)
		}
	}
	return map[string]any{"routes": viewRoutes(visible)}, nil
}

// setRoutes replaces the routes the caller added within its subtree. Routes
// out of the subtree need add_route and an operator's grant; set_routes
// never touches routes the caller did not add.
func (s *Server) setRoutes(ctx context.Context, a args) (any, error) {
	items := a.routes("routes")
	rs := make([]store.Route, 0, len(items))
	for i, it := range items {
		arg := fmt.Sprintf("routes[%d].", i)
		target, err := parseFolder(arg+"target", it.Target)
		if err != nil {
			return nil, err
		}
		if !s.manages(target) {
			return nil, &policy.DeniedError{Tool: "set_routes", Tier: s.tier, Reason: fmt.Sprintf(
				"set_routes sets routes to %s and the groups below it only, and %starget %s is outside them; "+
					"a route out of the subtree takes add_route and an operator's grant naming the target", s.folder, arg, target)}
		}
		if _, err := s.registered(ctx, arg+"target", target); err != nil {
			return nil, err
		}
		match, err := canonicalMatch(arg+"match", it.Match)
		if err != nil {
			return nil, err
		}
		rs = append(rs, store.Route{Seq: it.Seq, Match: match, Target: target})
	}
	out, err := s.store.ReplaceOwnedRoutes(ctx, s.folder, rs)
	if err != nil {
		return nil, err
	}
	s.log.Info("ipc: routes replaced", "owner", s.folder, "count", len(out))
	return map[string]any{"routes": viewRoutes(out)}, nil
}

func (s *Server) addRoute(ctx context.Context, a args) (any, error) {
	target, err := parseFolder("target", a.str("target"))
	if err != nil {
		return nil, err
	}
	if err := s.scope(ctx, "add_route", a, "target", target); err != nil {
		return nil, err
	}
	if _, err := s.registered(ctx, "target", target); err != nil {
		return nil, err
	}
	r, err := s.store.AddRoute(ctx, store.Route{Seq: a.int("seq"), Match: a.str("match"), Target: target, Owner: s.folder})
	if err != nil {
		return nil, err
	}
	s.log.Info("ipc: route added", "route", r.ID, "seq", r.Seq, "match", r.Match, "target", r.Target)
	return viewRoutes([]store.Route{*r})[0], nil
}

// deleteRoute deletes a route the caller or a group below it added. A route
// it sees but did not add (the operator's, an ancestor's, another tree's
// forward into it) is refused with its owner; any other is "not found".
func (s *Server) deleteRoute(ctx context.Context, a args) (any, error) {
	id := a.int("id")
	r, err := s.store.GetRoute(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && !s.visibleRoute(*r) {
		return nil, badArg("id", "route %d not found", id)
	}
	if err != nil {
		return nil, err
	}
	if r.Owner == "" || !s.manages(r.Owner) {
		owner := "the operator"
		if r.Owner != "" {
			owner = "group " + r.Owner
		}
		return nil, &policy.DeniedError{Tool: "delete_route", Tier: s.tier, Reason: fmt.Sprintf(
			"route %d was added by %s; %s deletes only routes it or a group below it added", id, owner, s.folder)}
	}
	if err := s.store.DeleteRoute(ctx, id); err != nil {
		return nil, err
	}
	s.log.Info("ipc: route deleted", "route", id, "target", r.Target, "owner", r.Owner)
	return viewRoutes([]store.Route{*r})[0], nil
}
