package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/runtime/engine"
)

// memoryResult is the daemon's resident memory.
type memoryResult struct {
	idleFresh int64 // KiB, right after start, engine up, no turn run yet
	idleAfter int64 // KiB, idle after the latency and throughput runs
	// The anonymous part (heap, stacks, SQLite's cache) of idleFresh and idleAfter; the
	// rest is file-backed: the pages of the binary that were touched.
	freshAnon, afterAnon int64
	inFlight             int64 // KiB, the largest seen while 5 turns were running
	inFlightN            int   // turns seen running at once
	// floor and floorAnon are bench/depsfloor's: a program that only imports the modules
	// arizukod must use; 0 when it was not measured.
	floor, floorAnon int64
	// preparedConmon and preparedInit are what one prepared container costs while it
	// waits, in KiB of PSS: its conmon and its OCI runtime's init process; 0 when none
	// was found.
	preparedConmon, preparedInit int64
	// floorAPI and floorAPIAnon are the same with the Podman bindings' containers, images
	// and system packages and specgen, which runtime/podman does without.
	floorAPI, floorAPIAnon int64
}

// depsFloor runs bench/depsfloor and reads the VmRSS and RssAnon it reports (KiB).
func depsFloor(ctx context.Context, bin string) (rss, anon int64, err error) {
	out, err := exec.CommandContext(ctx, bin).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", bin, err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(l, " ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "RssAnon":
			anon = n
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("%s printed no VmRSS: %q", bin, out)
	}
	return rss, anon, nil
}

func apiRun(folder, message string) apiwire.CreateRunRequest {
	return apiwire.CreateRunRequest{Folder: folder, Messages: []contract.Message{{Role: "user", Content: message}}}
}

// memory reads VmRSS of a fresh daemon, of the bench's worked daemon when idle, and of the
// worked daemon with 5 `sleep 5s` turns in flight.
func (b *bench) memory(ctx context.Context) error {
	fresh, err := b.startDaemon(ctx, "arizukod-fresh", "podman", b.o.podmanSocket, b.o.arizukod)
	if err != nil {
		return err
	}
	var res memoryResult
	if res.idleFresh, err = fresh.rss(); err != nil {
		return err
	}
	if res.freshAnon, err = procStatusKB(fresh.cmd.Process.Pid, "RssAnon"); err != nil {
		return err
	}
	fresh.stop()
	d := b.daemonNamed("arizukod-podman")
	if d == nil {
		return fmt.Errorf("memory: no worked daemon")
	}
	if res.idleAfter, err = d.rss(); err != nil {
		return err
	}
	if res.afterAnon, err = procStatusKB(d.cmd.Process.Pid, "RssAnon"); err != nil {
		return err
	}
	if res.preparedConmon, res.preparedInit, err = b.preparedCost(ctx, d); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	folders := []string{"mem1", "mem2", "mem3", "mem4", "mem5"}
	if err := d.addGroups(ctx, folders...); err != nil {
		return err
	}
	b.say("memory: 5 turns of `sleep 5s` in flight")
	ids := make([]string, len(folders))
	for i, f := range folders {
		run, err := d.client.CreateRun(ctx, apiRun(f, "sleep 5s"))
		if err != nil {
			return err
		}
		ids[i] = run.ID
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := d.client.WaitRun(ctx, id)
			if err == nil {
				err = runOK(r)
			}
			errs[i] = err
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var list struct {
			Runs []apiwire.Run `json:"runs"`
		}
		if err := d.client.Do(ctx, "GET", "/v1/runs?state=running", nil, &list); err != nil {
			return err
		}
		n := 0
		for _, r := range list.Runs {
			if r.Container != "" {
				n++
			}
		}
		res.inFlightN = max(res.inFlightN, n)
		if n == len(folders) {
			if kb, err := d.rss(); err == nil {
				res.inFlight = max(res.inFlight, kb)
			}
		} else if res.inFlight > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("memory: %w", err)
		}
	}
	if b.o.depsFloor != "" {
		if res.floor, res.floorAnon, err = depsFloor(ctx, b.o.depsFloor); err != nil {
			return fmt.Errorf("memory: %w", err)
		}
	}
	if b.o.depsFloorAPI != "" {
		if res.floorAPI, res.floorAPIAnon, err = depsFloor(ctx, b.o.depsFloorAPI); err != nil {
			return fmt.Errorf("memory: %w", err)
		}
	}
	b.report.memory = &res
	return nil
}

// preparedCost finds a container d prepared ahead (its latency folder's next one) and reads
// the PSS of its conmon and of its init process.
func (b *bench) preparedCost(ctx context.Context, d *daemonProc) (conmon, init int64, err error) {
	raw, err := newRawAPI(b.o.podmanSocket)
	if err != nil {
		return 0, 0, err
	}
	list, err := b.podman.List(ctx, map[string]string{engine.LabelInstance: d.instance})
	if err != nil {
		return 0, 0, err
	}
	for _, c := range list {
		if c.Labels[engine.LabelPrepared] == "" || c.Running || c.State == "exited" {
			continue
		}
		cp, ip, err := raw.podmanPids(ctx, c.ID)
		if err != nil || cp == 0 || ip == 0 {
			continue
		}
		// A process gone meanwhile (the container dropped) leaves this one unmeasured.
		conmon, cerr := pssKB(cp)
		init, ierr := pssKB(ip)
		if cerr == nil && ierr == nil {
			return conmon, init, nil
		}
	}
	return 0, 0, nil
}

// pssKB is the proportional set size of pid: its own pages, and its share of those it
// shares with other processes (the binaries of the other conmons and runtimes).
func pssKB(pid int) (int64, error) {
	return procKB(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss")
}
