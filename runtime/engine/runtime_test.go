package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCheckRuntime(t *testing.T) {
	allowed := []string{"runc", "runsc"}
	for _, c := range []struct{ name, err string }{
		{"", ""},
		{"runc", ""},
		{"runsc", ""},
		{"crun", `"crun" is not in limits.allowed_runtimes`},
		{"/usr/bin/runsc", "not a path"},
		{"-x", "an OCI runtime's name"},
	} {
		err := CheckRuntime(c.name, allowed)
		if (err == nil) != (c.err == "") || err != nil && (!strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrRuntime)) {
			t.Errorf("CheckRuntime(%q) = %v, want ErrRuntime containing %q", c.name, err, c.err)
		}
	}
}

// TestInfoCheckRuntime: an engine that lists its runtimes (Docker) refuses one it lacks,
// naming the runtime, the engine and the fix; one that does not (Podman) leaves it to
// its create, whose refusal CreateError explains the same way.
func TestInfoCheckRuntime(t *testing.T) {
	docker := Info{Name: "docker", Version: "20.10.24", Runtimes: []string{"io.containerd.runc.v2", "runc"}}
	if err := docker.CheckRuntime("runc"); err != nil {
		t.Errorf("docker has runc: %v", err)
	}
	err := docker.CheckRuntime("runsc")
	for _, want := range []string{`"runsc" is not registered with docker 20.10.24`, "daemon.json", "--network=none"} {
		if !errors.Is(err, ErrRuntimeMissing) || !strings.Contains(err.Error(), want) {
			t.Errorf("docker without runsc: %v, want ErrRuntimeMissing containing %q", err, want)
		}
	}
	podman := Info{Name: "podman", Version: "4.3.1", Rootless: true}
	if err := podman.CheckRuntime("runsc"); err != nil {
		t.Errorf("podman does not list its runtimes: %v", err)
	}
	refused := fmt.Errorf("%w: default OCI runtime \"runsc\" not found: invalid argument", ErrCreate)
	err = podman.CreateError(Spec{Runtime: "runsc"}, refused)
	for _, want := range []string{"podman 4.3.1 (rootless)", "~/.config/containers/containers.conf", "[engine.runtimes]"} {
		if !errors.Is(err, ErrCreate) || !errors.Is(err, ErrRuntimeMissing) || !strings.Contains(err.Error(), want) {
			t.Errorf("podman refused runsc: %v, want ErrCreate and ErrRuntimeMissing containing %q", err, want)
		}
	}
	other := fmt.Errorf("%w: no such image", ErrCreate)
	if err := podman.CreateError(Spec{Runtime: "runsc"}, other); err != other {
		t.Errorf("another refusal: %v, want it as it was", err)
	}
}
