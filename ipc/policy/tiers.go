package policy

import (
	"fmt"
	"slices"
	"strings"
)

// Tiers grow with depth and lose powers as they grow.
const (
	TierRoot   = 0 // the root group: every tool
	TierWorld  = 1 // one level deep: management tools and sending
	TierAgent  = 2 // two levels deep: sending only
	TierWorker = 3 // three or more levels deep: send_reply only
)

// maxTier is THE tool table: each tool of the seed mapped to the deepest tier
// that may call it. The seed's column is headed "Minimum tier", but since a
// deeper group is less trusted, a tool listed with 2 is callable at tiers 0, 1
// and 2 and refused at 3 and beyond. Read by tier this gives the seed's
// capability table: 0 everything; 1 everything but inject_message and
// spawn_group; 2 send_message, send_reply, send_document and
// delegate_to_parent; 3+ send_reply.
var maxTier = map[string]int{
	"send_message":       TierAgent,
	"send_reply":         TierWorker,
	"send_document":      TierAgent,
	"clear_session":      TierWorld,
	"inject_message":     TierRoot,
	"register_group":     TierWorld,
	"get_groups":         TierWorld,
	"refresh_groups":     TierWorld,
	"delegate_to_child":  TierWorld,
	"delegate_to_parent": TierAgent,
	"spawn_group":        TierRoot,
	"schedule_task":      TierWorld,
	"get_task":           TierWorld,
	"update_task":        TierWorld,
	"cancel_task":        TierWorld,
	"list_tasks":         TierWorld,
	"list_routes":        TierWorld,
	"set_routes":         TierWorld,
	"add_route":          TierWorld,
	"delete_route":       TierWorld,
}

// Tier returns the tier of a group at depth (number of folder segments minus
// one): min(depth, TierWorker). A negative depth cannot come from a folder and
// gets TierWorker, the least powerful tier.
func Tier(depth int) int {
	if depth < 0 {
		return TierWorker
	}
	return min(depth, TierWorker)
}

// FolderTier returns the tier of folder from its depth: "main" is 0,
// "main/research" 1, "main/research/w1" 2. It does not validate the name.
func FolderTier(folder string) int {
	return Tier(strings.Count(folder, "/"))
}

// TierLabel names a tier as the seed does: root, world, agent, worker.
func TierLabel(tier int) string {
	switch {
	case tier < 0:
		return "invalid"
	case tier == TierRoot:
		return "root"
	case tier == TierWorld:
		return "world"
	case tier == TierAgent:
		return "agent"
	}
	return "worker"
}

// TierAllows reports whether a group of the given tier may call tool. Tiers
// beyond TierWorker behave as TierWorker; unknown tools and negative tiers are
// refused.
func TierAllows(tool string, tier int) bool {
	limit, ok := maxTier[tool]
	if !ok || tier < 0 {
		return false
	}
	return min(tier, TierWorker) <= limit
}

// Tools returns every tool name, sorted.
func Tools() []string {
	names := make([]string, 0, len(maxTier))
	for name := range maxTier {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TierRefusal explains why tier may not call a known tool, for a DeniedError.
func TierRefusal(tool string, tier int) string {
	limit := maxTier[tool]
	tiers := "tier 0"
	if limit > 0 {
		tiers = fmt.Sprintf("tiers 0-%d", limit)
	}
	return fmt.Sprintf("tier %d (%s) may not call %s: it is limited to %s", tier, TierLabel(tier), tool, tiers)
}
