package policy

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
