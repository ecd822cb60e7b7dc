package store

import (
	"context"
	"errors"
	"testing"
)

// TestProjects: a group's project and the branches made for it; the project goes with the
// group, the record of its branch stays.
func TestProjects(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if err := s.SetProject(ctx, "main", "/r", "arizuko/main"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a project of no group: %v", err)
	}
	if _, err := s.UpsertGroup(ctx, Group{Folder: "main"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetProject(ctx, "main", "", ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an empty repo: %v", err)
	}
	if err := s.SetProject(ctx, "main", "/r", "arizuko/main"); err != nil {
		t.Fatal(err)
	}
	if p, err := s.GetProject(ctx, "main"); err != nil || p.Repo != "/r" {
		t.Fatalf("GetProject: %+v %v", p, err)
	}
	if owner, err := s.BranchOwner(ctx, "/r", "arizuko/main"); err != nil || owner != "main" {
		t.Fatalf("BranchOwner: %q %v", owner, err)
	}
	if _, err := s.BranchOwner(ctx, "/other", "arizuko/main"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("BranchOwner of another repository: %v", err)
	}
	if _, err := s.RemoveGroup(ctx, "main", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetProject(ctx, "main"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the project outlived its group: %v", err)
	}
	if owner, err := s.BranchOwner(ctx, "/r", "arizuko/main"); err != nil || owner != "main" {
		t.Fatalf("the branch's record went with the group: %q %v", owner, err)
	}
	if err := s.ClearProject(ctx, "main"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("clearing no project: %v", err)
	}
}
