package main

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/arizuko/arizukod/contract"
)

// threadsChild, in a child's environment, makes it holdThreads instead of taking a turn.
const threadsChild = "ARIZUKO_AGENT_HOLD_THREADS"

// threads runs a child that holds one more thread until the kernel refuses to make one,
// and answers how many it had then: the pids limit as the container lives it, whatever
// cgroup carries it (Kubernetes puts it on the Pod's, which the container cannot see).
func threads(contract.Input, string) contract.Output {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Env = []string{threadsChild + "=1"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	m := regexp.MustCompile(`failed to create new OS thread \(have (\d+) already; errno=(\d+)\)`).FindSubmatch(stderr.Bytes())
	if m == nil {
		return fail("threads: the child ended without the kernel refusing a thread: %v: %.300s", err, stderr.String())
	}
	n, _ := strconv.Atoi(string(m[1]))
	errno, _ := strconv.Atoi(string(m[2]))
	return report(map[string]any{"threads": n, "errno": errno})
}

// holdThreads blocks one thread after another in pause(2) until the runtime cannot make
// another: it then dies saying how many it had.
func holdThreads() {
	debug.SetMaxThreads(1 << 20)
	for {
		go syscall.Syscall(syscall.SYS_PAUSE, 0, 0, 0)
		time.Sleep(100 * time.Microsecond)
	}
}
