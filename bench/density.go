package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/runtime/engine"
)

// densityLevel is one step of the density measurement: n turns submitted at once, each
// in its own folder, each model request held by the upstream.
type densityLevel struct {
	n      int
	held   int // the most model requests held at once: turns in flight
	queued int // the runs that waited in the queue more than queuedAfter
	// queueWait is each run's wait in the queue (its phases' queueWaitMs).
	queueWait sample
	failures  int
	firstErr  string
	took      time.Duration // the first submit to the last result
	// first is submit -> the turn's model request at the upstream; whole submit -> result.
	first, whole sample
	// Memory, from the sample taken when the most requests were held: per running
	// container, the PSS of all the processes of its cgroup, of Claude Code alone, and
	// the cgroup's own count (memory.usage_in_bytes, page cache included); KiB.
	containers        int
	pssPer, claudePer int64
	cgroupPer         int64
	pidsPer           int
	daemonRSS         int64 // KiB, the largest seen during the level
	memAvailMin       int64 // KiB, the least MemAvailable seen during the level
	cpuBusy           float64
	load              string // the load average at the level's start
	// cpuPer is the CPU time of a turn's container (its cgroup's cpuacct.usage, sampled
	// every tick until it ends), the mean over the containers seen.
	cpuPer time.Duration
}

// queuedAfter is the wait in the queue past which a run counts as queued behind the cap
// rather than just picked up.
const queuedAfter = time.Second

// densityResult is the density table.
type densityResult struct {
	levels   []*densityLevel
	cap      int
	hold     time.Duration
	took     time.Duration
	stopped  string // why the levels stopped rising
	gave     string // the first level that could not hold all its turns below the cap at once
	memTotal int64  // KiB
	pidsMax  string
	memLimit string
}

// density runs rising numbers of concurrent Claude Code turns through one daemon whose
// max_running is o.densityCap, the upstream holding each turn's model request for
// o.densityHold, until a level fails a turn or runs short of memory, or after the first
// level above the cap (which shows the queue), or when the levels end. The first level
// that cannot hold all its turns below the cap at once is noted: that is the CPU giving.
func (b *bench) density(ctx context.Context) error {
	k, err := b.claudeKit(ctx)
	if err != nil {
		return err
	}
	levels := b.o.densityLevels
	maxN := 0
	for _, n := range levels {
		maxN = max(maxN, n)
	}
	folders := make([]string, maxN)
	for i := range folders {
		folders[i] = fmt.Sprintf("d%03d", i+1)
	}
	d, err := b.claudeDaemon(ctx, k, "claude-density", fmt.Sprintf("max_running = %d\nprepared = 0\n", b.o.densityCap), folders...)
	if err != nil {
		return err
	}
	raw, err := newRawAPI(b.o.podmanSocket)
	if err != nil {
		return err
	}
	res := &densityResult{cap: b.o.densityCap, hold: b.o.densityHold, memTotal: meminfoKB("MemTotal")}
	t0 := time.Now()
	b.say("density: levels %v, max_running %d, each model request held %s", levels, b.o.densityCap, b.o.densityHold)
	for _, n := range levels {
		lv, err := b.densityLevel(ctx, k, d, raw, folders[:n], res)
		if err != nil {
			return err
		}
		res.levels = append(res.levels, lv)
		b.say("density: %d turns: %d held at once, %d queued, %d failed, %.0f MiB PSS per container, daemon %.1f MiB, %s",
			n, lv.held, lv.queued, lv.failures, float64(lv.pssPer)/1024, float64(lv.daemonRSS)/1024, lv.took.Round(time.Second))
		if want := min(n, b.o.densityCap); lv.held < want && res.gave == "" {
			res.gave = fmt.Sprintf("at %d turns only %d of the %d below the cap had their model request in flight at once", n, lv.held, want)
		}
		switch {
		case lv.failures > 0:
			res.stopped = fmt.Sprintf("%d of %d turns failed", lv.failures, n)
		case lv.memAvailMin > 0 && lv.memAvailMin < res.memTotal/10:
			res.stopped = fmt.Sprintf("MemAvailable fell to %.1f GiB", float64(lv.memAvailMin)/(1<<20))
		case n > b.o.densityCap:
			res.stopped = fmt.Sprintf("%d turns are more than the cap: higher levels only queue more", n)
		}
		if res.stopped != "" {
			break
		}
	}
	if res.stopped == "" {
		res.stopped = "the levels ended (-density-levels)"
	}
	res.took = time.Since(t0)
	d.stop()
	b.report.density = res
	return nil
}

func (b *bench) densityLevel(ctx context.Context, k *claudeKit, d *daemonProc, raw *rawAPI, folders []string, res *densityResult) (*densityLevel, error) {
	lv := &densityLevel{n: len(folders), memAvailMin: meminfoKB("MemAvailable"), load: loadAverage()}
	cpu := &containerCPU{dirs: map[string]string{}, used: map[string]time.Duration{}}
	k.up.reset()
	type outcome struct {
		msg         string
		start, done time.Time
		wait        time.Duration
		err         error
	}
	outs := make([]outcome, len(folders))
	var wg sync.WaitGroup
	start := time.Now()
	for i, f := range folders {
		outs[i].msg = fmt.Sprintf("%s %s of %d", msgHold, f, len(folders))
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outs[i]
			o.start = time.Now()
			run, err := d.client.CreateRun(ctx, apiwire.CreateRunRequest{Folder: f, Messages: []contract.Message{{Role: "user", Content: o.msg}}})
			if err == nil {
				var r apiwire.Run
				r, err = d.client.WaitRun(ctx, run.ID)
				if err == nil {
					err = runOK(r)
				}
				if r.Phases != nil {
					o.wait = time.Duration(r.Phases.QueueWaitMs) * time.Millisecond
				}
			}
			o.done, o.err = time.Now(), err
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	cpu0 := cpuStat()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	bestHeld := -1
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		if rss, err := d.rss(); err == nil {
			lv.daemonRSS = max(lv.daemonRSS, rss)
		}
		if m := meminfoKB("MemAvailable"); m > 0 {
			lv.memAvailMin = min(lv.memAvailMin, m)
		}
		if running {
			cpu.sample(ctx, b, d, raw)
		}
		if held := int(k.up.held.Load()); held > bestHeld && running {
			bestHeld = held
			b.sampleContainers(ctx, d, raw, lv, res)
		}
	}
	if len(cpu.used) > 0 {
		var sum time.Duration
		for _, u := range cpu.used {
			sum += u
		}
		lv.cpuPer = sum / time.Duration(len(cpu.used))
	}
	lv.took = time.Since(start)
	lv.cpuBusy = cpuBusySince(cpu0)
	lv.held = int(k.up.maxHeld.Load())
	for _, o := range outs {
		lv.queueWait = append(lv.queueWait, o.wait)
		if o.wait > queuedAfter {
			lv.queued++
		}
		if o.err != nil {
			lv.failures++
			if lv.firstErr == "" {
				lv.firstErr = o.err.Error()
			}
			continue
		}
		lv.whole = append(lv.whole, o.done.Sub(o.start))
		if at, ok := k.up.arrivedAt(o.msg); ok {
			lv.first = append(lv.first, at.Sub(o.start))
		}
	}
	return lv, nil
}

// sampleContainers reads the memory of the daemon's running containers into lv: the PSS of
// every process in each container's cgroup, of Claude Code among them, and the cgroup's
// own usage and pids, as means per container.
func (b *bench) sampleContainers(ctx context.Context, d *daemonProc, raw *rawAPI, lv *densityLevel, res *densityResult) {
	list, err := b.podman.List(ctx, map[string]string{engine.LabelInstance: d.instance})
	if err != nil {
		return
	}
	var n int
	var pss, claude, cg int64
	var pids int
	for _, c := range list {
		if !c.Running || c.Labels[engine.LabelRole] != "agent" {
			continue
		}
		_, pid, err := raw.podmanPids(ctx, c.ID)
		if err != nil || pid == 0 {
			continue
		}
		dir, ok := cgroupOf(pid, "memory")
		if !ok {
			continue
		}
		procs := cgroupProcs(dir)
		if len(procs) == 0 {
			continue
		}
		n++
		pids += len(procs)
		for _, p := range procs {
			kb, err := pssKB(p)
			if err != nil {
				continue
			}
			pss += kb
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); strings.TrimSpace(string(comm)) == "claude" {
				claude += kb
			}
		}
		if v, err := readInt(filepath.Join(dir, "memory.usage_in_bytes")); err == nil {
			cg += v / 1024
		}
		if res.memLimit == "" {
			if v, err := readInt(filepath.Join(dir, "memory.limit_in_bytes")); err == nil {
				res.memLimit = fmt.Sprintf("%d MiB", v>>20)
			}
			if pd, ok := cgroupOf(pid, "pids"); ok {
				if s, err := os.ReadFile(filepath.Join(pd, "pids.max")); err == nil {
					res.pidsMax = strings.TrimSpace(string(s))
				}
			}
		}
	}
	if n == 0 {
		return
	}
	lv.containers = n
	lv.pssPer, lv.claudePer, lv.cgroupPer, lv.pidsPer = pss/int64(n), claude/int64(n), cg/int64(n), pids/n
}

// containerCPU follows the CPU time of the daemon's agent containers: each one's cpuacct
// cgroup, found once, read at every sample while it exists.
type containerCPU struct {
	dirs map[string]string        // container ID -> its cpuacct cgroup
	used map[string]time.Duration // container ID -> the most CPU time read
}

func (c *containerCPU) sample(ctx context.Context, b *bench, d *daemonProc, raw *rawAPI) {
	list, err := b.podman.List(ctx, map[string]string{engine.LabelInstance: d.instance})
	if err != nil {
		return
	}
	for _, ct := range list {
		if _, ok := c.dirs[ct.ID]; ok || !ct.Running || ct.Labels[engine.LabelRole] != "agent" {
			continue
		}
		if _, pid, err := raw.podmanPids(ctx, ct.ID); err == nil && pid != 0 {
			if dir, ok := cgroupOf(pid, "cpuacct"); ok {
				c.dirs[ct.ID] = dir
			}
		}
	}
	for id, dir := range c.dirs {
		if ns, err := readInt(filepath.Join(dir, "cpuacct.usage")); err == nil {
			c.used[id] = max(c.used[id], time.Duration(ns))
		}
	}
}

// cgroupOf is the directory of pid's cgroup of the v1 controller (or of the v2 unified
// hierarchy when there is no such controller).
func cgroupOf(pid int, controller string) (string, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", false
	}
	defer f.Close()
	var unified string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" && parts[0] == "0" {
			unified = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				dir := filepath.Join("/sys/fs/cgroup", parts[1], parts[2])
				if _, err := os.Stat(dir); err == nil {
					return dir, true
				}
			}
		}
	}
	if unified != "" {
		for _, base := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
			dir := filepath.Join(base, unified)
			if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
				return dir, true
			}
		}
	}
	return "", false
}

// cgroupProcs are the processes of the cgroup in dir and of the cgroups below it.
func cgroupProcs(dir string) []int {
	var out []int
	filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
		return nil
	})
	return out
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// meminfoKB is a field of /proc/meminfo in KiB, or 0.
func meminfoKB(field string) int64 {
	kb, _ := procKB("/proc/meminfo", field)
	return kb
}

// cpuTimes are the busy and total jiffies of the host's CPUs.
type cpuTimes struct{ busy, total int64 }

func cpuStat() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var t cpuTimes
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		t.total += n
		if i != 3 && i != 4 { // idle, iowait
			t.busy += n
		}
	}
	return t
}

// cpuBusySince is the share of the host's CPU time that was busy since c0, in percent.
func cpuBusySince(c0 cpuTimes) float64 {
	c1 := cpuStat()
	if c1.total <= c0.total {
		return 0
	}
	return 100 * float64(c1.busy-c0.busy) / float64(c1.total-c0.total)
}

func (r *report) densitySection(p printer) {
	d := r.density
	p("## Density: concurrent Claude Code turns on one host")
	p("")
	p("One arizukod on Podman 4 with `max_running = %d` and `prepared = 0`, the bench's Claude image, the scripted upstream", d.cap)
	p("behind the model gateway. Each level submits its turns at once, one per folder (fresh folders, a new session")
	p("each), every turn's model request held %s by the upstream before it answers. The levels rise until a turn fails or", d.hold)
	p("MemAvailable falls under a tenth of the memory, and end with the first level above the cap; they stopped because")
	p("%s. The whole table took %s.", d.stopped, d.took.Round(time.Second))
	p("")
	p("| turns submitted | held at once | queued > 1 s (longest wait s) | failed | first model request p50 / p90 s | turn p50 / p90 s | containers sampled | PSS per container MiB | of which Claude Code MiB | cgroup usage per container MiB | processes per container | CPU s per turn | daemon VmRSS max MiB | MemAvailable min GiB | host CPU busy %% | load average at start |")
	p("|---:|---:|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, l := range d.levels {
		p("| %d | %d | %d (%.1f) | %d | %.1f / %.1f | %.1f / %.1f | %d | %.0f | %.0f | %.0f | %d | %.2f | %.1f | %.1f | %.0f | %s |", l.n, l.held, l.queued, l.queueWait.pct(100).Seconds(), l.failures,
			l.first.p50().Seconds(), l.first.pct(90).Seconds(), l.whole.p50().Seconds(), l.whole.pct(90).Seconds(),
			l.containers, float64(l.pssPer)/1024, float64(l.claudePer)/1024, float64(l.cgroupPer)/1024, l.pidsPer, l.cpuPer.Seconds(),
			float64(l.daemonRSS)/1024, float64(l.memAvailMin)/(1<<20), l.cpuBusy, l.load)
	}
	p("")
	for _, l := range d.levels {
		if l.firstErr != "" {
			p("- first failure at %d turns: `%s`", l.n, l.firstErr)
		}
	}
	p("Memory is sampled every 0.5 s and read when the most requests were held so far: the PSS (/proc/PID/smaps_rollup)")
	p("of every process in the container's memory cgroup (the runner, Claude Code, socat for MCP), Claude Code's alone, and the")
	p("cgroup's usage_in_bytes (page cache of the image's files included). Each container's limits: memory %s, pids %s, 2 CPUs.", orDash(d.memLimit), orDash(d.pidsMax))
	p("CPU s per turn is the container's cgroup cpuacct.usage, read every 0.5 s until it ends (the runner, Claude Code's start,")
	p("the MCP bridge; the last half second of a turn can be missed). Host memory %.1f GiB. A level's CPU busy share is the", float64(d.memTotal)/(1<<20))
	p("host's over the level, other jobs of the machine included (see the load average).")
	p("")
	p("%s", d.verdict(r.machine.cpus))
	p("")
}

// lastHeld is the last level that ran, or nil.
func (d *densityResult) lastHeld() *densityLevel {
	if len(d.levels) == 0 {
		return nil
	}
	return d.levels[len(d.levels)-1]
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// verdict says where the limit comes from.
func (d *densityResult) verdict(cpus int) string {
	if len(d.levels) == 0 {
		return "No level ran."
	}
	var fails int
	for _, l := range d.levels {
		fails += l.failures
	}
	last := d.levels[len(d.levels)-1]
	var s []string
	s = append(s, fmt.Sprintf("Failures over all levels: %d.", fails))
	if d.gave != "" {
		s = append(s, "The CPUs gave first: "+d.gave+" (their Claude Code processes were still starting when the first ones' holds ended).")
	} else {
		s = append(s, "Every level held all its turns below the cap at once.")
	}
	if last.n > d.cap && last.held <= d.cap && last.failures == 0 {
		s = append(s, fmt.Sprintf("Above the cap the daemon held %d turns at once and queued the rest (%d waited more than a second): the cap max_running = %d is the limit there.", last.held, last.queued, d.cap))
	}
	if last.pssPer > 0 {
		turns := d.memTotal / last.pssPer
		s = append(s, fmt.Sprintf("Memory: at %.0f MiB PSS per turn the host's %.1f GiB would hold about %d turns.", float64(last.pssPer)/1024, float64(d.memTotal)/(1<<20), turns))
	}
	if first, lastGood := d.levels[0], d.lastHeld(); first.cpuPer > 0 && lastGood != nil {
		s = append(s, fmt.Sprintf("CPU: a turn's container used %.2f CPU s (one turn alone), so %d CPUs start at most %.1f turns a second; "+
			"the first model request came %.1f s after the submit for one turn and %.1f s (p90 %.1f s) at %d turns, while the host's CPUs were %.0f%% busy.",
			first.cpuPer.Seconds(), cpus, float64(cpus)/first.cpuPer.Seconds(), first.first.p50().Seconds(),
			lastGood.first.p50().Seconds(), lastGood.first.pct(90).Seconds(), lastGood.n, lastGood.cpuBusy))
	}
	return strings.Join(s, " ")
}
