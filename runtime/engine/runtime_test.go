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

// TestInfoCheckRuntime: Docker refuses a runtime it has not registered, Podman one that
// is not its service's, each naming the runtime, the engine and the fix; a create refused
// for its runtime says the same.
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
	podman := Info{Name: "podman", Version: "4.3.1", Rootless: true, Runtimes: []string{"runc"}, RuntimePerService: true}
	if err := podman.CheckRuntime("runc"); err != nil {
		t.Errorf("podman's service runs runc: %v", err)
	}
	err = podman.CheckRuntime("runsc")
	for _, want := range []string{"podman 4.3.1 (rootless) runs every container under its service's OCI runtime (runc)", "~/.config/containers/containers.conf", `runtime = "runsc" under [engine]`, "runsc-arizuko"} {
		if !errors.Is(err, ErrRuntimeMissing) || !strings.Contains(err.Error(), want) {
			t.Errorf("podman on runc asked for runsc: %v, want ErrRuntimeMissing containing %q", err, want)
		}
	}
	if err := (Info{}).CheckRuntime("runsc"); !errors.Is(err, ErrRuntimeMissing) || !strings.Contains(err.Error(), "has not said") {
		t.Errorf("an engine that has not said its runtimes: %v, want ErrRuntimeMissing", err)
	}
	unknown := Info{Name: "docker", Version: "20.10.24"}
	refused := fmt.Errorf("%w: Unknown runtime specified runsc", ErrCreate)
	err = unknown.CreateError(Spec{Runtime: "runsc"}, refused)
	for _, want := range []string{"docker 20.10.24", "daemon.json"} {
		if !errors.Is(err, ErrCreate) || !errors.Is(err, ErrRuntimeMissing) || !strings.Contains(err.Error(), want) {
			t.Errorf("docker refused runsc: %v, want ErrCreate and ErrRuntimeMissing containing %q", err, want)
		}
	}
	other := fmt.Errorf("%w: no such image", ErrCreate)
	if err := unknown.CreateError(Spec{Runtime: "runsc"}, other); err != other {
		t.Errorf("another refusal: %v, want it as it was", err)
	}
}
