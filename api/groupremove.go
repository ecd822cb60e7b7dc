package api

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/store"
)

func (s *Server) planGroupRemoval(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok {
		return
	}
	g, err := s.store.PlanGroupRemoval(r.Context(), string(f))
	if !s.removalErr(w, r, f, g, err) {
		return
	}
	writeJSON(w, http.StatusOK, s.wireRemoval(f, g, false, ""))
}

func (s *Server) removeGroup(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok {
		return
	}
	var req apiwire.RemoveGroupRequest
	if !decode(w, r, &req, "by") {
		return
	}
	if strings.TrimSpace(req.By) == "" || len(req.By) > 256 || strings.ContainsFunc(req.By, unicode.IsControl) {
		writeErr(w, http.StatusBadRequest, "by", "by: required: who removes the group, at most 256 bytes without control characters")
		return
	}
	g, err := s.store.RemoveGroup(r.Context(), string(f), req.By)
	if !s.removalErr(w, r, f, g, err) {
		return
	}
	s.log.Info("group removed", logging.FieldFolder, string(f), "by", req.By, "droppedMessages", len(g.Pending),
		"deletedRoutes", len(g.Routes), "deletedTasks", len(g.Tasks))
	writeJSON(w, http.StatusOK, s.wireRemoval(f, g, true, req.By))
}

// removalErr answers err of a removal's store call, whose plan was g, and reports whether
// there was none.
func (s *Server) removalErr(w http.ResponseWriter, r *http.Request, f groupfolder.Folder, g *store.GroupRemoval, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, store.ErrNotFound):
		writeErr(w, http.StatusNotFound, "folder", "unknown group %q: nothing to remove (`arizukod groups list` shows the groups)", f)
	case errors.Is(err, store.ErrConflict) && g != nil:
		writeErr(w, http.StatusConflict, "folder", "group %s cannot be removed now: %s; nothing was removed", f, g.Blocked())
	default:
		s.internal(w, r, err)
	}
	return false
}

func (s *Server) wireRemoval(f groupfolder.Folder, g *store.GroupRemoval, removed bool, by string) apiwire.GroupRemoval {
	out := apiwire.GroupRemoval{Folder: string(f), Removed: removed, Blocked: g.Blocked(), Descendants: g.Descendants,
		OpenRuns: g.OpenRuns, EndedRuns: g.Runs, DroppedMessages: g.Pending, DeletedRoutes: g.Routes,
		DeletedTasks: g.Tasks, PendingOutbox: g.Outbox, KeptDirs: s.groupDirs(f)}
	say := func(format string, args ...any) { out.Effects = append(out.Effects, fmt.Sprintf(format, args...)) }
	say("deleted: its registration, grants, session and inbox cursor")
	if n := len(g.Pending); n > 0 {
		dropped := "dropped with who and when"
		if by != "" {
			dropped = "dropped by " + by
		}
		say("dropped (kept in the store, marked %s, given to no turn): %s (%s)", dropped, count(n, "pending inbox message"), joinIDs(g.Pending))
	}
	if n := len(g.Routes); n > 0 {
		say("deleted: %s (%s), to it or added by it", count(n, "route"), joinIDs(g.Routes))
	}
	if n := len(g.Tasks); n > 0 {
		say("deleted, to fire no more: %s (%s)", count(n, "task"), strings.Join(g.Tasks, ", "))
	}
	say("kept in the store until retention prunes them: %s", count(g.Runs, "ended run"))
	if g.Outbox > 0 {
		say("kept and delivered as usual: %s not delivered yet", count(g.Outbox, "outbound message"))
	}
	say("left on disk, untouched (they hold what its agent wrote): %s; remove them yourself once you do not need them (a group registered again as %s gets them back)",
		strings.Join(out.KeptDirs, ", "), f)
	return out
}

// groupDirs are f's directories under the data dir: absolute when the server knows its
// Layout, else relative to the data dir.
func (s *Server) groupDirs(f groupfolder.Folder) []string {
	if d, err := s.Layout.Paths(f); err == nil {
		return []string{d.Group, d.Session, d.IPC}
	}
	slug := f.ContainerSlug()
	return []string{filepath.Join("groups", string(f)), filepath.Join("sessions", slug), filepath.Join("ipc", slug)}
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}
