package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/runtime/engine"
)

// throughputRow is one way to run many turns at once.
type throughputRow struct {
	name      string
	about     string
	turns     int
	took      time.Duration
	failures  int
	leftovers int
	prepared  int // containers created ahead and never started: not leftovers
	daemon    bool
	// leftoverWait is how long after the last result the engine held none of its containers.
	leftoverWait time.Duration
	daemonCPU    time.Duration
	engineCPU    time.Duration
	firstErr     string
}

const throughputConcurrency = 5

func (b *bench) daemonNamed(name string) *daemonProc {
	for _, d := range b.daemons {
		if d.name == name {
			return d
		}
	}
	return nil
}

func (b *bench) throughput(ctx context.Context) error {
	d := b.daemonNamed("arizukod-podman")
	if d == nil {
		var err error
		if d, err = b.startDaemon(ctx, "arizukod-podman", "podman", b.o.podmanSocket, b.o.arizukod); err != nil {
			return err
		}
	}
	enginePID := b.podmanServicePID()
	// The reference row (-throughput-folders) first, then the sweep over the number of
	// folders: how the daemon's cost grows with the work it keeps apart.
	counts := []int{b.o.tpFolders}
	for _, n := range b.o.sweep {
		if n != b.o.tpFolders {
			counts = append(counts, n)
		}
	}
	var rows []throughputRow
	for _, n := range counts {
		row, err := b.daemonThroughput(ctx, d, n, enginePID)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}

	stdin, err := contract.EncodeInput(contract.Input{Messages: []contract.Message{{Role: "user", Content: "noop"}}, Folder: "tp"})
	if err != nil {
		return err
	}
	for _, m := range []cliMethod{podmanLocal(b.o.testhostDir), podmanRemote(b.o.podmanSocket)} {
		b.say("throughput: %d turns through the %s, %d at a time", b.o.tpTurns, m.name, throughputConcurrency)
		rows = append(rows, b.cliThroughput(ctx, m, stdin, enginePID))
	}
	b.report.throughput = rows
	return nil
}

// cliThroughput runs the bench's turn count through a command line, a fixed number at a
// time, as a gateway with a worker pool would.
func (b *bench) cliThroughput(ctx context.Context, m cliMethod, stdin []byte, enginePID int) throughputRow {
	row := throughputRow{name: m.name, turns: b.o.tpTurns, about: fmt.Sprintf("%d workers, each `run --rm -i` in turn", throughputConcurrency)}
	jobs := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	e0, _ := cpuTime(enginePID)
	t0 := time.Now()
	for w := 0; w < throughputConcurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if _, err := m.run(ctx, b.o.image, stdin); err != nil {
					mu.Lock()
					row.failures++
					if row.firstErr == "" {
						row.firstErr = err.Error()
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < b.o.tpTurns; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	row.took = time.Since(t0)
	e1, _ := cpuTime(enginePID)
	row.engineCPU = e1 - e0
	return row
}

// leftovers counts the containers of instance on eng that ever ran, waiting up to 10 s for
// them to go, and the containers that never started (prepared ahead for a next turn, if the
// daemon does that), which are not leftovers.
func (b *bench) leftovers(ctx context.Context, eng engine.Engine, instance string, since time.Time) (left, prepared int, wait time.Duration) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := eng.List(ctx, map[string]string{engine.LabelInstance: instance})
		if err != nil {
			b.say("leftovers: %v", err)
			return -1, 0, 0
		}
		left, prepared = 0, 0
		for _, c := range list {
			st, err := eng.Inspect(ctx, c.ID)
			switch {
			case err != nil:
			case st.StartedAt.IsZero() && (st.Status == "created" || st.Status == "initialized" || st.Status == "configured"):
				prepared++
			default:
				left++
			}
		}
		if left == 0 || time.Now().After(deadline) {
			return left, prepared, time.Since(since)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// podmanServicePID is the pid of the test host's Podman 4 service, from its pidfile; 0 when
// unknown (its CPU is then not reported).
func (b *bench) podmanServicePID() int {
	data, err := os.ReadFile(filepath.Join(b.o.testhostDir, "pids", "podman4.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0]))
	if err != nil {
		return 0
	}
	return pid
}

// daemonThroughput submits the throughput turns at once over n folders of d and waits for
// every result, each with its own long poll.
func (b *bench) daemonThroughput(ctx context.Context, d *daemonProc, n, enginePID int) (throughputRow, error) {
	folders := make([]string, n)
	for i := range folders {
		folders[i] = fmt.Sprintf("tp%03d", i+1)
	}
	if err := d.addGroups(ctx, folders...); err != nil {
		return throughputRow{}, err
	}
	b.say("throughput: %d turns over %d folders through arizukod on podman (max_running default 5)", b.o.tpTurns, n)
	e0, _ := cpuTime(enginePID)
	c0, _ := cpuTime(d.cmd.Process.Pid)
	of := fmt.Sprintf("%d folders", n)
	if n == 1 {
		of = "1 folder"
	}
	row := throughputRow{name: "arizukod on podman, " + of, daemon: true, turns: b.o.tpTurns,
		about: fmt.Sprintf("%d runs submitted at once over %s, default max_running", b.o.tpTurns, of)}
	t0 := time.Now()
	ids := make([]string, 0, b.o.tpTurns)
	for i := 0; i < b.o.tpTurns; i++ {
		run, err := d.client.CreateRun(ctx, apiRun(folders[i%n], "noop"))
		if err != nil {
			return row, fmt.Errorf("throughput: submit: %w", err)
		}
		ids = append(ids, run.ID)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	last := t0
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := d.client.WaitRun(ctx, id)
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if now.After(last) {
				last = now
			}
			if err == nil {
				err = runOK(r)
			}
			if err != nil {
				row.failures++
				if row.firstErr == "" {
					row.firstErr = err.Error()
				}
			}
		}()
	}
	wg.Wait()
	row.took = last.Sub(t0)
	c1, _ := cpuTime(d.cmd.Process.Pid)
	e1, _ := cpuTime(enginePID)
	row.daemonCPU, row.engineCPU = c1-c0, e1-e0
	row.leftovers, row.prepared, row.leftoverWait = b.leftovers(ctx, b.podman, d.instance, last)
	b.say("throughput: arizukod %d turns over %d folders in %s, %d failures, %d leftovers", row.turns, n, row.took.Round(time.Millisecond), row.failures, row.leftovers)
	return row, nil
}
