package ipc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/ipc/policy"
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
