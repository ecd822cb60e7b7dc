package ipc

import "testing"

func TestTree(t *testing.T) {
	tests := []struct {
		a, b               string
		inSubtree, isChild bool
	}{
		{"main", "main", true, false},
		{"main", "main/research", true, true},
		{"main", "main/research/w1", true, false},
		{"main/research", "main/research/w1", true, true},
		{"main/research", "main/researchers", false, false},
		{"main/research", "main", false, false},
		{"main", "other/x", false, false},
		{"main", "main/", true, false},
		{"", "main", false, false},
		{"", "/main", false, false},
	}
	for _, tt := range tests {
		if got := InSubtree(tt.a, tt.b); got != tt.inSubtree {
			t.Errorf("InSubtree(%q, %q) = %v", tt.a, tt.b, got)
		}
		if got := IsChild(tt.a, tt.b); got != tt.isChild {
			t.Errorf("IsChild(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}

func TestParent(t *testing.T) {
	tests := []struct {
		folder, parent string
		ok             bool
	}{
		{"main", "", false},
		{"main/research", "main", true},
		{"main/research/w1", "main/research", true},
		{"", "", false},
		{"/x", "", false},
	}
	for _, tt := range tests {
		parent, ok := Parent(tt.folder)
		if parent != tt.parent || ok != tt.ok {
			t.Errorf("Parent(%q) = %q, %v; want %q, %v", tt.folder, parent, ok, tt.parent, tt.ok)
		}
	}
}

func TestRouteVisible(t *testing.T) {
	tests := []struct {
		viewer string
		tier   int
		target string
		want   bool
	}{
		{"main", 0, "main", true},
		{"main", 0, "other", true},
		{"main/research", 1, "main/research", true},
		{"main/research", 1, "main/research/w1", true},
		{"main/research", 1, "main", false},
		{"main/research", 1, "main/ops", false},
		{"main/research", 1, "main/researchers", false},
		{"main/research/w1", 2, "main/research", false},
		{"main/research/w1/x", 3, "main/research/w1/x", true},
	}
	for _, tt := range tests {
		if got := RouteVisible(tt.viewer, tt.tier, tt.target); got != tt.want {
			t.Errorf("RouteVisible(%q, %d, %q) = %v, want %v", tt.viewer, tt.tier, tt.target, got, tt.want)
		}
	}
}
