package podman

import (
	"fmt"
	"slices"
	"strings"
)

// limitControllers are the cgroup controllers a container's limits need.
var limitControllers = []string{"memory", "cpu", "pids"}

// noLimits says why Podman cannot apply the limits, "" when it can. Rootless Podman on
// cgroups v1 drops them with a warning; with the cgroupfs manager on cgroups v2 it accepts
// them and applies none (contrib/systemd/README.md); without a delegated controller the
// kernel has nothing to apply them with.
func noLimits(rootless bool, cgroups, manager string, controllers []string) string {
	switch {
	case rootless && cgroups == "v1":
		return "rootless Podman cannot set them on cgroups v1, where no controller is delegated to a user; boot with cgroups v2 and run Podman under the user's systemd manager (cgroup_manager = \"systemd\", a lingering user), or use a rootful engine"
	case rootless && manager != "systemd":
		return fmt.Sprintf("rootless Podman with the %s cgroup manager creates no cgroup it may write and applies none of them; run it with cgroup_manager = \"systemd\" under the user's systemd manager (a lingering user, Delegate=memory cpu pids)", manager)
	}
	if missing := missingControllers(controllers); len(missing) > 0 {
		return fmt.Sprintf("the engine's cgroup has no %s controller; delegate them to it (systemd: Delegate=memory cpu pids)", strings.Join(missing, ", "))
	}
	return ""
}

func missingControllers(have []string) []string {
	var missing []string
	for _, c := range limitControllers {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	return missing
}
