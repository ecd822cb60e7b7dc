package docker

import (
	"fmt"
	"strings"
)

// noLimits says why Docker cannot apply the limits, "" when it can, from the kernel
// features its Info reports.
func noLimits(memory, cpu, pids bool, driver string) string {
	var missing []string
	for _, f := range []struct {
		name string
		ok   bool
	}{{"memory", memory}, {"cpu", cpu}, {"pids", pids}} {
		if !f.ok {
			missing = append(missing, f.name)
		}
	}
	switch {
	case driver == "none":
		return "Docker runs without a cgroup driver (rootless Docker on cgroups v1): it applies none of them; boot with cgroups v2 and delegate memory, cpu and pids to the user (systemd: Delegate=yes), or use a rootful engine"
	case len(missing) > 0:
		return fmt.Sprintf("Docker reports no %s limit support; enable the %s cgroup controller for it (for rootless Docker: cgroups v2 with Delegate=yes)", strings.Join(missing, ", "), strings.Join(missing, ", "))
	}
	return ""
}
