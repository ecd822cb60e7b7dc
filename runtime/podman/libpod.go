package podman

import (
	"fmt"
	"strings"
	"time"

	spec "github.com/opencontainers/runtime-spec/specs-go"
	nettypes "go.podman.io/common/libnetwork/types"

	"github.com/arizuko/arizukod/runtime/engine"
)

// The parts of libpod's API types this engine sends and reads, with libpod's JSON names
// (specgen.SpecGenerator, define.Info, define.InspectContainerData, entities.ListContainer).
// TestCreateSpecDecodes reads createRequest back through specgen's own type.

// createRequest is the subset of specgen.SpecGenerator that POST /containers/create gets.
type createRequest struct {
	Image              string                                `json:"image"`
	Name               string                                `json:"name,omitempty"`
	Labels             map[string]string                     `json:"labels,omitempty"`
	Env                map[string]string                     `json:"env,omitempty"`
	Stdin              *bool                                 `json:"stdin,omitempty"`
	Terminal           *bool                                 `json:"terminal,omitempty"`
	CapDrop            []string                              `json:"cap_drop,omitempty"`
	NoNewPrivileges    *bool                                 `json:"no_new_privileges,omitempty"`
	ReadOnlyFilesystem *bool                                 `json:"read_only_filesystem,omitempty"`
	ReadWriteTmpfs     *bool                                 `json:"read_write_tmpfs,omitempty"`
	User               string                                `json:"user,omitempty"`
	WorkDir            string                                `json:"work_dir,omitempty"`
	LogConfiguration   *logConfig                            `json:"log_configuration,omitempty"`
	NetNS              namespace                             `json:"netns"`
	Networks           map[string]nettypes.PerNetworkOptions `json:"Networks,omitempty"`
	Mounts             []spec.Mount                          `json:"mounts,omitempty"`
	ResourceLimits     *spec.LinuxResources                  `json:"resource_limits,omitempty"`
	Rlimits            []spec.POSIXRlimit                    `json:"r_limits,omitempty"`
	// What specgen.NewSpecGenerator sets: libpod keeps them even without a health check.
	HealthLogDestination string `json:"healthLogDestination"`
	HealthMaxLogCount    uint   `json:"healthMaxLogCount"`
	HealthMaxLogSize     uint   `json:"healthMaxLogSize"`
}

type logConfig struct {
	Driver string `json:"driver,omitempty"`
	Size   int64  `json:"size,omitempty"`
}

type namespace struct {
	NSMode string `json:"nsmode,omitempty"`
}

// createSpec is the libpod spec of s with the hardening every container gets
// (engine.Hardened: no capabilities, no new privileges, a read-only root with only the
// tmpfs mounts s names; libpod's create never pulls), never the host's network or another
// namespace's.
func createSpec(s engine.Spec) (createRequest, error) {
	h := engine.Hardened()
	g := createRequest{
		Image: s.Image, Name: s.Name, Labels: s.Labels, Env: envMap(s.Env), Stdin: &s.Stdin, Terminal: new(bool),
		CapDrop: h.CapDrop, NoNewPrivileges: ptr(h.NoNewPrivileges), ReadOnlyFilesystem: ptr(h.ReadOnlyRoot),
		ReadWriteTmpfs: ptr(h.EngineTmpfs),
		User:           s.User, WorkDir: s.WorkingDir,
		LogConfiguration:     &logConfig{Driver: "k8s-file", Size: s.LogMaxBytes},
		HealthLogDestination: "local", HealthMaxLogCount: 5, HealthMaxLogSize: 500,
	}
	// The last gate: whoever built the spec, the container never gets the host's network
	// or another namespace's. Named networks are the caller's policy.
	network, err := engine.CheckNetwork(s.Network, []string{s.Network})
	if err != nil {
		return createRequest{}, fmt.Errorf("%w: %w", engine.ErrCreate, err)
	}
	switch network {
	case engine.NetworkNone, engine.NetworkBridge, engine.NetworkSlirp4netns, engine.NetworkPasta:
		g.NetNS = namespace{NSMode: network}
	default:
		g.NetNS = namespace{NSMode: engine.NetworkBridge}
		g.Networks = map[string]nettypes.PerNetworkOptions{network: {}}
	}
	for _, m := range s.Mounts {
		opts := []string{"rbind", "rw"}
		if m.ReadOnly {
			opts = []string{"rbind", "ro"}
		}
		g.Mounts = append(g.Mounts, spec.Mount{Destination: m.Target, Type: "bind", Source: m.Source, Options: opts})
	}
	for _, t := range s.Tmpfs {
		g.Mounts = append(g.Mounts, spec.Mount{Destination: t.Target, Type: "tmpfs", Source: "tmpfs", Options: strings.Split(t.Options, ",")})
	}
	res := &spec.LinuxResources{}
	if s.MemoryBytes > 0 {
		res.Memory = &spec.LinuxMemory{Limit: &s.MemoryBytes}
	}
	if s.NanoCPUs > 0 {
		period := uint64(100000)
		quota := s.NanoCPUs * int64(period) / 1e9
		res.CPU = &spec.LinuxCPU{Period: &period, Quota: &quota}
	}
	if s.PidsLimit > 0 {
		res.Pids = &spec.LinuxPids{Limit: s.PidsLimit}
	}
	g.ResourceLimits = res
	for _, r := range s.Rlimits {
		g.Rlimits = append(g.Rlimits, spec.POSIXRlimit{Type: strings.ToUpper(r.Type), Soft: r.Soft, Hard: r.Hard})
	}
	return g, nil
}

// libpodInfo is the part of GET /info the engine reads.
type libpodInfo struct {
	Host struct {
		Security struct {
			Rootless bool `json:"rootless"`
		} `json:"security"`
		CgroupManager     string   `json:"cgroupManager"`
		CgroupsVersion    string   `json:"cgroupVersion"`
		CgroupControllers []string `json:"cgroupControllers"`
		Slirp4NetNS       struct {
			Executable string `json:"executable"`
		} `json:"slirp4netns"`
		Pasta struct {
			Executable string `json:"executable"`
		} `json:"pasta"`
		OCIRuntime struct {
			Name string `json:"name"`
		} `json:"ociRuntime"`
	} `json:"host"`
	Version struct {
		APIVersion string
		Version    string
	} `json:"version"`
}

// libpodState is the State of GET /containers/{id}/json.
type libpodState struct {
	Status     string
	Running    bool
	Pid        int
	OOMKilled  bool
	ExitCode   int32
	Error      string
	StartedAt  time.Time
	FinishedAt time.Time
}

// libpodListed is one container of GET /containers/json.
type libpodListed struct {
	ID      string `json:"Id"`
	Names   []string
	Labels  map[string]string
	State   string
	Created time.Time
}
