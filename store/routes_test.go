package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func targets(rs []Route) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%d:%s", r.Seq, r.Target))
	}
	return strings.Join(out, " ")
}

func TestRoutes(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	for _, r := range []Route{
		{Seq: 20, Match: "platform=telegram", Target: "main"},
		{Seq: 10, Match: "room=-5075870332", Target: "main/research"},
		{Seq: 10, Match: "verb=mention", Target: "main2"},
		{Seq: 5, Match: "", Target: "ma%n/x"},
		{Seq: 1, Match: "sender=*", Target: "MAIN/x"},
	} {
		if _, err := s.AddRoute(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ListRoutes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := targets(all), "1:MAIN/x 5:ma%n/x 10:main/research 10:main2 20:main"; got != want {
		t.Errorf("ListRoutes = %s, want %s", got, want)
	}
	r, err := s.GetRoute(ctx, all[0].ID)
	if err != nil || *r != all[0] {
		t.Errorf("GetRoute = %+v, %v; want %+v", r, err, all[0])
	}
	if err := s.DeleteRoute(ctx, all[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRoute(ctx, all[0].ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete twice: %v, want ErrNotFound", err)
	}
	if _, err := s.GetRoute(ctx, all[0].ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("get deleted: %v, want ErrNotFound", err)
	}
	if _, err := s.AddRoute(ctx, Route{Match: "x=y"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no target: %v, want ErrInvalid", err)
	}
}

// TestReplaceOwnedRoutes: set_routes of a group replaces exactly the routes
// it added to its own subtree: not the operator's, not another group's (even
// to the same targets), not its own forwards out of its subtree.
func TestReplaceOwnedRoutes(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	for _, r := range []Route{
		{Seq: 1, Match: "a", Target: "main"},
		{Seq: 2, Match: "b", Target: "main/w", Owner: "main/w"},
		{Seq: 3, Match: "c", Target: "main/w/x", Owner: "main/w"},
		{Seq: 4, Match: "d", Target: "main/w/x", Owner: "main"},
		{Seq: 5, Match: "e", Target: "main/w/x", Owner: "main/w/x"},
		{Seq: 6, Match: "f", Target: "other", Owner: "main/w"},
		{Seq: 7, Match: "g", Target: "main/w"},
	} {
		if _, err := s.AddRoute(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ReplaceOwnedRoutes(ctx, "main/w", []Route{
		{Seq: 9, Match: "new1", Target: "main/w/y"},
		{Seq: 0, Match: "new2", Target: "main/w", Owner: "main"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID == 0 || got[1].ID == 0 || got[0].CreatedAt == 0 || got[0].Owner != "main/w" || got[1].Owner != "main/w" {
		t.Errorf("returned routes: %+v", got)
	}
	all, _ := s.ListRoutes(ctx)
	if want := "0:main/w@main/w 1:main@ 4:main/w/x@main 5:main/w/x@main/w/x 6:other@main/w 7:main/w@ 9:main/w/y@main/w"; owned(all) != want {
		t.Errorf("after replace: %s, want %s", owned(all), want)
	}

	_, err = s.ReplaceOwnedRoutes(ctx, "main/w", []Route{{Seq: 1, Target: "main/w/z"}, {Seq: 2, Target: "main/w2"}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "routes[1].target") {
		t.Errorf("route outside the subtree: %v, want ErrInvalid naming routes[1].target", err)
	}
	if after, _ := s.ListRoutes(ctx); owned(after) != owned(all) {
		t.Errorf("a rejected replace changed routes: %s", owned(after))
	}
	if _, err := s.ReplaceOwnedRoutes(ctx, "", nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty owner: %v, want ErrInvalid", err)
	}
	if _, err := s.ReplaceOwnedRoutes(ctx, "main/w", nil); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.ListRoutes(ctx); owned(after) != "1:main@ 4:main/w/x@main 5:main/w/x@main/w/x 6:other@main/w 7:main/w@" {
		t.Errorf("clearing main/w's routes left %s", owned(after))
	}
}

func owned(rs []Route) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%d:%s@%s", r.Seq, r.Target, r.Owner))
	}
	return strings.Join(out, " ")
}

func TestUnder(t *testing.T) {
	tests := []struct {
		target, folder string
		want           bool
	}{
		{"main", "main", true},
		{"main/a", "main", true},
		{"main/a/b", "main", true},
		{"main2", "main", false},
		{"mai", "main", false},
		{"main/", "main", true},
		{"MAIN/a", "main", false},
		{"other", "main", false},
	}
	for _, tt := range tests {
		if got := under(tt.target, tt.folder); got != tt.want {
			t.Errorf("under(%q, %q) = %v, want %v", tt.target, tt.folder, got, tt.want)
		}
	}
}
