package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/internal/enginetest"
)

// TestDoctorRootless: against the test host's rootless Podman, doctor finds the engine's
// user from its socket and reads that user's subordinate ids and cgroup controllers,
// and its cgroups and limits checks agree (both pass, or both fail).
func TestDoctorRootless(t *testing.T) {
	e := enginetest.Rootless(t)
	t.Setenv("ARIZUKO_MODE", "system")
	empty := filepath.Join(t.TempDir(), "arizukod.toml")
	writeFile(t, empty, "")
	stdout, stderr, _ := runCLI(t, []string{"doctor", "--engine-socket", e.URI, "--config", empty,
		"--check", "engine", "--check", "subids", "--check", "cgroups", "--check", "limits"})
	lines := map[string]string{}
	for _, l := range strings.Split(stdout, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && (f[0] == "ok" || f[0] == "FAIL") {
			lines[f[1]] = l
		}
	}
	if !strings.HasPrefix(lines["engine"], "ok") || !strings.Contains(lines["engine"], "rootless") {
		t.Errorf("engine: %q\n%s%s", lines["engine"], stdout, stderr)
	}
	if want := "ok    subids    " + e.User + " (uid "; !strings.HasPrefix(lines["subids"], want) {
		t.Errorf("subids: %q, want it to start %q\n%s", lines["subids"], want, stdout)
	}
	if strings.HasPrefix(lines["cgroups"], "ok") != strings.HasPrefix(lines["limits"], "ok") {
		t.Errorf("cgroups and limits disagree:\n%s", stdout)
	}
	if !strings.HasPrefix(lines["cgroups"], "ok") && !strings.Contains(stdout, "fix: ") {
		t.Errorf("a failed cgroups check without its fix:\n%s", stdout)
	}
}
