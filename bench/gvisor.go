package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/podman"
)

// gvisorRow is one engine and OCI runtime: turn latency and what the agent's container
// holds in memory while a turn sleeps.
type gvisorRow struct {
	engine, runtime string
	sample          sample
	// cgroupBytes is memory.usage_in_bytes of the container's memory cgroup (runc: the
	// agent; runsc: the sandbox, its gofer and the agent inside), rssKB the VmRSS summed
	// over the cgroup's processes, both read while a `sleep 3s` turn runs.
	cgroupBytes int64
	rssKB       int64
	procs       int
}

// gvisorRuntime is the [limits] of a daemon whose turns run under gVisor.
const gvisorRuntime = "[limits]\nruntime = \"runsc\"\nallowed_runtimes = [\"runsc\"]\n"

// gvisor measures turns under runsc against runc: Docker with one daemon of each (runsc
// is registered per container), and Podman 4.3 against -podman-gvisor, the service whose
// own runtime is runsc (Podman's API has no runtime per container). The two daemons of an
// engine take turns, one turn each, so that both see the same load.
func (b *bench) gvisor(ctx context.Context) error {
	type side struct {
		kind, socket, runtime, extra string
		eng                          engine.Engine
	}
	var engines [][2]side
	if b.podmanGVisor != nil {
		engines = append(engines, [2]side{{"podman", b.o.podmanSocket, "runc", "", b.podman},
			{"podman", b.o.podmanGVisorSocket, "runsc", gvisorRuntime, b.podmanGVisor}})
	}
	if b.docker != nil {
		engines = append(engines, [2]side{{"docker", b.o.dockerSocket, "runc", "", b.docker},
			{"docker", b.o.dockerSocket, "runsc", gvisorRuntime, b.docker}})
	}
	for _, pair := range engines {
		var ds [2]*daemonProc
		rows := [2]gvisorRow{}
		for i, s := range pair {
			name := "arizukod-gvisor-" + s.kind + "-" + s.runtime
			d, err := b.startDaemonIn(ctx, filepath.Join(b.o.work, name), b.o.skillsDir, name, s.kind, s.socket, b.o.arizukod, b.o.image, s.extra, nil)
			if err != nil {
				return err
			}
			if err := d.addGroups(ctx, latencyFolder); err != nil {
				return err
			}
			ds[i], rows[i] = d, gvisorRow{engine: s.kind, runtime: s.runtime}
		}
		b.say("gvisor: %s under runc and runsc, %d+%d turns each, interleaved", pair[0].kind, b.o.warm, b.o.turns)
		for n := 0; n < b.o.warm+b.o.turns; n++ {
			for i, d := range ds {
				tr, err := d.turn(ctx, latencyFolder, "noop")
				if err != nil {
					return fmt.Errorf("gvisor %s %s: %w", pair[i].kind, pair[i].runtime, err)
				}
				if n >= b.o.warm {
					rows[i].sample = append(rows[i].sample, tr.done.Sub(tr.submitted))
				}
			}
		}
		for i, d := range ds {
			if err := b.gvisorMemory(ctx, d, pair[i].eng, &rows[i]); err != nil {
				return fmt.Errorf("gvisor %s %s: %w", pair[i].kind, pair[i].runtime, err)
			}
			d.stop()
		}
		b.report.gvisor = append(b.report.gvisor, rows[:]...)
	}
	return nil
}

// gvisorMemory runs a `sleep 3s` turn of d and reads its container's memory cgroup on the
// host while it runs (cgroups v1, as the test host's engines use them).
func (b *bench) gvisorMemory(ctx context.Context, d *daemonProc, eng engine.Engine, row *gvisorRow) error {
	run, err := d.client.CreateRun(ctx, apiRun(latencyFolder, "sleep 3s"))
	if err != nil {
		return err
	}
	defer d.client.WaitRun(ctx, run.ID)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		// A container prepared ahead carries no run label: the daemon's one running
		// container is the turn's.
		list, err := eng.List(ctx, map[string]string{engine.LabelInstance: d.instance})
		if err != nil {
			return err
		}
		for _, c := range list {
			if !c.Running {
				continue
			}
			// Let the agent settle into its sleep.
			time.Sleep(time.Second)
			dir := cgroupDir("/sys/fs/cgroup/memory", c.ID)
			if dir == "" {
				return fmt.Errorf("no memory cgroup of container %s", c.ID)
			}
			b, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
			if err != nil {
				return err
			}
			row.cgroupBytes, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			if err != nil {
				return err
			}
			for _, pid := range strings.Fields(string(procs)) {
				n, _ := strconv.Atoi(pid)
				if kb, err := procStatusKB(n, "VmRSS"); err == nil {
					row.rssKB += kb
					row.procs++
				}
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the sleep turn %s never ran", run.ID)
}

// cgroupDir is the directory under root whose name holds id, "" when none does.
func cgroupDir(root, id string) string {
	var found string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found != "" {
			return fs.SkipDir
		}
		if d.IsDir() && strings.Contains(d.Name(), id) {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	return found
}

// openGVisor opens -podman-gvisor, when given.
func (b *bench) openGVisor(ctx context.Context) error {
	if b.o.podmanGVisorSocket == "" {
		return nil
	}
	b.podmanGVisor = podman.New(b.o.podmanGVisorSocket)
	info, err := b.podmanGVisor.Info(ctx)
	if err != nil {
		return fmt.Errorf("podman gVisor at %s: %w", b.o.podmanGVisorSocket, err)
	}
	b.report.machine.engines = append(b.report.machine.engines, fmt.Sprintf("podman %s, runtime runsc (API %s) at %s", info.Version, info.APIVersion, b.o.podmanGVisorSocket))
	return nil
}

func (r *report) gvisorSection(p printer) {
	p("## gVisor (runsc) against runc")
	p("")
	p("A no-op turn, submit to result (apiwire.Client CreateRun + WaitRun against `arizukod serve`, prepared 5: the")
	p("default; the runc and the runsc daemon of an engine take turns, one turn each), then, while a `sleep 3s` turn runs, the memory of its container's cgroup on the host and the")
	p("resident memory of the processes in it. Under runc the cgroup holds the agent alone; under runsc it holds")
	p("gVisor's sandbox (its kernel, with the agent inside) and its gofer. Docker runs runsc per container")
	p("(daemon.json `runtimes`); Podman only as its service's own runtime, so its runsc rows are another Podman")
	p("4.3 service, with its own storage, whose containers.conf says `runtime = \"runsc\"`.")
	p("")
	p("| engine | runtime | p50 ms | p90 ms | p50 ÷ runc p50 | cgroup memory MiB | RSS of its processes MiB (processes) |")
	p("|---|---|---:|---:|---:|---:|---:|")
	base := map[string]time.Duration{}
	for _, g := range r.gvisor {
		if g.runtime == "runc" {
			base[g.engine] = g.sample.p50()
		}
	}
	for _, g := range r.gvisor {
		p("| %s | %s | %s | %s | %s | %.1f | %.1f (%d) |", g.engine, g.runtime, ms(g.sample.p50()), ms(g.sample.pct(90)),
			ratio(g.sample.p50(), base[g.engine]), float64(g.cgroupBytes)/(1<<20), float64(g.rssKB)/1024, g.procs)
	}
	p("")
}
