package podman

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containers/podman/v5/pkg/specgen"
	spec "github.com/opencontainers/runtime-spec/specs-go"
	nettypes "go.podman.io/common/libnetwork/types"

	"github.com/arizuko/arizukod/runtime/engine"
)

// TestNoLimits: which engine setups apply the memory, CPU and pids limits, as their Info
// reports them (the figures of the test host and of contrib/systemd/README.md).
func TestNoLimits(t *testing.T) {
	all := []string{"cpuset", "cpu", "cpuacct", "blkio", "memory", "devices", "freezer", "pids"}
	for _, tc := range []struct {
		name        string
		rootless    bool
		cgroups     string
		manager     string
		controllers []string
		want        string // a part of the reason; empty: the limits apply
	}{
		{"rootful v1 (podman4, podman5 here)", false, "v1", "cgroupfs", all, ""},
		{"rootful v2", false, "v2", "systemd", []string{"cpuset", "cpu", "io", "memory", "pids"}, ""},
		{"rootless v1 (podman-rootless here)", true, "v1", "cgroupfs", nil, "cgroups v1"},
		{"rootless v2 cgroupfs (no user manager)", true, "v2", "cgroupfs", []string{"memory", "pids", "cpu"}, "cgroupfs cgroup manager"},
		{"rootless v2 systemd, delegated", true, "v2", "systemd", []string{"memory", "pids", "cpu"}, ""},
		{"rootless v2 systemd, not delegated", true, "v2", "systemd", []string{"memory"}, "no cpu, pids controller"},
		{"rootful v2 without pids", false, "v2", "systemd", []string{"cpu", "memory"}, "no pids controller"},
	} {
		got := noLimits(tc.rootless, tc.cgroups, tc.manager, tc.controllers)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestNetworkGate: whatever a caller put in a Spec, Podman is never asked for the host's
// network or another namespace's. An allowed one gets past the gate to the (absent) engine.
func TestNetworkGate(t *testing.T) {
	p := New("unix://" + filepath.Join(t.TempDir(), "none.sock"))
	for _, in := range []string{"", "none", "bridge", "slirp", "pasta", "any-name"} {
		if _, err := p.Create(context.Background(), engine.Spec{Image: "x", Network: in}); err == nil || errors.Is(err, engine.ErrCreate) {
			t.Errorf("%q: %v; want it past the gate, to the missing engine", in, err)
		}
	}
	for _, in := range []string{"host", "container:abc", "ns:/proc/1/ns/net", "private", "default", "a b"} {
		if _, err := p.Create(context.Background(), engine.Spec{Image: "x", Network: in}); !errors.Is(err, engine.ErrCreate) || !errors.Is(err, engine.ErrNetwork) {
			t.Errorf("%q: %v; want ErrCreate and ErrNetwork", in, err)
		}
	}
}

// TestCreateSpecDecodes reads the create request back through libpod's own type, as the
// service does, and compares it with the spec the bindings' specgen builds for the same
// engine.Spec: every field the hardening and the turn set must arrive under libpod's name.
func TestCreateSpecDecodes(t *testing.T) {
	base := engine.Spec{
		Name: "arizuko-main-1", Image: "localhost/arizuko-agent:latest",
		Labels: map[string]string{engine.LabelFolder: "main"}, Env: []string{"A=1", "B=x=y"},
		Mounts:      []engine.Mount{{Source: "/srv/g", Target: "/workspace"}, {Source: "/srv/s", Target: "/skills", ReadOnly: true}},
		Tmpfs:       []engine.Tmpfs{{Target: "/tmp", Options: "rw,nosuid,nodev,size=64m,mode=1777"}},
		MemoryBytes: 1 << 30, NanoCPUs: 1_500_000_000, PidsLimit: 512,
		Rlimits: []engine.Rlimit{{Type: "nofile", Soft: 1024, Hard: 1024}},
		User:    "1000:1000", WorkingDir: "/workspace", Stdin: true, LogMaxBytes: 1 << 20,
	}
	for _, network := range []string{"none", "bridge", "slirp4netns", "pasta", "team-net"} {
		t.Run(network, func(t *testing.T) {
			s := base
			s.Network = network
			g, err := createSpec(s)
			if err != nil {
				t.Fatal(err)
			}
			body, err := json.Marshal(g)
			if err != nil {
				t.Fatal(err)
			}
			var got specgen.SpecGenerator
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("libpod's spec does not take the request: %v\n%s", err, body)
			}
			want := specgen.NewSpecGenerator(s.Image, false)
			want.Name, want.Labels, want.Env, want.Stdin, want.Terminal = s.Name, s.Labels, map[string]string{"A": "1", "B": "x=y"}, ptr(true), ptr(false)
			want.CapDrop, want.NoNewPrivileges, want.ReadOnlyFilesystem, want.ReadWriteTmpfs = []string{"ALL"}, ptr(true), ptr(true), ptr(false)
			want.User, want.WorkDir = s.User, s.WorkingDir
			want.LogConfiguration = &specgen.LogConfig{Driver: "k8s-file", Size: s.LogMaxBytes}
			want.NetNS = specgen.Namespace{NSMode: specgen.NamespaceMode(network)}
			if network == "team-net" {
				want.NetNS = specgen.Namespace{NSMode: specgen.Bridge}
				want.Networks = map[string]nettypes.PerNetworkOptions{"team-net": {}}
			}
			want.Mounts = []spec.Mount{
				{Destination: "/workspace", Type: "bind", Source: "/srv/g", Options: []string{"rbind", "rw"}},
				{Destination: "/skills", Type: "bind", Source: "/srv/s", Options: []string{"rbind", "ro"}},
				{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"rw", "nosuid", "nodev", "size=64m", "mode=1777"}},
			}
			mem, period, quota := int64(1<<30), uint64(100000), int64(150000)
			want.ResourceLimits = &spec.LinuxResources{Memory: &spec.LinuxMemory{Limit: &mem}, CPU: &spec.LinuxCPU{Period: &period, Quota: &quota}, Pids: &spec.LinuxPids{Limit: 512}}
			want.Rlimits = []spec.POSIXRlimit{{Type: "NOFILE", Soft: 1024, Hard: 1024}}
			if !reflect.DeepEqual(&got, want) {
				w, _ := json.Marshal(want)
				g, _ := json.Marshal(&got)
				t.Errorf("libpod reads\n%s\nwant\n%s", g, w)
			}
		})
	}
}
