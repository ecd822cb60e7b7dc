package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Sandbox is what the agent can see of its own confinement. Tests compare it with what
// arizukod promised, so every field is read from the kernel, never from configuration.
type Sandbox struct {
	UID        int               `json:"uid"`
	GID        int               `json:"gid"`
	Caps       map[string]string `json:"caps"` // CapInh, CapPrm, CapEff, CapBnd, CapAmb from /proc/self/status
	NoNewPrivs string            `json:"noNewPrivs"`
	// NoNewPrivsPrctl is prctl(PR_GET_NO_NEW_PRIVS): gVisor's /proc/self/status has no
	// NoNewPrivs line, the syscall answers on every kernel.
	NoNewPrivsPrctl int `json:"noNewPrivsPrctl"`
	// Kernel is /proc/version: gVisor says "Linux version 4.4.0 #1 SMP Sun Jan 10 ...".
	Kernel string `json:"kernel"`
	// Dmesg are the first lines of the kernel's log as syslog(2) reads it, where the
	// agent may read it: gVisor's own ("Starting gVisor..."); none under runc, whose
	// kernel log needs CAP_SYSLOG.
	Dmesg []string `json:"dmesg,omitempty"`
	// MemTotal is /proc/meminfo's, in bytes: gVisor's kernel has as much memory as the
	// container's limit, and shows no cgroup files to read it from.
	MemTotal   int64           `json:"memTotal"`
	Seccomp    string          `json:"seccomp"`
	Writable   map[string]bool `json:"writable"` // path -> a file could be created there
	Interfaces []string        `json:"interfaces"`
	// Routes are the IPv4 routes of /proc/net/route, "DST/BITS via GW dev IF" (via only
	// with a gateway): a container of network none has no default route.
	Routes   []string          `json:"routes"`
	Cgroup   map[string]string `json:"cgroup"` // memory, pids, cpu limits as the kernel shows them
	Mounts   []Mount           `json:"mounts"`
	Rlimits  map[string]uint64 `json:"rlimits"` // soft limits
	Hostname string            `json:"hostname"`
}

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	Target string `json:"target"`
	Root   string `json:"root"`
	FSType string `json:"fstype"`
	RO     bool   `json:"ro"`
}

// probedPaths are checked for writability, with every /workspace/extra mount added.
var probedPaths = []string{"/", "/etc", "/usr", "/tmp", "/workspace", "/workspace/share", "/workspace/media", "/root", ipcDir, "/skills", "/workspace/env-dir"}

func inspectSandbox() Sandbox {
	s := Sandbox{
		UID:      os.Getuid(),
		GID:      os.Getgid(),
		Caps:     map[string]string{},
		Writable: map[string]bool{},
		Cgroup:   map[string]string{},
		Rlimits:  map[string]uint64{},
	}
	readStatus(&s)
	s.NoNewPrivsPrctl, _ = unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if b, err := os.ReadFile("/proc/version"); err == nil {
		s.Kernel = strings.TrimSpace(string(b))
	}
	s.Dmesg = readDmesg(3)
	s.MemTotal = memTotal()
	paths := append([]string{}, probedPaths...)
	if extras, err := os.ReadDir("/workspace/extra"); err == nil {
		for _, e := range extras {
			paths = append(paths, filepath.Join("/workspace/extra", e.Name()))
		}
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			s.Writable[p] = canWrite(p)
		}
	}
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			s.Interfaces = append(s.Interfaces, i.Name)
		}
	}
	s.Routes = readRoutes()
	readCgroup(s.Cgroup)
	s.Mounts = readMounts()
	for name, res := range map[string]int{"nofile": unix.RLIMIT_NOFILE, "nproc": unix.RLIMIT_NPROC} {
		var rl unix.Rlimit
		if unix.Getrlimit(res, &rl) == nil {
			s.Rlimits[name] = rl.Cur
		}
	}
	s.Hostname, _ = os.Hostname()
	return s
}

func readStatus(s *Sandbox) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		v = strings.TrimSpace(v)
		switch {
		case strings.HasPrefix(k, "Cap"):
			s.Caps[k] = v
		case k == "NoNewPrivs":
			s.NoNewPrivs = v
		case k == "Seccomp":
			s.Seccomp = v
		}
	}
}

// memTotal is MemTotal of /proc/meminfo in bytes, 0 when unknown.
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// readDmesg returns the first n lines of the kernel's log, nil when it cannot be read.
func readDmesg(n int) []string {
	buf := make([]byte, 16<<10)
	got, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err != nil || got <= 0 {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(buf[:got])), "\n")
	return lines[:min(n, len(lines))]
}

func canWrite(dir string) bool {
	f, err := os.CreateTemp(dir, ".arizuko-probe-*")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}

// readCgroup reads the limits of cgroup v2 or, failing that, v1 as mounted in the container.
func readCgroup(out map[string]string) {
	files := map[string][]string{
		"memory": {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
		"pids":   {"/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"},
		"cpu":    {"/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"},
	}
	for name, candidates := range files {
		for _, p := range candidates {
			if b, err := os.ReadFile(p); err == nil {
				out[name] = strings.TrimSpace(string(b))
				break
			}
		}
	}
}

// readRoutes reads the IPv4 routing table of /proc/net/route.
func readRoutes() []string {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil
	}
	routes := []string{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		dst, gw, mask := hexIP(f[1]), hexIP(f[2]), hexIP(f[7])
		ones, _ := net.IPMask(mask.To4()).Size()
		r := fmt.Sprintf("%s/%d", dst, ones)
		if !gw.Equal(net.IPv4zero) {
			r += " via " + gw.String()
		}
		routes = append(routes, r+" dev "+f[0])
	}
	return routes
}

// hexIP reads an address of /proc/net/route: 8 hex digits, in the host's (little-endian) order.
func hexIP(h string) net.IP {
	n, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return net.IPv4zero
	}
	return net.IPv4(byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
}

func readMounts() []Mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var mounts []Mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root target options [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 6 || len(tail) < 1 {
			continue
		}
		opts := strings.Split(fields[5], ",")
		mounts = append(mounts, Mount{Target: unescape(fields[4]), Root: unescape(fields[3]), FSType: tail[0], RO: opts[0] == "ro"})
	}
	return mounts
}

// unescape undoes mountinfo's octal escapes of space, tab, newline and backslash.
func unescape(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}
