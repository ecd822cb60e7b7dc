package docker

import (
	"testing"

	"github.com/arizuko/arizukod/runtime/engine"
)

// TestCreateConfigRuntime: the spec's OCI runtime reaches Docker as HostConfig.Runtime,
// and none leaves Docker's default.
func TestCreateConfigRuntime(t *testing.T) {
	for _, rt := range []string{"", "runsc"} {
		_, hc, err := createConfig(engine.Spec{Image: "x", Network: "none", Runtime: rt})
		if err != nil {
			t.Fatal(err)
		}
		if hc.Runtime != rt {
			t.Errorf("runtime %q: HostConfig.Runtime = %q", rt, hc.Runtime)
		}
	}
}
