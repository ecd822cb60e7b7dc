package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/ipc/policy"
	"github.com/arizuko/arizukod/store"
)

func wireRoute(r *store.Route) apiwire.Route {
	return apiwire.Route{ID: r.ID, Seq: r.Seq, Match: r.Match, Target: r.Target, Owner: r.Owner, CreatedAt: msTime(r.CreatedAt)}
}

func (s *Server) listRoutes(w http.ResponseWriter, r *http.Request) {
	routes, err := s.store.ListRoutes(r.Context())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := make([]apiwire.Route, 0, len(routes))
	for i := range routes {
		out = append(out, wireRoute(&routes[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"routes": out})
}

func (s *Server) addRoute(w http.ResponseWriter, r *http.Request) {
	var req apiwire.AddRouteRequest
	if !decode(w, r, &req, "match") {
		return
	}
	switch {
	case req.Seq == nil:
		writeErr(w, http.StatusBadRequest, "seq", "seq: required (an integer; lower is tried first)")
		return
	case req.Match == nil:
		writeErr(w, http.StatusBadRequest, "match", `match: required (key=glob terms, see ipc/ROUTES.md; "" matches every message)`)
		return
	}
	m, err := policy.ParseMatch(*req.Match)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "match", "match: %v", err)
		return
	}
	f, err := parseFolder(req.Target)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "target", "target: %v", err)
		return
	}
	if _, err := s.store.GetGroup(r.Context(), string(f)); errors.Is(err, store.ErrNotFound) {
		writeErr(w, http.StatusBadRequest, "target", "target: unknown group %q: register it first (POST /v1/groups or `arizukod groups add %s`)", f, f)
		return
	} else if err != nil {
		s.internal(w, r, err)
		return
	}
	rt, err := s.store.AddRoute(r.Context(), store.Route{Seq: *req.Seq, Match: m.String(), Target: string(f)})
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, wireRoute(rt))
}

func (s *Server) deleteRoute(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "id", "id: %q is not a route id (an integer, as GET /v1/routes shows)", raw)
		return
	}
	rt, err := s.store.GetRoute(r.Context(), id)
	if err == nil {
		err = s.store.DeleteRoute(r.Context(), id)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeErr(w, http.StatusNotFound, "id", "no route %d (GET /v1/routes lists them)", id)
	case err != nil:
		s.internal(w, r, err)
	default:
		writeJSON(w, http.StatusOK, wireRoute(rt))
	}
}
