package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/internal/enginetest"
)

// TestDoctorRuntime: doctor's runtime check starts a throw-away container under runsc
// where the engine has it (Docker, podman4-gvisor) and passes; on Podman 4.3 whose service
// runs runc it fails, naming the runtime, the engine and the fix. It leaves no container.
func TestDoctorRuntime(t *testing.T) {
	t.Setenv("ARIZUKO_MODE", "system")
	gv := enginetest.GVisor(t)
	for _, tc := range []struct {
		e    enginetest.Engine
		ok   bool
		want string
	}{
		{gv[0], true, "runs containers under runsc"},
		{gv[1], true, "runs containers under runsc"},
		{enginetest.Rootful(t)[0], false, `runs every container under its service's OCI runtime (runc), not "runsc"`},
	} {
		t.Run(tc.e.Name, func(t *testing.T) {
			eng, _ := tc.e.Open(t)
			image := enginetest.EnsureAgentImage(t, tc.e, eng)
			conf := filepath.Join(t.TempDir(), "arizukod.toml")
			writeFile(t, conf, fmt.Sprintf("image = %q\n[limits]\nruntime = \"runsc\"\nallowed_runtimes = [\"runsc\"]\n", image))
			stdout, stderr, _ := runCLI(t, []string{"doctor", "--engine", tc.e.Kind, "--engine-socket", tc.e.URI, "--config", conf, "--check", "runtime"})
			if strings.HasPrefix(stdout, "ok    runtime") != tc.ok || !strings.Contains(stdout, tc.want) {
				t.Errorf("doctor --check runtime:\n%s%s\nwant ok=%v and %q", stdout, stderr, tc.ok, tc.want)
			}
			if !tc.ok && !strings.Contains(stdout, "fix: ") {
				t.Errorf("a failed runtime check without its fix:\n%s", stdout)
			}
		})
	}
}
