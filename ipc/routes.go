package ipc

import (
	"context"
	"errors"
	"fmt"

	"github.com/arizuko/arizukod/ipc/policy"
	"github.com/arizuko/arizukod/store"
)

// The route tools: list_routes, set_routes, add_route, delete_route.

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
