package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestGroups(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	created := c.MS()
	root, err := s.UpsertGroup(ctx, Group{Folder: "main", Name: "Main"})
	if err != nil {
		t.Fatal(err)
	}
	if string(root.ContainerConfig) != "{}" || root.CreatedAt != created || root.UpdatedAt != created || root.Parent != "" {
		t.Errorf("root: %+v", root)
	}
	cfg := json.RawMessage(`{"additional_mounts":[{"host_path":"~/p","container_path":"p","readonly":true}],"timeout":600000,"network":"none"}`)
	child, err := s.UpsertGroup(ctx, Group{Folder: "main/research", Parent: "main", Description: "d", ContainerConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if child.Parent != "main" || string(child.ContainerConfig) != string(cfg) {
		t.Errorf("child: %+v", child)
	}

	c.Advance(time.Minute)
	updated, err := s.UpsertGroup(ctx, Group{Folder: "main", Name: "Renamed"})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Name != "Renamed" || updated.CreatedAt != created || updated.UpdatedAt != c.MS() {
		t.Errorf("update: %+v", updated)
	}
	if g, err := s.GetGroup(ctx, "main/research"); err != nil || g.Description != "d" {
		t.Errorf("GetGroup = %+v, %v", g, err)
	}
	if _, err := s.GetGroup(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetGroup(unknown) = %v, want ErrNotFound", err)
	}
	list, err := s.ListGroups(ctx)
	if err != nil || len(list) != 2 || list[0].Folder != "main" || list[1].Folder != "main/research" {
		t.Errorf("ListGroups = %+v, %v", list, err)
	}

	if err := s.DeleteGroup(ctx, "main"); !errors.Is(err, ErrConflict) {
		t.Errorf("delete parent with children: %v, want ErrConflict", err)
	}
	if err := s.DeleteGroup(ctx, "main/research"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteGroup(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteGroup(ctx, "main"); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete twice: %v, want ErrNotFound", err)
	}

	bad := []struct {
		name  string
		g     Group
		err   error
		field string
	}{
		{"no folder", Group{}, ErrInvalid, "folder"},
		{"own parent", Group{Folder: "a", Parent: "a"}, ErrInvalid, "parent"},
		{"unknown parent", Group{Folder: "x/y", Parent: "x"}, ErrNotFound, `parent group "x"`},
		{"config not JSON", Group{Folder: "a", ContainerConfig: json.RawMessage(`{`)}, ErrInvalid, "container_config"},
		{"config not object", Group{Folder: "a", ContainerConfig: json.RawMessage(`[1]`)}, ErrInvalid, "container_config"},
		{"config null", Group{Folder: "a", ContainerConfig: json.RawMessage(`null`)}, ErrInvalid, "container_config"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			for op, write := range map[string]func(context.Context, Group) (*Group, error){"upsert": s.UpsertGroup, "create": s.CreateGroup} {
				_, err := write(ctx, tt.g)
				if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.field) {
					t.Errorf("%s: err = %v, want %v naming %s", op, err, tt.err, tt.field)
				}
			}
		})
	}
}

// CreateGroup registers a group once: a second create, whatever it says, leaves the
// registered group as it is.
func TestCreateGroup(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	cfg := json.RawMessage(`{"egress":["github.com:443"]}`)
	g, err := s.CreateGroup(ctx, Group{Folder: "main", Name: "Main", ContainerConfig: cfg})
	if err != nil || g.Name != "Main" || string(g.ContainerConfig) != string(cfg) {
		t.Fatalf("CreateGroup = %+v, %v", g, err)
	}
	if _, err := s.CreateGroup(ctx, Group{Folder: "main", Name: "Other"}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("second create: %v, want ErrConflict", err)
	}
	if got, err := s.GetGroup(ctx, "main"); err != nil || got.Name != "Main" || string(got.ContainerConfig) != string(cfg) {
		t.Errorf("after a second create: %+v, %v", got, err)
	}
	if c, err := s.CreateGroup(ctx, Group{Folder: "main/a", Parent: "main"}); err != nil || string(c.ContainerConfig) != "{}" {
		t.Errorf("child: %+v, %v", c, err)
	}
}

func TestSessions(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if id, err := s.GetSession(ctx, "main"); err != nil || id != "" {
		t.Errorf("no session: %q, %v", id, err)
	}
	for _, want := range []string{"s1", "s2"} {
		if err := s.SetSession(ctx, "main", want); err != nil {
			t.Fatal(err)
		}
		if id, _ := s.GetSession(ctx, "main"); id != want {
			t.Errorf("session %q, want %q", id, want)
		}
	}
	if err := s.ClearSession(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if id, _ := s.GetSession(ctx, "main"); id != "" {
		t.Errorf("after clear: %q", id)
	}
	if err := s.ClearSession(ctx, "main"); err != nil {
		t.Errorf("clearing twice: %v", err)
	}
	if err := s.SetSession(ctx, "main", ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty session id: %v, want ErrInvalid", err)
	}
	if err := s.SetSession(ctx, "", "x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty folder: %v, want ErrInvalid", err)
	}
}

func TestGrants(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if _, err := s.GetGrants(ctx, "main"); !errors.Is(err, ErrNotFound) {
		t.Errorf("never set: %v, want ErrNotFound", err)
	}
	steps := [][]string{
		{"*", "!spawn_group", "send_message(chat_jid=tg:*)"},
		{"send_reply"},
		{},
	}
	for _, rules := range steps {
		if err := s.SetGrants(ctx, "main", rules); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetGrants(ctx, "main")
		if err != nil || got == nil || fmt.Sprint(got) != fmt.Sprint(rules) {
			t.Errorf("GetGrants = %#v, %v; want %#v", got, err, rules)
		}
	}
	if err := s.SetGrants(ctx, "other", []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetGrants(ctx, "main"); len(got) != 0 {
		t.Errorf("another folder's grants leaked: %v", got)
	}
	if err := s.SetGrants(ctx, "main", []string{"a", ""}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "rules[1]") {
		t.Errorf("empty rule: %v, want ErrInvalid naming rules[1]", err)
	}
	if err := s.ClearGrants(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetGrants(ctx, "other"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after clear: %v, want ErrNotFound", err)
	}
}
