package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// report is everything measured, rendered as BENCHMARKS.md.
type report struct {
	began      time.Time
	took       time.Duration
	machine    machine
	latency    *latencyResult
	throughput []throughputRow
	memory     *memoryResult
	cold       *coldResult
	phases     []*phaseResult
	goBench    []goBenchResult
	delivery   *deliveryResult
	gvisor     []gvisorRow
	tracing    *tracingResult
	claude     *claudeLatencyResult
	density    *densityResult
}

func (r *report) markdown(mode string) string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format+"\n", args...) }
	p("# Benchmarks")
	p("")
	p("Made by `make bench` (hack/bench.sh, which runs the program in bench/) on %s in %s. Every figure", r.began.UTC().Format("2006-01-02 15:04 MST"), r.took.Round(time.Second))
	p("below comes from that one run, on the same engines and the same image. Regenerate with `make bench`;")
	p("do not edit by hand. `hack/bench.sh -mode=phases` (or latency, throughput, delivery, cold, gvisor, tracing, claude, density) repeats one part and only prints it.")
	p("")
	r.machineSection(p)
	if r.latency != nil {
		r.latencySection(p)
	}
	if len(r.throughput) > 0 {
		r.throughputSection(p)
	}
	if r.delivery != nil {
		r.deliverySection(p)
	}
	if len(r.gvisor) > 0 {
		r.gvisorSection(p)
	}
	if r.cold != nil {
		r.coldSection(p)
	}
	if r.memory != nil {
		r.memorySection(p)
	}
	if len(r.phases) > 0 {
		r.phasesSection(p)
	}
	if len(r.goBench) > 0 {
		r.goBenchSection(p)
	}
	if r.tracing != nil {
		r.tracingSection(p)
	}
	if r.claude != nil {
		r.claudeSection(p)
	}
	if r.density != nil {
		r.densitySection(p)
	}
	if mode == "all" {
		r.conclusion(p)
	}
	return w.String()
}

type printer func(format string, args ...any)

func (r *report) machineSection(p printer) {
	m := r.machine
	p("## Machine")
	p("")
	p("| | |")
	p("|---|---|")
	p("| CPUs (nproc) | %d × %s |", m.cpus, m.cpuModel)
	p("| memory | %s |", m.memory)
	p("| kernel | %s |", m.kernel)
	p("| distribution | %s |", m.distro)
	for _, e := range m.engines {
		name, rest, _ := strings.Cut(e, " ")
		p("| engine %s | %s |", name, rest)
	}
	if r.latency != nil {
		for _, mt := range r.latency.methods {
			if mt.version != "" {
				p("| %s | %s |", mt.name, mt.version)
			}
		}
	}
	built := m.arizukod
	if !strings.Contains(m.arizukod, m.commit) {
		built += ", repository at " + m.commit
	}
	p("| arizukod | %s, built by %s |", built, m.goVersion)
	p("| load average (1, 5, 15 min) | %s at the start, %s at the end |", m.loadStart, m.loadAfter)
	p("")
	p("The machine is shared: other jobs ran during the measurement (see the load average), so absolute")
	p("figures are noisy. Methods are interleaved turn by turn, so each ratio compares methods under the")
	p("same load.")
	p("")
}

// daemonP50 is the p50 of arizukod on engine, or zero.
func (r *report) daemonP50(engine string) time.Duration {
	if r.latency == nil {
		return 0
	}
	for _, m := range r.latency.methods {
		if m.daemon != nil && !m.candidate && m.engine == engine {
			return m.sample.p50()
		}
	}
	return 0
}

// cliP50For is the p50 of the command line on engine, the local one or the other, or zero.
func (r *report) cliP50For(engine string, local bool) time.Duration {
	if r.latency == nil {
		return 0
	}
	for _, m := range r.latency.methods {
		if m.daemon == nil && m.engine == engine && m.localCLI == local {
			return m.sample.p50()
		}
	}
	return 0
}

func (r *report) latencySection(p printer) {
	l := r.latency
	p("## 1. Turn latency, submit to result (no-op turn)")
	p("")
	p("%d measured turns per method after %d warm-up turns, interleaved: each round runs every method once,", l.turns, l.warm)
	p("in an order that rotates by one each round. Agent message `noop`: the example agent answers at once.")
	p("arizukod's figure is `apiwire.Client.CreateRun` + `WaitRun` (HTTP over its unix socket; the run goes")
	p("through the store, the queue, prompt assembly, session seeding and the runner). Every command line")
	p("runs `run --rm -i` with `%s` and gets the same JSON line on stdin.", strings.Join(hardening, " "))
	p("arizukod does strictly more per turn: it also bind-mounts the group, session, IPC and skills")
	p("directories, sets labels, env and the user, and records the run in SQLite.")
	p("")
	p("Each arizukod row is compared with the command lines on its own engine: the local CLI (the engine")
	p("itself, no service) and the remote CLI (the same API service arizukod talks to).")
	p("")
	p("| method | engine | p50 ms | p90 ms | p99 ms | p50 ÷ podman CLI local p50 | p50 ÷ podman CLI remote p50 | p50 ÷ docker CLI p50 |")
	p("|---|---|---:|---:|---:|---:|---:|---:|")
	for _, m := range l.methods {
		cells := []string{"", "", ""}
		if m.daemon != nil {
			if m.engine == "docker" {
				cells[2] = ratio(m.sample.p50(), r.cliP50For("docker", false))
			} else {
				cells[0], cells[1] = ratio(m.sample.p50(), r.cliP50For(m.engine, true)), ratio(m.sample.p50(), r.cliP50For(m.engine, false))
			}
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s |", m.name, m.engine, ms(m.sample.p50()), ms(m.sample.pct(90)), ms(m.sample.pct(99)),
			cells[0], cells[1], cells[2])
	}
	p("")
	for _, m := range l.methods {
		p("- **%s**: %s", m.name, m.about)
	}
	for _, m := range l.methods {
		if m.daemon != nil && len(m.runs) > 0 {
			p("- CPU time of the daemon of %s: %s ms per turn (its utime+stime over the measured turns); %d of its %d measured turns ran in a container prepared ahead.",
				m.name, ms(m.cpu/time.Duration(len(m.runs))), m.prepared, len(m.runs))
		}
	}
	p("")
	names := make([]string, 0, len(l.breakdown))
	for n := range l.breakdown {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p("Where a turn of **%s** goes, from the runner's per-run log (groups/bench/logs/container-*.log, events", n)
		p("rounded to the millisecond) and the client's clock; medians of each part, so they need not add up:")
		p("")
		p("| part | p50 ms |")
		p("|---|---:|")
		for _, row := range l.breakdown[n] {
			p("| %s | %s |", row.part, ms(row.p50))
		}
		p("")
	}
}

func (r *report) throughputSection(p printer) {
	p("## 2. Throughput")
	p("")
	p("| method | how | turns | total s | turns/s | failures | leftover containers | arizukod CPU ms/turn | podman service CPU ms/turn |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, t := range r.throughput {
		left, dcpu := "-", "-"
		if t.daemon {
			left = fmt.Sprintf("%d", t.leftovers)
			if t.prepared > 0 {
				left += fmt.Sprintf(" (+%d prepared, never started)", t.prepared)
			}
			dcpu = ms(t.daemonCPU / time.Duration(max(t.turns, 1)))
		}
		p("| %s | %s | %d | %.1f | %.1f | %d | %s | %s | %s |", t.name, t.about, t.turns, t.took.Seconds(),
			float64(t.turns)/t.took.Seconds(), t.failures, left, dcpu, ms(t.engineCPU/time.Duration(max(t.turns, 1))))
	}
	p("")
	for _, t := range r.throughput {
		if t.firstErr != "" {
			p("- first failure of %s: `%s`", t.name, t.firstErr)
		}
	}
	p("Leftovers are counted by the daemon's `io.arizuko.instance` label once the last result is in; a container")
	p("that never started (prepared ahead for a next turn) is not a leftover.")
	for _, t := range r.throughput {
		if t.daemon && t.leftovers == 0 {
			p("%s: the engine held no container of a finished run %s after the last result.", t.name, t.leftoverWait.Round(time.Millisecond))
		}
	}
	p("The podman service's CPU does not include conmon and runc, which run as processes of their own;")
	p("for the local CLI all the engine work is in the CLI processes, so its column only shows what")
	p("the service did meanwhile.")
	p("")
}

func (r *report) coldSection(p printer) {
	c := r.cold
	p("## 3. Cold start through socket activation")
	p("")
	p("`%s`, %d times. The socket exists before the daemon; the clock", c.command, c.runs)
	p("starts at the first connection (GET /health, repeated every 5 ms after each answer) and each row stops at")
	p("the first answer of its kind. The goal is the first 200 within 100 ms (p50). The data dir persists")
	p("across starts, as for an installed service.")
	p("")
	p("| | p50 ms | p90 ms | max ms |")
	p("|---|---:|---:|---:|")
	p("| first connection -> first answer | %s | %s | %s |", ms(c.firstAnswer.p50()), ms(c.firstAnswer.pct(90)), ms(c.firstAnswer.pct(100)))
	p("| first connection -> first 200 (engine answers a ping) | %s | %s | %s |", ms(c.firstOK.p50()), ms(c.firstOK.pct(90)), ms(c.firstOK.pct(100)))
	p("| first connection -> engine details known (limits no longer pending) | %s | %s | %s |", ms(c.detailed.p50()), ms(c.detailed.pct(90)), ms(c.detailed.pct(100)))
	p("")
	var st []string
	for k, v := range c.firstStatus {
		st = append(st, fmt.Sprintf("%s × %d", k, v))
	}
	sort.Strings(st)
	p("First answers: %s.", strings.Join(st, ", "))
	p("")
	if len(c.candidates) > 0 {
		p("The -candidate builds, started in turn with the one above (each start of one build next to the same")
		p("start of the others, so under the same load):")
		p("")
		p("| build | first 200 p50 ms | p90 ms | max ms | details known p50 ms |")
		p("|---|---:|---:|---:|---:|")
		row := func(name string, r *coldResult) {
			p("| %s | %s | %s | %s | %s |", name, ms(r.firstOK.p50()), ms(r.firstOK.pct(90)), ms(r.firstOK.pct(100)), ms(r.detailed.p50()))
		}
		row("arizukod (-arizukod)", c)
		for _, cand := range c.candidates {
			row(cand.name, cand.res)
		}
		p("")
	}
}

func (r *report) memorySection(p printer) {
	m := r.memory
	p("## 4. Resident memory of the daemon (VmRSS)")
	p("")
	p("| state | VmRSS MiB | of which anonymous MiB | file-backed MiB |")
	p("|---|---:|---:|---:|")
	p("| idle, fresh (started, engine up, no turn yet) | %.1f | %.1f | %.1f |", float64(m.idleFresh)/1024, float64(m.freshAnon)/1024, float64(m.idleFresh-m.freshAnon)/1024)
	p("| idle after the latency and throughput runs | %.1f | %.1f | %.1f |", float64(m.idleAfter)/1024, float64(m.afterAnon)/1024, float64(m.idleAfter-m.afterAnon)/1024)
	p("| %d turns in flight (agent `sleep 5s`), largest seen | %.1f | | |", m.inFlightN, float64(m.inFlight)/1024)
	if m.floor > 0 {
		p("| floor: bench/depsfloor, a program that only imports the packages of the required modules arizukod links | %.1f | %.1f | %.1f |", float64(m.floor)/1024, float64(m.floorAnon)/1024, float64(m.floor-m.floorAnon)/1024)
	}
	if m.floorAPI > 0 {
		p("| the same with the Podman bindings' containers, images, system and specgen packages | %.1f | %.1f | %.1f |", float64(m.floorAPI)/1024, float64(m.floorAPIAnon)/1024, float64(m.floorAPI-m.floorAPIAnon)/1024)
	}
	p("")
	if m.preparedConmon > 0 {
		p("A container prepared ahead costs, while it waits, %.1f MiB for its conmon and %.1f MiB for the OCI runtime's", float64(m.preparedConmon)/1024, float64(m.preparedInit)/1024)
		p("init process (PSS, measured on the worked daemon's prepared container); `prepared` bounds how many wait.")
		p("")
	}
	p("Goals: idle at most 25 MiB fresh and 35 MiB after the latency and throughput runs.")
	p("File-backed pages are the binary's, touched at start by the packages' initialisation (the Docker")
	p("client, the MCP server's JSON Schema, the Podman bindings' connection); the kernel can drop them")
	p("under pressure. The floor rows are what importing the required modules costs before a line of")
	p("arizukod runs. runtime/podman speaks libpod's API through the bindings' connection with its own")
	p("request and answer types; the last row is what the bindings' API packages would add to the floor.")
	p("")
}

func (r *report) phasesSection(p printer) {
	p("## 5. Where a turn's time goes at the engine API (per phase)")
	p("")
	p("bench/ drives containers through `engine.Engine` itself (same spec as the runner: mounts, labels,")
	p("env, user, limits), one no-op turn at a time, the variants interleaved. Each column is a way to run")
	p("a turn; a phase paid before the clock starts (created or initialized ahead) or after the result")
	p("(removal) is shown in brackets and is not part of the critical path. p50 in ms.")
	p("")
	for _, res := range r.phases {
		p("### %s %s (%d turns per variant)", res.engine, res.version, res.n)
		p("")
		head := "| phase |"
		sep := "|---|"
		for _, v := range res.variants {
			head += " " + v.name + " |"
			sep += "---:|"
		}
		p("%s", head)
		p("%s", sep)
		for _, ph := range []string{phCreate, phInit, phAttach, phStart, phExitSeen, phWaitRet, phWaitLag, phInspect, phRemove, phTotal} {
			row := "| " + ph + " |"
			any := false
			for _, v := range res.variants {
				s := res.samples[v.name][ph]
				cell := ""
				if len(s) > 0 {
					any = true
					cell = ms(s.p50())
					if (v.ahead && (ph == phCreate || ph == phInit)) || (v.started && (ph == phAttach || ph == phStart)) || (v.removeAfter && ph == phRemove) {
						cell = "(" + cell + ")"
					}
					if ph == phTotal {
						cell = "**" + cell + "**"
					}
				}
				row += " " + cell + " |"
			}
			if any {
				p("%s", row)
			}
		}
		row := "| critical path p90 |"
		for _, v := range res.variants {
			row += " " + ms(res.samples[v.name][phTotal].pct(90)) + " |"
		}
		p("%s", row)
		p("")
		for _, v := range res.variants {
			note := ""
			if n := res.inspects[v.name]; n > 0 {
				note = fmt.Sprintf(" (%.1f inspects per turn until the exit showed", float64(n)/float64(res.n))
				if f := res.fallbacks[v.name]; f > 0 {
					note += fmt.Sprintf("; %d of %d turns still saw it running after ~60 ms and waited", f, res.n)
				}
				note += ")"
			}
			p("- **%s**: %s%s", v.name, v.about, note)
		}
		p("")
		p("Liveness on %s: `engine.Engine.Info` (what the daemon's engine watch asks at start and every 15 s) %s ms p50, `GET /_ping` %s ms p50 (10 calls each).",
			res.engine, ms(res.info.p50()), ms(res.ping.p50()))
		p("")
	}
}

func (r *report) goBenchSection(p printer) {
	p("## 6. Prompt assembly and MCP tool calls (go test -bench)")
	p("")
	p("| package | benchmark | iterations | figures |")
	p("|---|---|---:|---|")
	for _, g := range r.goBench {
		if g.note != "" {
			p("| %s | %s | | %s |", g.pkg, g.name, g.note)
			continue
		}
		p("| %s | %s | %s | %s |", g.pkg, g.name, g.iters, strings.Join(g.metrics, ", "))
	}
	p("")
}

// phaseTotal is the critical-path p50 of a variant on an engine, or zero.
func (r *report) phaseTotal(engine, variant string) time.Duration {
	for _, res := range r.phases {
		if res.engine == engine {
			return res.samples[variant][phTotal].p50()
		}
	}
	return 0
}

func (r *report) phaseP50(engine, variant, phase string) time.Duration {
	for _, res := range r.phases {
		if res.engine == engine {
			return res.samples[variant][phase].p50()
		}
	}
	return 0
}

func (r *report) conclusion(p printer) {
	p("## Conclusion")
	p("")
	d := r.daemonP50("podman")
	local, remote := r.cliP50For("podman", true), r.cliP50For("podman", false)
	if d == 0 || local == 0 {
		p("The latency table is incomplete; no verdict.")
		return
	}
	p("Target: arizukod's median no-op turn at most 0.3 times the local podman CLI's on the same engine,")
	p("on Podman 4.3 and Podman 5, rootful and rootless. Measured in this run (p50, section 1):")
	p("")
	p("| engine | arizukod ms | podman CLI local ms | ratio | podman CLI remote ms | ratio | at most 0.3 × local |")
	p("|---|---:|---:|---:|---:|---:|---|")
	for _, e := range []struct{ engine, name string }{{"podman", "Podman " + versionOf(r.machine.engines, "podman")}, {"podman5", "Podman 5"}, {"rootless", "rootless Podman"}} {
		ed, elocal, eremote := r.daemonP50(e.engine), r.cliP50For(e.engine, true), r.cliP50For(e.engine, false)
		if ed == 0 || elocal == 0 {
			continue
		}
		verdict := "**no**"
		if ed*10 <= elocal*3 {
			verdict = "**yes**"
		}
		p("| %s | %s | %s | %s | %s | %s | %s |", e.name, ms(ed), ms(elocal), ratio(ed, elocal), ms(eremote), ratio(ed, eremote), verdict)
	}
	if dd, dc := r.daemonP50("docker"), r.cliP50For("docker", false); dd > 0 && dc > 0 {
		p("")
		p("On Docker %s: arizukod %s ms, docker CLI %s ms (ratio %s).", versionOf(r.machine.engines, "docker"), ms(dd), ms(dc), ratio(dd, dc))
	}
	p("")
	today := r.phaseTotal("podman", inTurn)
	if today == 0 {
		return
	}
	p("Where the time goes on Podman (section 5, p50): create %s ms, attach %s ms, start %s ms; the agent's",
		ms(r.phaseP50("podman", inTurn, phCreate)), ms(r.phaseP50("podman", inTurn, phAttach)), ms(r.phaseP50("podman", inTurn, phStart)))
	p("output stream ends %s ms after start, but `Engine.Wait` returns %s ms after start: libpod 4.3's wait",
		ms(r.phaseP50("podman", inTurn, phExitSeen)), ms(r.phaseP50("podman", inTurn, phWaitRet)))
	p("notices the exit only at its poll interval (250 ms unless the request names one): %s ms after the end of",
		ms(r.phaseP50("podman", inTurn, phWaitLag)))
	p("the stream, %s ms with `interval=10ms`. Remove then costs %s ms. Attach is dear because attaching to a",
		ms(r.phaseP50("podman", "wait polls 10ms", phWaitLag)), ms(r.phaseP50("podman", inTurn, phRemove)))
	p("created container makes libpod initialize it (conmon, `runc create`, mounts, cgroup): on an initialized")
	p("container attach costs %s ms. The engine-API critical path of that first sequence is %s ms.",
		ms(r.phaseP50("podman", "prepared + initialized ahead", phAttach)), ms(today))
	p("")
	overhead := r.daemonOverhead("arizukod on podman")
	p("arizukod's own work around the engine calls is small: %s ms p50 per turn (submit to the runner's start,", ms(overhead))
	p("Ensure and mounts, and the runner's end to the client holding the result, from the breakdown in section 1).")
	p("The engine-API sequence decides the latency. Measured alternatives (critical path p50, section 5) and the")
	p("turn latency they imply with that overhead added, against the CLIs' medians of section 1:")
	p("")
	p("| sequence | podman ms | estimated arizukod p50 ms | ÷ podman CLI local | ÷ podman CLI remote | docker ms |")
	p("|---|---:|---:|---:|---:|---:|")
	for _, v := range variants("podman") {
		pv := r.phaseTotal("podman", v.name)
		dv := r.phaseTotal("docker", v.name)
		dcell := "-"
		if dv > 0 {
			dcell = ms(dv)
		}
		est := pv + overhead
		p("| %s | %s | %s | %s | %s | %s |", v.name, ms(pv), ms(est), ratio(est, local), ratio(est, remote), dcell)
	}
	p("")
	p("arizukod's default is the \"prepared + initialized ahead\" sequence (section 1's \"arizukod on podman\"); with")
	p("`prepared = 0` it creates each container in the turn (section 1's \"nothing prepared\" row).")
	p("")
	p("Only the last row is not a fresh container: its agent process was started before the turn, blocked on")
	p("its stdin. It is the floor of what any sequence can reach, not a proposal.")
	p("")
	if st := r.phaseP50("docker", inTurn, phStart); st > 0 {
		p("On Docker, `start` itself costs %s ms (containerd, the shim and runc all run then) and the Engine API has", ms(st))
		p("no step that would do that work ahead of a turn: a container created ahead saves only create (%s ms).",
			ms(r.phaseP50("docker", inTurn, phCreate)))
		p("")
	}
	if seq, tp := r.daemonCPU(); seq > 0 && tp > 0 {
		p("Throughput is bound by the engine on this machine (section 2). The daemon's CPU per turn is %s ms", ms(seq))
		p("for one turn at a time and %s ms with %d runs waiting at once (each `GET /v1/runs/{id}?wait=` is woken", ms(tp), r.throughput[0].turns)
		p("by its own run's end only).")
		p("")
	}
	if c := r.cold; c != nil {
		p("Cold start: the socket-activated daemon answers its first connection in %s ms (p50) and says ok (200) after", ms(c.firstAnswer.p50()))
		p("%s ms: liveness is the engine's `GET /_ping` (%s ms on Podman), while `Engine.Info` (%s ms) is asked", ms(c.firstOK.p50()), ms(r.pingP50("podman")), ms(r.infoP50("podman")))
		p("in the background (health says limits \"pending\" until it returns after %s ms, and turns start once it has).", ms(c.detailed.p50()))
		p("")
	}
}

// daemonCPU is the daemon's CPU per turn on podman one turn at a time (section 1) and in the
// throughput run (section 2); zero when either is missing.
func (r *report) daemonCPU() (seq, tp time.Duration) {
	if r.latency != nil {
		for _, m := range r.latency.methods {
			if m.daemon != nil && !m.candidate && m.engine == "podman" && len(m.runs) > 0 {
				seq = m.cpu / time.Duration(len(m.runs))
			}
		}
	}
	if len(r.throughput) > 0 && r.throughput[0].turns > 0 {
		tp = r.throughput[0].daemonCPU / time.Duration(r.throughput[0].turns)
	}
	return seq, tp
}

func (r *report) infoP50(engine string) time.Duration {
	for _, res := range r.phases {
		if res.engine == engine {
			return res.info.p50()
		}
	}
	return 0
}

func (r *report) pingP50(engine string) time.Duration {
	for _, res := range r.phases {
		if res.engine == engine {
			return res.ping.p50()
		}
	}
	return 0
}

// daemonOverhead is the p50 of what the daemon spends around the engine calls: submit to the
// runner's start, the runner's start to created less Engine.Create at the API, and the
// runner's end to the client holding the result.
func (r *report) daemonOverhead(method string) time.Duration {
	if r.latency == nil {
		return 0
	}
	rows := r.latency.breakdown[method]
	if len(rows) < 6 {
		return 0
	}
	return rows[0].p50 + max(0, rows[1].p50-r.phaseP50("podman", inTurn, phCreate)) + rows[5].p50
}

func versionOf(engines []string, name string) string {
	for _, e := range engines {
		if n, rest, _ := strings.Cut(e, " "); n == name {
			v, _, _ := strings.Cut(rest, " ")
			return v
		}
	}
	return ""
}
