package daemontest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/detect"
	"github.com/arizuko/arizukod/runtime/engine"
)

// Podman is a private rootful Podman API service that one test starts, stops and starts
// again, over its own storage (the vfs driver, so that no overlay mount outlives it) and its
// own containers.conf: the test host's shared engines are never touched.
type Podman struct {
	Dir  string // root/, runroot/, tmp/, the configuration and the socket
	Sock string
	URI  string

	t      testing.TB
	netns  bool
	cmd    *exec.Cmd
	exited chan struct{}
	// cniDirs are the CNI cache directories (under /var/lib/cni) that did not exist before
	// the service ran: destroy removes them once empty.
	cniDirs []string
}

// StartPodman starts a private Podman service; cleanup stops it, removes its containers and
// storage.
func StartPodman(t testing.TB) *Podman {
	t.Helper()
	return startPodman(t, false, nil)
}

// StartIsolatedPodman starts a private Podman service in a network namespace of its own,
// with CNI bridge networks there: "podman" (what the bridge mode uses) and networks. A
// container on a bridge gets a veth into that namespace; the bridges, routes and
// addresses never appear in the host's namespace, and the address leases stay in the
// service's directory.
func StartIsolatedPodman(t testing.TB, networks ...string) *Podman {
	t.Helper()
	return startPodman(t, true, networks)
}

func startPodman(t testing.TB, netns bool, networks []string) *Podman {
	t.Helper()
	enginetest.Services(t, "a private Podman service")
	if _, err := exec.LookPath("podman"); err != nil {
		enginetest.Missing(t, "podman: %v", err)
	}
	// A short name: Podman refuses a runroot over 50 characters, and $TMPDIR may be long.
	dir, err := os.MkdirTemp("", "azp-")
	if err != nil {
		t.Fatal(err)
	}
	p := &Podman{Dir: dir, Sock: filepath.Join(dir, "podman.sock"), t: t, netns: netns}
	p.URI = "unix://" + p.Sock
	t.Cleanup(p.destroy)
	for _, sub := range []string{"root", "runroot", "tmp", "networks", "cni"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The same engine settings as the test host's podman4 (hack/testhost/up.sh): runc,
	// explicit ulimits the sandbox allows, cgroupfs, events in a file.
	conf := fmt.Sprintf(`[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = %q

[network]
network_config_dir = %q
`, filepath.Join(dir, "tmp"), filepath.Join(dir, "networks"))
	storage := fmt.Sprintf("[storage]\ndriver = \"vfs\"\ngraphroot = %q\nrunroot = %q\n", filepath.Join(dir, "root"), filepath.Join(dir, "runroot"))
	if err := os.WriteFile(filepath.Join(dir, "containers.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "storage.conf"), []byte(storage), 0o644); err != nil {
		t.Fatal(err)
	}
	if netns {
		p.writeNetworks(append([]string{"podman"}, networks...))
	}
	p.Start()
	return p
}

// writeNetworks writes a CNI bridge network per name (cni-podman0, 10.88.0.0/24 for the
// first, and so on), each keeping its leases under Dir/cni. Podman 4.3's CNI still caches
// results under /var/lib/cni: the directories it adds there are removed at cleanup.
func (p *Podman) writeNetworks(names []string) {
	p.t.Helper()
	for _, d := range append([]string{"/var/lib/cni", "/var/lib/cni/results"}, names...) {
		if !strings.HasPrefix(d, "/") {
			d = filepath.Join("/var/lib/cni/results", d)
		}
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			p.cniDirs = append(p.cniDirs, d)
		}
	}
	for i, name := range names {
		conf := map[string]any{"cniVersion": "0.4.0", "name": name, "plugins": []any{map[string]any{
			"type": "bridge", "bridge": fmt.Sprintf("cni-podman%d", i), "isGateway": true, "ipMasq": false,
			"ipam": map[string]any{"type": "host-local", "dataDir": filepath.Join(p.Dir, "cni"),
				"routes": []any{map[string]string{"dst": "0.0.0.0/0"}},
				"ranges": []any{[]any{map[string]string{"subnet": fmt.Sprintf("10.88.%d.0/24", i), "gateway": fmt.Sprintf("10.88.%d.1", i)}}}},
		}}}
		b, err := json.Marshal(conf)
		if err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p.Dir, "networks", name+".conflist"), b, 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
}

// Engine is the service as a test engine.
func (p *Podman) Engine() enginetest.Engine {
	return enginetest.Engine{Name: "private-podman", Kind: "podman", URI: p.URI}
}

func (p *Podman) command(args ...string) *exec.Cmd {
	full := append([]string{"--root", filepath.Join(p.Dir, "root"), "--runroot", filepath.Join(p.Dir, "runroot"), "--storage-driver", "vfs"}, args...)
	cmd := exec.Command("podman", full...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
		"TMPDIR=" + filepath.Join(p.Dir, "tmp"),
		"CONTAINERS_CONF=" + filepath.Join(p.Dir, "containers.conf"),
		"CONTAINERS_STORAGE_CONF=" + filepath.Join(p.Dir, "storage.conf")}
	return cmd
}

// Start starts the service (again, over the same storage) and waits until it answers.
func (p *Podman) Start() {
	p.t.Helper()
	if p.cmd != nil {
		p.t.Fatal("daemontest: the private podman already runs")
	}
	log, err := os.OpenFile(filepath.Join(p.Dir, "service.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	defer log.Close()
	cmd := p.command("system", "service", "--time=0", p.URI)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if p.netns {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNET
	}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start private podman: %v", err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { c.Wait(); close(done) }(cmd, p.exited)
	eng, err := detect.Open("podman", p.URI)
	if err != nil {
		p.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := eng.Info(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-p.exited:
			b, _ := os.ReadFile(filepath.Join(p.Dir, "service.log"))
			p.t.Fatalf("private podman exited: %s\n%s", cmd.ProcessState, b)
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("private podman does not answer after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop stops the service with SIGTERM (SIGKILL after 20 s); its containers keep running
// under their conmon.
func (p *Podman) Stop() {
	p.t.Helper()
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	p.cmd = nil
}

func (p *Podman) destroy() {
	p.Stop()
	if out, err := p.command("rm", "--all", "--force", "--time", "0").CombinedOutput(); err != nil {
		p.t.Errorf("private podman: rm --all: %v\n%s", err, out)
	}
	// A container's conmon runs `podman container cleanup` after its exit, on its own
	// time: it would write into the storage while it is removed.
	if left := waitProcsGone(p.Dir); len(left) > 0 {
		p.t.Errorf("private podman: processes still use its storage after 30s: %v", left)
	}
	for _, m := range mountsUnder(p.Dir) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			p.t.Errorf("private podman: unmount %s: %v", m, err)
		}
	}
	if err := os.RemoveAll(p.Dir); err != nil {
		p.t.Errorf("private podman: remove its storage: %v", err)
	}
	for i := len(p.cniDirs) - 1; i >= 0; i-- {
		if err := os.Remove(p.cniDirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			p.t.Errorf("private podman: remove %s: %v", p.cniDirs[i], err)
		}
	}
}

// waitProcsGone waits up to 30 s until no process has dir in its command line, and
// returns the ones still there.
func waitProcsGone(dir string) []string {
	var left []string
	waitFor(func() bool {
		left = nil
		cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, f := range cmdlines {
			if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(dir+"/")) {
				left = append(left, strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
		return len(left) == 0
	})
	return left
}

// mountsUnder lists the mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append(out, fields[4])
		}
	}
	slices.Reverse(out)
	return out
}

// ContainerStarts counts, per run, the containers of instance that the engine at e started
// since the given time, from the engine's own event log: a run started twice shows as 2.
// A container's run is its io.arizuko.run label or, for one prepared ahead of its turn
// (which carries none), the run its run log under dataDir names.
func ContainerStarts(t testing.TB, e enginetest.Engine, instance, dataDir string, since time.Time) map[string]int {
	t.Helper()
	cmd := exec.Command("podman", "--url", e.URI, "events", "--stream=false", "--since", since.Add(-time.Second).UTC().Format(time.RFC3339),
		"--filter", "event=start", "--format", "json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("podman events of %s: %v", e.Name, err)
	}
	runOf := runsOfContainers(t, dataDir)
	starts := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var ev struct {
			Name       string
			Attributes map[string]string
		}
		if err := dec.Decode(&ev); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("podman events of %s: %v", e.Name, err)
		}
		if ev.Attributes[engine.LabelInstance] != instance {
			continue
		}
		run := ev.Attributes[engine.LabelRun]
		if run == "" {
			run = runOf[ev.Name]
		}
		starts[run]++
	}
	return starts
}

// runsOfContainers maps each container a run log under dataDir names to its run.
func runsOfContainers(t testing.TB, dataDir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(filepath.Join(dataDir, "groups"), func(path string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || !strings.HasPrefix(de.Name(), "container-") || filepath.Base(filepath.Dir(path)) != "logs" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var run, container string
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "run: "); ok && run == "" {
				run = v
			}
			if v, ok := strings.CutPrefix(line, "container: "); ok && container == "" {
				container = v
			}
		}
		if run != "" && container != "" {
			out[container] = run
		}
		return nil
	})
	if err != nil {
		t.Fatalf("run logs under %s: %v", dataDir, err)
	}
	return out
}
