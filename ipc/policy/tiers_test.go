package policy

import (
	"slices"
	"testing"
)

// seedTierTools is the seed's capability table, written out by hand from its
// descriptions and independent of maxTier: 0 root "all tools", 1 world
// "management tools + send", 2 agent "send only", 3+ worker "send_reply only".
var seedTierTools = map[int][]string{
	TierRoot: {
		"send_message", "send_reply", "send_document", "clear_session", "inject_message",
		"register_group", "get_groups", "refresh_groups", "delegate_to_child", "delegate_to_parent",
		"spawn_group", "schedule_task", "get_task", "update_task", "cancel_task", "list_tasks",
		"list_routes", "set_routes", "add_route", "delete_route",
	},
	TierWorld: {
		"send_message", "send_reply", "send_document", "clear_session",
		"register_group", "get_groups", "refresh_groups", "delegate_to_child", "delegate_to_parent",
		"schedule_task", "get_task", "update_task", "cancel_task", "list_tasks",
		"list_routes", "set_routes", "add_route", "delete_route",
	},
	TierAgent:  {"send_message", "send_reply", "send_document", "delegate_to_parent"},
	TierWorker: {"send_reply"},
	4:          {"send_reply"},
}

func TestTierAllowsMatrix(t *testing.T) {
	tools := Tools()
	if len(tools) != 20 {
		t.Fatalf("Tools() has %d tools, want the seed's 20", len(tools))
	}
	for _, tool := range seedTierTools[TierRoot] {
		if !slices.Contains(tools, tool) {
			t.Errorf("Tools() lacks %s", tool)
		}
	}
	for tier := 0; tier <= 4; tier++ {
		for _, tool := range tools {
			want := slices.Contains(seedTierTools[tier], tool)
			if got := TierAllows(tool, tier); got != want {
				t.Errorf("TierAllows(%s, %d) = %v, want %v", tool, tier, got, want)
			}
		}
	}
}

func TestTierAllowsRefusesUnknown(t *testing.T) {
	tests := []struct {
		tool string
		tier int
	}{
		{"no_such_tool", 0},
		{"", 0},
		{"send_reply", -1},
		{"Send_Reply", 3},
	}
	for _, tt := range tests {
		if TierAllows(tt.tool, tt.tier) {
			t.Errorf("TierAllows(%q, %d) = true", tt.tool, tt.tier)
		}
	}
}

func TestToolsSorted(t *testing.T) {
	tools := Tools()
	if !slices.IsSorted(tools) {
		t.Errorf("Tools() not sorted: %v", tools)
	}
	tools[0] = "changed"
	if Tools()[0] == "changed" {
		t.Error("Tools() shares its slice")
	}
}

func TestTier(t *testing.T) {
	tests := []struct{ depth, want int }{
		{-1, TierWorker}, {0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 3}, {100, 3},
	}
	for _, tt := range tests {
		if got := Tier(tt.depth); got != tt.want {
			t.Errorf("Tier(%d) = %d, want %d", tt.depth, got, tt.want)
		}
	}
}

func TestFolderTier(t *testing.T) {
	tests := []struct {
		folder string
		want   int
		label  string
	}{
		{"main", 0, "root"},
		{"main/research", 1, "world"},
		{"main/research/w1", 2, "agent"},
		{"main/research/w1/x", 3, "worker"},
		{"main/research/w1/x/y", 3, "worker"},
	}
	for _, tt := range tests {
		got := FolderTier(tt.folder)
		if got != tt.want || TierLabel(got) != tt.label {
			t.Errorf("FolderTier(%q) = %d (%s), want %d (%s)", tt.folder, got, TierLabel(got), tt.want, tt.label)
		}
	}
	if TierLabel(-1) != "invalid" || TierLabel(7) != "worker" {
		t.Errorf("TierLabel(-1) = %q, TierLabel(7) = %q", TierLabel(-1), TierLabel(7))
	}
}
