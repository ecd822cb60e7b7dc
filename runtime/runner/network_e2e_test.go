package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
)

// netCase is one network value a turn asks for and what it must get: the interfaces the
// agent sees from inside (sorted), or a terminal misconfiguration saying refuse. arizukod
// refuses before any container is created; byEngine marks a refusal of the engine's own
// (an unknown network name), which Docker gives only when the container starts.
type netCase struct {
	network  string
	ifaces   []string
	refuse   string
	byEngine bool
}

// hostInterfaces are the interfaces of the test's own network namespace: the host's.
func hostInterfaces(t *testing.T) []string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	slices.Sort(names)
	return names
}

// runNetCases runs one turn per case on h and checks each from inside the container.
func runNetCases(t *testing.T, h *harness, cases []netCase) {
	host := hostInterfaces(t)
	for _, c := range cases {
		t.Run("network="+c.network, func(t *testing.T) {
			var created atomic.Bool
			res := h.turn("main", "sandbox", func(tn *runner.Turn) {
				tn.Limits.Network = c.network
				tn.OnCreated = func(string, string) { created.Store(true) }
			})
			if c.refuse != "" {
				if res.Failure != runner.FailMisconfig || !res.Terminal || !strings.Contains(res.Output.Error, c.refuse) {
					t.Fatalf("got %q terminal %v: %s; want a terminal misconfig saying %q", res.Failure, res.Terminal, res.Output.Error, c.refuse)
				}
				if created.Load() && !c.byEngine {
					t.Errorf("a container was created for a refused network")
				}
				return
			}
			if res.Output.Status != contract.StatusOK {
				t.Fatalf("turn: %+v", res)
			}
			var s sandboxReport
			if err := json.Unmarshal([]byte(res.Output.Result), &s); err != nil {
				t.Fatalf("decode report: %v\n%s", err, res.Output.Result)
			}
			got := slices.Sorted(slices.Values(s.Interfaces))
			if !slices.Equal(got, c.ifaces) {
				t.Errorf("interfaces from inside = %v, want %v", got, c.ifaces)
			}
			if slices.Equal(got, host) {
				t.Errorf("the agent sees the host's interfaces %v", host)
			}
		})
	}
}

// TestNetworks asks every rootful engine of the test host for every network value a group
// could name, through the runner: what arizukod refuses never reaches the engine, what the
// engine lacks is a terminal misconfiguration naming the mode and the engine, and what runs
// sees only its own interfaces. Podman's bridge, which would add a bridge to the host's
// network namespace, runs on an engine in a namespace of its own (TestBridgeNetworks); the
// test host's dockerd has no bridge (--bridge=none), so its bridge mode gives only lo.
func TestNetworks(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			absent := "arizuko-absent-" + daemontest.RandHex(4)
			h := newHarness(t, e, func(c *runner.Config) { c.Networks = []string{absent} })
			ctx := context.Background()
			// A real container whose network namespace a group could try to join.
			other, err := h.eng.Create(ctx, engine.Spec{Name: "arizuko-other-" + h.cfg.Instance, Image: h.cfg.Image, Stdin: true,
				Labels: map[string]string{engine.LabelInstance: "someone-else"}})
			if err != nil {
				t.Fatal(err)
			}
			defer h.eng.Remove(ctx, other)
			mode := func(network string, ifaces ...string) netCase {
				if slices.Contains(h.info.Networks, network) {
					return netCase{network: network, ifaces: ifaces}
				}
				return netCase{network: network, refuse: h.info.String() + " has no " + network + " network"}
			}
			cases := []netCase{
				{network: "", ifaces: []string{"lo"}},
				{network: "none", ifaces: []string{"lo"}},
				{network: "host", refuse: `"host" would give the agent the host's network`},
				{network: "container:" + other, refuse: "would share another network namespace"},
				{network: "ns:/proc/1/ns/net", refuse: "would share another network namespace"},
				{network: "bad net!", refuse: "a network name is"},
				{network: "lab", refuse: `"lab" is not in limits.allowed_networks`},
				{network: absent, refuse: absent, byEngine: true},
				mode("slirp4netns", "lo", "tap0"),
				func() netCase { c := mode("slirp4netns", "lo", "tap0"); c.network = "slirp"; return c }(),
				mode("pasta", "lo", "eth0"),
			}
			if e.Kind == "docker" {
				cases = append(cases, netCase{network: "bridge", ifaces: []string{"lo"}})
			}
			runNetCases(t, h, cases)
		})
	}
}

// TestEngineRefusesHostNetwork: asked directly, with no runner in front, no engine creates a
// container on the host's network or another namespace's.
func TestEngineRefusesHostNetwork(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			h := newHarness(t, e, nil)
			ctx := context.Background()
			for _, n := range []string{"host", "container:" + h.cfg.Instance, "ns:/proc/1/ns/net", "private"} {
				id, err := h.eng.Create(ctx, engine.Spec{Name: "arizuko-hostnet-" + h.cfg.Instance, Image: h.cfg.Image, Network: n,
					Labels: map[string]string{engine.LabelInstance: h.cfg.Instance}})
				if !errors.Is(err, engine.ErrCreate) || !errors.Is(err, engine.ErrNetwork) {
					t.Errorf("network %q: created %q, %v; want ErrCreate and ErrNetwork", n, id, err)
				}
				if id != "" {
					h.eng.Remove(ctx, id)
				}
			}
		})
	}
}

// TestLimitsInfo: the engines of the test host say whether they apply the limits. The
// rootful ones do; rootless Podman on this host's cgroups v1 cannot, and says why.
func TestLimitsInfo(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		if _, info := e.Open(t); info.NoLimits != "" {
			t.Errorf("%s: %s says it cannot apply the limits: %s", e.Name, info, info.NoLimits)
		}
	}
	_, info := enginetest.Rootless(t).Open(t)
	var fs syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &fs); err != nil {
		t.Fatal(err)
	}
	const cgroup2 = 0x63677270
	if fs.Type != cgroup2 && !strings.Contains(info.NoLimits, "cgroups v1") {
		t.Errorf("rootless %s on cgroups v1: NoLimits = %q, want the reason", info, info.NoLimits)
	}
	t.Logf("rootless %s: %q", info, info.NoLimits)
}

// TestLimitsPromise runs turns as on an engine that cannot apply the limits (the reason the
// test host's rootless Podman gives, on a rootful engine's runner): refused with the reason
// and the fix and no container made, unless the operator allowed it.
func TestLimitsPromise(t *testing.T) {
	_, rootless := enginetest.Rootless(t).Open(t)
	if rootless.NoLimits == "" {
		rootless.NoLimits = "a reason"
	}
	e := enginetest.Rootful(t)[0]
	for _, allow := range []bool{false, true} {
		h := newHarness(t, e, func(c *runner.Config) {
			c.Info.NoLimits = rootless.NoLimits
			c.AllowUnlimited = allow
		})
		var created atomic.Bool
		res := h.turn("main", "reply bounded", func(tn *runner.Turn) { tn.OnCreated = func(string, string) { created.Store(true) } })
		if allow {
			if res.Output.Status != contract.StatusOK || res.Output.Result != "bounded" {
				t.Errorf("allow_unlimited = true: %+v, want the turn to run", res)
			}
			continue
		}
		if res.Failure != runner.FailMisconfig || !res.Terminal || created.Load() ||
			!strings.Contains(res.Output.Error, rootless.NoLimits) || !strings.Contains(res.Output.Error, "allow_unlimited = true") {
			t.Errorf("without allow_unlimited: %+v (created %v), want a terminal misconfig with the reason and the fix", res, created.Load())
		}
	}
}

// TestBridgeNetworks runs turns on the bridge mode and on a network the operator allowed,
// on a private Podman and a private dockerd, each in a network namespace of its own so that
// their bridges never touch the host's: the agent sees lo and the bridge's eth0, never the
// host's interfaces, and the host's namespace gains no interface.
func TestBridgeNetworks(t *testing.T) {
	before := hostInterfaces(t)
	named := "arizuko-agents-" + daemontest.RandHex(3)
	for _, e := range []struct {
		name  string
		start func(t *testing.T) enginetest.Engine
	}{
		{"podman", func(t *testing.T) enginetest.Engine { return daemontest.StartIsolatedPodman(t, named).Engine() }},
		{"docker", func(t *testing.T) enginetest.Engine {
			d := daemontest.StartIsolatedDocker(t)
			d.CreateNetwork(named)
			return d.Engine()
		}},
	} {
		t.Run(e.name, func(t *testing.T) {
			h := newHarness(t, e.start(t), func(c *runner.Config) { c.Networks = []string{named} })
			runNetCases(t, h, []netCase{
				{network: "bridge", ifaces: []string{"eth0", "lo"}},
				{network: named, ifaces: []string{"eth0", "lo"}},
				{network: "none", ifaces: []string{"lo"}},
				{network: "host", refuse: `"host" would give the agent the host's network`},
				{network: "lab", refuse: `"lab" is not in limits.allowed_networks`},
			})
		})
	}
	if after := hostInterfaces(t); !slices.Equal(after, before) {
		t.Errorf("the host's interfaces changed: %v, were %v", after, before)
	}
}
