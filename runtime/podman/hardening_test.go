package podman

import (
	"reflect"
	"testing"

	"github.com/arizuko/arizukod/runtime/engine"
)

// TestHardening: the libpod spec of a container carries every part of engine.Hardened.
func TestHardening(t *testing.T) {
	g, err := createSpec(engine.Spec{Image: "localhost/x:1", Name: "n", Network: engine.NetworkNone,
		Tmpfs: []engine.Tmpfs{{Target: "/tmp", Options: "rw,size=64m"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := engine.Hardening{
		CapDrop:         g.CapDrop,
		NoNewPrivileges: g.NoNewPrivileges != nil && *g.NoNewPrivileges,
		ReadOnlyRoot:    g.ReadOnlyFilesystem != nil && *g.ReadOnlyFilesystem,
		// libpod adds its tmpfs mounts to a read-only root unless told not to.
		EngineTmpfs: g.ReadWriteTmpfs == nil || *g.ReadWriteTmpfs,
		// libpod's create has no pull: a missing image is an error.
		Pull: engine.PullNever,
	}
	if want := engine.Hardened(); !reflect.DeepEqual(got, want) {
		t.Errorf("libpod spec hardening %+v, want %+v", got, want)
	}
}
