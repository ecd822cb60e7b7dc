package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
)

// daemonProc is an arizukod serve the bench started, with its own data dir and socket.
type daemonProc struct {
	name     string
	dir      string
	config   string
	socket   string
	dataDir  string
	instance string
	cmd      *exec.Cmd
	client   *apiwire.Client
	// exited is closed once the process has ended (and was reaped).
	exited chan struct{}
}

// daemonConfig writes the configuration of a bench daemon in dir and returns its path.
// Everything not named keeps the daemon's default (max_running 5 in particular).
func daemonConfig(dir, name, engine, socket, image, skills, instance, extra string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(`# arizukod configuration written by bench/ for %s
data_dir = %q
image = %q
engine = %q
engine_socket = %q
listen = %q
skills_dir = %q
env_file = ""
allowlist = %q
instance = %q
run_timeout = "5m"
%s`, name, filepath.Join(dir, "data"), image, engine, socket, filepath.Join(dir, "arizukod.sock"), skills,
		filepath.Join(dir, "mount-allowlist.json"), instance, extra)
	path := filepath.Join(dir, "arizukod.toml")
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

// daemonEnv is the environment of a bench daemon: the bench's own, without anything that
// would make it talk to a service manager or take a socket it was not meant to.
func daemonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
			"DATA_DIR", "CONTAINER_IMAGE", "RUNED_RUN_TIMEOUT", "LISTEN_ADDR", "CONTAINER_HOST", "DOCKER_HOST":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "ARIZUKO_MODE=system")
}

// startDaemon starts binary (an arizukod) serve on engine and waits until its health says the engine
// answers.
func (b *bench) startDaemon(ctx context.Context, name, engine, socket, binary string) (*daemonProc, error) {
	return b.startDaemonIn(ctx, filepath.Join(b.o.work, name), b.o.skillsDir, name, engine, socket, binary, b.o.image, "", nil)
}

// runAs is the user a daemon of rootless Podman runs as, with the limits it cannot apply
// allowed (allow_unlimited) when its engine says so.
type runAs struct {
	uid, gid       int
	home, runtime  string
	allowUnlimited bool
}

// startDaemonIn is startDaemon with its directory and skills directory given, for an
// engine that sees only some of the host's paths, with its image and extra lines of
// configuration, and as another user when as is set. When the daemon does not become
// healthy the error comes with the daemon, whose log and exit say why.
func (b *bench) startDaemonIn(ctx context.Context, dir, skills, name, engine, socket, binary, image, extra string, as *runAs) (*daemonProc, error) {
	instance := fmt.Sprintf("bench%d-%s", os.Getpid(), name)
	cfg, err := daemonConfig(dir, name, engine, socket, image, skills, instance, extra)
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	d := &daemonProc{name: name, dir: dir, config: cfg, socket: filepath.Join(dir, "arizukod.sock"),
		dataDir: filepath.Join(dir, "data"), instance: instance, exited: make(chan struct{})}
	d.cmd = exec.Command(binary, "serve", "--config", cfg)
	d.cmd.Env = daemonEnv()
	if as != nil {
		if err := as.own(dir, cfg); err != nil {
			return nil, err
		}
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(as.uid), Gid: uint32(as.gid)}}
		d.cmd.Env = append(d.cmd.Env, "HOME="+as.home, "XDG_RUNTIME_DIR="+as.runtime)
	}
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start arizukod: %w", err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	b.daemons = append(b.daemons, d)
	d.client = apiwire.NewClient(d.socket)
	if err := d.waitHealthy(ctx, 60*time.Second); err != nil {
		return d, fmt.Errorf("arizukod %s (log %s): %w", name, filepath.Join(dir, "daemon.log"), err)
	}
	return d, nil
}

func (d *daemonProc) waitHealthy(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		var h apiwire.HealthReport
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := d.client.Do(cctx, "GET", "/health", nil, &h)
		cancel()
		if err == nil && h.Status == "ok" {
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("health %s: %s", h.Status, h.Engine.Error)
		}
		select {
		case <-d.exited:
			return errors.New("the daemon exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("not healthy after %s: %v", limit, last)
}

// stop ends the daemon with SIGTERM (it detaches from nothing: the bench waits for every
// run first) and reaps it.
func (d *daemonProc) stop() {
	if d.cmd == nil || d.cmd.Process == nil || d.hasExited() {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
	}
}

func (d *daemonProc) hasExited() bool {
	select {
	case <-d.exited:
		return true
	default:
		return false
	}
}

// logText is what the daemon wrote to its log.
func (d *daemonProc) logText() string {
	b, _ := os.ReadFile(filepath.Join(d.dir, "daemon.log"))
	return string(b)
}

// addGroups registers folders with the daemon.
func (d *daemonProc) addGroups(ctx context.Context, folders ...string) error {
	for _, f := range folders {
		if err := d.client.Do(ctx, "POST", "/v1/groups", apiwire.PutGroupRequest{Folder: f, Name: f}, nil); err != nil {
			return fmt.Errorf("register group %s: %w", f, err)
		}
	}
	return nil
}

// turnResult is one turn through the API.
type turnResult struct {
	run       apiwire.Run
	submitted time.Time
	done      time.Time
}

// turn submits one run and waits for its end.
func (d *daemonProc) turn(ctx context.Context, folder, message string) (turnResult, error) {
	tr := turnResult{submitted: time.Now()}
	run, err := d.client.CreateRun(ctx, apiwire.CreateRunRequest{Folder: folder, Messages: []contract.Message{{Role: "user", Content: message}}})
	if err != nil {
		return tr, err
	}
	tr.run, err = d.client.WaitRun(ctx, run.ID)
	tr.done = time.Now()
	if err != nil {
		return tr, err
	}
	if err := runOK(tr.run); err != nil {
		return tr, err
	}
	return tr, nil
}

func runOK(r apiwire.Run) error {
	if r.State != "exited" || r.Status != "ok" {
		return fmt.Errorf("run %s in %s ended %s/%s: %s %s", r.ID, r.Folder, r.State, r.Status, r.Failure, r.Error)
	}
	return nil
}

// rss is the daemon's VmRSS in KiB.
func (d *daemonProc) rss() (int64, error) { return procStatusKB(d.cmd.Process.Pid, "VmRSS") }

// procStatusKB is a "Field: N kB" line of /proc/PID/status.
func procStatusKB(pid int, field string) (int64, error) {
	return procKB(fmt.Sprintf("/proc/%d/status", pid), field)
}

// procKB is the figure of the "Field: N kB" line of a /proc file such as status or
// smaps_rollup.
func procKB(path, field string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			v := strings.Fields(rest)
			if len(v) > 0 {
				return strconv.ParseInt(v[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, field)
}

// cpuTime is the user+system CPU time of a process, from /proc/PID/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	// Fields 14 and 15 of stat (utime, stime), in clock ticks of 1/100 s on Linux.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// runLog is what a runner's per-run log file says of one turn.
type runLog struct {
	started  time.Time
	duration time.Duration
	events   map[string]time.Duration // created, started, exited: offsets from started
}

// readRunLogs parses groups/<folder>/logs/container-*.log of the daemon, by run ID.
func (d *daemonProc) readRunLogs(folder string) (map[string]runLog, error) {
	files, err := filepath.Glob(filepath.Join(d.dataDir, "groups", folder, "logs", "container-*.log"))
	if err != nil {
		return nil, err
	}
	out := map[string]runLog{}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		id, rl := parseRunLog(string(b))
		if id != "" {
			out[id] = rl
		}
	}
	return out, nil
}

// parseRunLog reads the header (run, started, duration) and the events section of a
// runner log: lines "<offset> <event> ...".
func parseRunLog(text string) (string, runLog) {
	rl := runLog{events: map[string]time.Duration{}}
	var id string
	inEvents := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "-- events --"):
			inEvents = true
			continue
		case strings.HasPrefix(line, "-- "):
			inEvents = false
			continue
		}
		if inEvents {
			off, rest, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			d, err := time.ParseDuration(off)
			if err != nil {
				continue
			}
			ev, _, _ := strings.Cut(rest, " ")
			if _, seen := rl.events[ev]; !seen {
				rl.events[ev] = d
			}
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch k {
		case "run":
			id = v
		case "started":
			rl.started, _ = time.Parse(time.RFC3339Nano, v)
		case "duration":
			rl.duration, _ = time.ParseDuration(v)
		}
	}
	return id, rl
}

// own hands dir to the user, with the limits line in its configuration when needed.
func (as *runAs) own(dir, cfg string) error {
	if as.allowUnlimited {
		f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString("\n[limits]\nallow_unlimited = true\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, as.uid, as.gid)
	})
}
