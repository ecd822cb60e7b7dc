package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/arizuko/arizukod/contract"
)

// latencyMethod is one way to run a no-op turn, measured submit to result.
type latencyMethod struct {
	name   string
	engine string // "podman", "podman5", "rootless" or "docker"
	about  string
	daemon *daemonProc // nil for a command line
	// localCLI marks a command line that is the engine itself, without a service.
	localCLI bool
	// candidate marks an arizukod build other than the one under test (-candidate).
	candidate bool
	run       func(ctx context.Context) (time.Duration, error)
	sample    sample
	// For daemon methods: the run IDs measured and the daemon's CPU time spent on them.
	runs    []turnResult
	cpu     time.Duration
	version string
	// prepared counts the measured turns that ran in a container prepared ahead.
	prepared int
}

// latencyResult is the turn latency table with the daemon's own account of its turns.
type latencyResult struct {
	methods []*latencyMethod
	warm    int
	turns   int
	// breakdown is the median of each part of a daemon turn, per daemon method.
	breakdown map[string][]breakdownRow
}

type breakdownRow struct {
	part string
	p50  time.Duration
}

const latencyFolder = "bench"

func (b *bench) latency(ctx context.Context) error {
	stdin, err := contract.EncodeInput(contract.Input{Messages: []contract.Message{{Role: "user", Content: "noop"}}, Folder: latencyFolder})
	if err != nil {
		return err
	}
	var methods []*latencyMethod
	engines := map[string]string{"podman": b.o.podmanSocket, "docker": b.o.dockerSocket, "podman5": b.o.podman5Socket, "rootless": b.o.rootless}
	// extra is more configuration: the daemon that prepares nothing, beside the default.
	type daemonSpec struct{ name, kind, binary, about, extra string }
	var specs []daemonSpec
	for _, kind := range strings.Split(b.o.daemonEngines, ",") {
		if kind == "podman" || kind == "docker" && b.o.dockerSocket != "" {
			specs = append(specs, daemonSpec{"arizukod-" + kind, kind, b.o.arizukod, b.o.arizukod, ""})
		}
		if kind == "podman" {
			specs = append(specs, daemonSpec{"arizukod-podman-unprepared", kind, b.o.arizukod, b.o.arizukod, "prepared = 0\n"})
		}
	}
	if b.o.podman5Socket != "" {
		specs = append(specs, daemonSpec{"arizukod-podman5", "podman5", b.o.arizukod, b.o.arizukod, ""})
	}
	if b.o.rootless != "" {
		specs = append(specs, daemonSpec{"arizukod-rootless", "rootless", b.o.arizukod, b.o.arizukod, ""})
	}
	for _, c := range b.o.candidates {
		for _, kind := range strings.Split(b.o.daemonEngines, ",") {
			if kind == "podman" || kind == "docker" && b.o.dockerSocket != "" {
				specs = append(specs, daemonSpec{c.name + "-" + kind, kind, c.binary, "candidate build " + c.binary, ""})
			}
		}
	}
	for _, ds := range specs {
		kind := ds.kind
		if kind == "podman5" || kind == "rootless" {
			kind = "podman"
		}
		dir, skills := filepath.Join(b.o.work, ds.name), b.o.skillsDir
		if ds.kind == "podman5" {
			// The chrooted Podman 5 sees only its shared paths: a copy of the skills there.
			dir = filepath.Join(b.p5Work, ds.name)
			skills = filepath.Join(dir, "skills")
			if err := os.CopyFS(skills, os.DirFS(b.o.skillsDir)); err != nil {
				return fmt.Errorf("skills for podman 5: %w", err)
			}
		}
		var as *runAs
		if ds.kind == "rootless" {
			// Its own user's daemon, in a directory of that user's, with a copy of the skills.
			dir = filepath.Join(b.rlWork, ds.name)
			skills = filepath.Join(dir, "skills")
			if err := os.CopyFS(skills, os.DirFS(b.o.skillsDir)); err != nil {
				return fmt.Errorf("skills for rootless podman: %w", err)
			}
			as = &runAs{uid: b.o.rootlessUID, gid: b.o.rootlessGID, allowUnlimited: b.rlInfo.NoLimits != "",
				home: envOr("ARIZUKO_TEST_ROOTLESS_HOME", "/"), runtime: fmt.Sprintf("/run/user/%d", b.o.rootlessUID)}
		}
		d, err := b.startDaemonIn(ctx, dir, skills, ds.name, kind, engines[ds.kind], ds.binary, b.o.image, ds.extra, as)
		if err != nil {
			return err
		}
		if err := d.addGroups(ctx, latencyFolder); err != nil {
			return err
		}
		name := "arizukod on " + ds.kind
		switch ds.kind {
		case "podman5":
			name = "arizukod on podman 5"
		case "rootless":
			name = "arizukod on rootless podman"
		}
		if ds.binary != b.o.arizukod {
			name = strings.TrimSuffix(ds.name, "-"+ds.kind) + " on " + ds.kind
		}
		about := "apiwire.Client CreateRun + WaitRun against `" + ds.about + " serve` (engine " + ds.kind + ", max_running 5, prepared 5: the default)"
		if ds.extra != "" {
			name += ", nothing prepared"
			about = "as above with `" + strings.TrimSpace(ds.extra) + "`: every turn creates its container"
		}
		m := &latencyMethod{name: name, engine: ds.kind, daemon: d, candidate: ds.binary != b.o.arizukod || ds.extra != "", about: about}
		m.run = func(ctx context.Context) (time.Duration, error) {
			c0, _ := cpuTime(d.cmd.Process.Pid)
			tr, err := d.turn(ctx, latencyFolder, "noop")
			c1, _ := cpuTime(d.cmd.Process.Pid)
			m.cpu += c1 - c0
			m.runs = append(m.runs, tr)
			return tr.done.Sub(tr.submitted), err
		}
		methods = append(methods, m)
	}
	type engineCLI struct {
		cli    cliMethod
		engine string
	}
	clis := []engineCLI{{podmanLocal(b.o.testhostDir), "podman"}, {podmanRemote(b.o.podmanSocket), "podman"}}
	if b.o.podman5Socket != "" {
		if b.o.podman5Chroot != "" {
			clis = append(clis, engineCLI{podman5Local(b.o.testhostDir, b.o.podman5Chroot), "podman5"})
		}
		clis = append(clis, engineCLI{podman5Remote(b.o.podman5Socket), "podman5"})
	}
	if b.o.rootless != "" {
		clis = append(clis, engineCLI{rootlessLocal(b.o.rootlessUID, b.o.rootlessGID, envOr("ARIZUKO_TEST_ROOTLESS_HOME", "/"),
			filepath.Join(b.o.testhostDir, "rootless", "tmp")), "rootless"}, engineCLI{rootlessRemote(b.o.rootless), "rootless"})
	}
	if b.o.dockerSocket != "" {
		clis = append(clis, engineCLI{dockerCLI(b.o.dockerCLI, b.o.dockerSocket), "docker"})
	}
	for _, c := range clis {
		m := &latencyMethod{name: c.cli.name, engine: c.engine, about: c.cli.about, version: c.cli.version(ctx), localCLI: c.cli.local}
		m.run = func(ctx context.Context) (time.Duration, error) { return c.cli.run(ctx, b.o.image, stdin) }
		methods = append(methods, m)
	}
	b.say("latency: %d methods x (%d warm + %d measured) no-op turns, interleaved", len(methods), b.o.warm, b.o.turns)
	for round := -b.o.warm; round < b.o.turns; round++ {
		for k := range methods {
			m := methods[(k+max(round, 0))%len(methods)]
			d, err := m.run(ctx)
			if err != nil {
				return fmt.Errorf("latency, %s: %w", m.name, err)
			}
			if round < 0 {
				if m.daemon != nil {
					m.runs, m.cpu = nil, 0
				}
				continue
			}
			m.sample = append(m.sample, d)
		}
		if round >= 0 && (round+1)%10 == 0 {
			b.say("latency: %d/%d rounds", round+1, b.o.turns)
		}
	}
	res := &latencyResult{methods: methods, warm: b.o.warm, turns: b.o.turns, breakdown: map[string][]breakdownRow{}}
	for _, m := range methods {
		if m.daemon == nil {
			continue
		}
		rows, err := breakdown(m)
		if err != nil {
			b.say("breakdown of %s: %v", m.name, err)
			continue
		}
		res.breakdown[m.name] = rows
	}
	b.report.latency = res
	return nil
}

// breakdown splits the daemon's turns with its per-run logs: submit to the runner's start
// (API, store, queue, turn building), the runner's events, and the runner's end to the
// client holding the result (recording the run, waking the waiting request).
func breakdown(m *latencyMethod) ([]breakdownRow, error) {
	logs, err := m.daemon.readRunLogs(latencyFolder)
	if err != nil {
		return nil, err
	}
	parts := []string{
		"submit -> runner starts (API, store, queue, prompt, session)",
		"runner start -> created, or prepared one taken (Ensure, mounts, Engine.Create or none)",
		"created or taken -> started (Engine.Attach, Engine.Start)",
		"started -> exit classified (agent runs, Engine.Wait, stream end)",
		"exit classified -> runner returns (Engine.Remove)",
		"runner returns -> client has the result (store, long-poll answer)",
		"total, submit to result",
	}
	s := make([]sample, len(parts))
	for _, tr := range m.runs {
		rl, ok := logs[tr.run.ID]
		if !ok {
			return nil, fmt.Errorf("no run log for %s", tr.run.ID)
		}
		created, ok1 := rl.events["created"]
		if p, ok := rl.events["prepared"]; ok {
			created, ok1 = p, true
			m.prepared++
		}
		started, ok2 := rl.events["started"]
		exited, ok3 := rl.events["exited"]
		if !ok1 || !ok2 || !ok3 || rl.started.IsZero() {
			return nil, fmt.Errorf("run log of %s lacks created/started/exited", tr.run.ID)
		}
		end := rl.started.Add(rl.duration)
		for i, d := range []time.Duration{
			rl.started.Sub(tr.submitted), created, started - created, exited - started,
			rl.duration - exited, tr.done.Sub(end), tr.done.Sub(tr.submitted),
		} {
			s[i] = append(s[i], d)
		}
	}
	rows := make([]breakdownRow, len(parts))
	for i, p := range parts {
		rows[i] = breakdownRow{part: p, p50: s[i].p50()}
	}
	return rows, nil
}
