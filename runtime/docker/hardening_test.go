package docker

import (
	"reflect"
	"slices"
	"testing"

	"github.com/arizuko/arizukod/runtime/engine"
)

// TestHardening: the Docker config of a container carries every part of engine.Hardened.
func TestHardening(t *testing.T) {
	_, hc, err := createConfig(engine.Spec{Image: "localhost/x:1", Name: "n", Network: engine.NetworkNone,
		Tmpfs: []engine.Tmpfs{{Target: "/tmp", Options: "rw,size=64m"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := engine.Hardening{
		CapDrop:         []string(hc.CapDrop),
		NoNewPrivileges: slices.Contains(hc.SecurityOpt, "no-new-privileges"),
		ReadOnlyRoot:    hc.ReadonlyRootfs,
		// Docker mounts no tmpfs of its own on a read-only root: only the spec's.
		EngineTmpfs: len(hc.Tmpfs) != 1,
		// Docker's create has no pull: a missing image is an error.
		Pull: engine.PullNever,
	}
	if want := engine.Hardened(); !reflect.DeepEqual(got, want) {
		t.Errorf("docker host config hardening %+v, want %+v", got, want)
	}
}
