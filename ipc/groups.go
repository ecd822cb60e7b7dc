package ipc

import (
	"context"
	"errors"

	"github.com/arizuko/arizukod/ipc/policy"
	"github.com/arizuko/arizukod/store"
)

// The group tools: register_group, get_groups (and refresh_groups), spawn_group.

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

// create registers folder as a new group, in one write that leaves an existing
// registration as it is: the operator's container config of a group registered
// at the same time is never replaced.
func (s *Server) create(ctx context.Context, folder string, a args) (*store.Group, error) {
	parent, _ := policy.Parent(folder)
	g, err := s.store.CreateGroup(ctx, store.Group{Folder: folder, Parent: parent, Name: a.str("name"), Description: a.str("description")})
	switch {
	case errors.Is(err, store.ErrConflict):
		return nil, badArg("folder", "group %s is already registered", folder)
	case errors.Is(err, store.ErrNotFound):
		return nil, badArg("folder", "the parent group %s is not registered; register it first", parent)
	case err != nil:
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
