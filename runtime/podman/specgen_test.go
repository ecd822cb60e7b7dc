//go:build containers_image_openpgp && (exclude_graphdriver_btrfs || !cgo)

// The Podman bindings' specgen package builds only with these tags (hack/env.sh sets them):
// without containers_image_openpgp it needs gpgme through cgo, and with cgo it needs the
// btrfs headers unless exclude_graphdriver_btrfs. The rest of the module, go vet ./...
// included, needs no tag.

package podman

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/containers/podman/v5/pkg/specgen"
	spec "github.com/opencontainers/runtime-spec/specs-go"
	nettypes "go.podman.io/common/libnetwork/types"

	"github.com/arizuko/arizukod/runtime/engine"
)

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
