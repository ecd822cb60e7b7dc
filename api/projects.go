package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/project"
)

// Projects gives groups their git projects (package project).
type Projects interface {
	SetProject(ctx context.Context, folder, path string) (project.Info, error)
	ClearProject(ctx context.Context, folder string, discard bool) (project.Info, error)
	GetProject(ctx context.Context, folder string) (project.Info, error)
}

func (s *Server) projects(w http.ResponseWriter) bool {
	if s.Projects == nil {
		writeErr(w, http.StatusNotFound, "", "no projects on this server")
		return false
	}
	return true
}

func (s *Server) putProject(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok {
		return
	}
	var req apiwire.ProjectRequest
	if !decode(w, r, &req, "path") || !s.projects(w) || !s.knownGroup(w, r, f) {
		return
	}
	if req.Path == "" {
		writeErr(w, http.StatusBadRequest, "path", "path: required: the repository on the host, e.g. /srv/code/app")
		return
	}
	info, err := s.Projects.SetProject(r.Context(), string(f), req.Path)
	if err != nil {
		s.projectErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wireProject(info))
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok || !s.projects(w) || !s.knownGroup(w, r, f) {
		return
	}
	info, err := s.Projects.GetProject(r.Context(), string(f))
	if err != nil {
		s.projectErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wireProject(info))
}

func (s *Server) deleteProject(w http.ResponseWriter, r *http.Request) {
	f, ok := folderParam(w, r)
	if !ok || !s.projects(w) || !s.knownGroup(w, r, f) {
		return
	}
	discard := false
	switch v := r.URL.Query().Get("discard"); v {
	case "", "false", "0":
	case "true", "1":
		discard = true
	default:
		writeErr(w, http.StatusBadRequest, "discard", "discard: %q is not true or false", v)
		return
	}
	info, err := s.Projects.ClearProject(r.Context(), string(f), discard)
	if err != nil {
		s.projectErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wireProject(info))
}

// projectErr answers a project's error: the caller's mistakes name the field, a state of
// the repository that the operator must resolve is a conflict.
func (s *Server) projectErr(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, project.ErrNoGroup):
		writeErr(w, http.StatusNotFound, "folder", "%v", err)
	case errors.Is(err, project.ErrNoProject):
		writeErr(w, http.StatusNotFound, "folder", "%v", err)
	case errors.Is(err, groupfolder.ErrInvalidFolder):
		writeErr(w, http.StatusBadRequest, "folder", "%v", err)
	case errors.Is(err, project.ErrNotRepository), errors.Is(err, project.ErrBadRepository):
		writeErr(w, http.StatusBadRequest, "path", "%v", err)
	case errors.Is(err, project.ErrBranchTaken), errors.Is(err, project.ErrDirty), errors.Is(err, project.ErrLocked), errors.Is(err, project.ErrUntrusted), errors.Is(err, project.ErrBusy):
		writeErr(w, http.StatusConflict, "", "%v", err)
	default:
		s.internal(w, r, err)
	}
}

func wireProject(i project.Info) apiwire.Project {
	return apiwire.Project{Folder: i.Folder, Repo: i.Repo, Branch: i.Branch, Target: i.Target, Created: i.Created}
}
