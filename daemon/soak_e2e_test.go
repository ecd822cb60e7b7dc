package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
)

// TestSoak500 runs 500 turns over 20 folders through the daemon at the default concurrency
// and checks that none fails and nothing leaks: no container of the instance, no socket or
// file left in the IPC directories, and the daemon's open files and threads back where they
// were after a first warm-up round.
func TestSoak500(t *testing.T) {
	enginetest.Long(t, "the 500-turn soak")
	e := daemontest.Podman4(t)
	d := daemontest.New(t, daemontest.Config{Engine: e})
	d.Start(t)
	const folders, turns = 20, 500
	for i := range folders {
		d.AddGroup(t, fmt.Sprintf("soak%02d", i))
	}
	round := func(n int) (failed []string) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		ids := make(chan string, n)
		for i := range n {
			ids <- d.Submit(t, fmt.Sprintf("soak%02d", i%folders), "noop").ID
		}
		close(ids)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range ids {
					if r := d.Wait(t, id, 5*time.Minute); r.Status != "ok" {
						mu.Lock()
						failed = append(failed, fmt.Sprintf("%s: %s %s %s", id, r.State, r.Failure, r.Error))
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		return failed
	}
	if failed := round(folders); len(failed) > 0 {
		t.Fatalf("warm-up: %d failed: %v", len(failed), failed)
	}
	if err := d.Drain(time.Minute); err != nil {
		t.Fatal(err)
	}
	fds0, sockets0, threads0 := procCounts(t, d.Pid())
	t0 := time.Now()
	failed := round(turns)
	took := time.Since(t0)
	if err := d.Drain(time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d turns failed: %v", len(failed), turns, failed[:min(5, len(failed))])
	}
	if left := d.SettledLeftovers(t); len(left) > 0 {
		t.Errorf("%d containers left behind", len(left))
	}
	var stray []string
	filepath.WalkDir(filepath.Join(d.DataDir, "ipc"), func(p string, de os.DirEntry, err error) error {
		if err == nil && !de.IsDir() {
			stray = append(stray, p)
		}
		return nil
	})
	if len(stray) > 0 {
		t.Errorf("files left in the IPC directories: %v", stray[:min(5, len(stray))])
	}
	// Let idle HTTP connections and SQLite's pool settle before counting.
	time.Sleep(2 * time.Second)
	fds1, sockets1, threads1 := procCounts(t, d.Pid())
	t.Logf("%d turns over %d folders in %s (%.1f turns/s), %d failed; daemon fds %d -> %d (sockets %d -> %d), threads %d -> %d",
		turns, folders, took.Round(time.Millisecond), float64(turns)/took.Seconds(), len(failed), fds0, fds1, sockets0, sockets1, threads0, threads1)
	// Sockets are where a per-turn leak would show (engine connections, MCP servers);
	// other files are bounded by the store's pool (16 connections, two files each).
	if sockets1 > sockets0+8 {
		t.Errorf("sockets grew from %d to %d over %d turns", sockets0, sockets1, turns)
	}
	if fds1 > 128 {
		t.Errorf("the daemon holds %d open files after %d turns", fds1, turns)
	}
	if threads1 > threads0+8 {
		t.Errorf("threads grew from %d to %d over %d turns", threads0, threads1, turns)
	}
}

// procCounts is a process's open file descriptors, how many of them are sockets, and its
// threads.
func procCounts(t *testing.T, pid int) (fds, sockets, threads int) {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); strings.HasPrefix(l, "socket:") {
			sockets++
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return len(ents), sockets, threads
}
