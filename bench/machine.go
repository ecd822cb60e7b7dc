package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"
)

// machine describes where the figures were taken.
type machine struct {
	cpus      int
	cpuModel  string
	memory    string
	kernel    string
	distro    string
	goVersion string
	arizukod  string
	commit    string
	engines   []string
	loadStart string
	loadAfter string
}

func describeMachine(ctx context.Context, o options) machine {
	m := machine{cpus: goruntime.NumCPU(), goVersion: goruntime.Version(), loadStart: loadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpuModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
						m.memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
					}
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.distro = strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/etc/debian_version"); err == nil {
		m.distro += " (" + strings.TrimSpace(string(b)) + ")"
	}
	if out, err := exec.CommandContext(ctx, o.arizukod, "version").Output(); err == nil {
		m.arizukod = strings.TrimSpace(string(out))
	}
	cmd := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty")
	cmd.Dir = o.repo
	if out, err := cmd.Output(); err == nil {
		m.commit = strings.TrimSpace(string(out))
	}
	return m
}

// loadAverage is the 1, 5 and 15 minute load average.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
