package daemontest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/detect"
)

// Docker is a private dockerd with a containerd of its own, both over a directory of the
// test, with dockerd in a network namespace of its own: its default bridge (docker0) and
// the networks a test makes live there, never in the host's namespace. The test host's
// dockerd has no bridge (--bridge=none); this one is for the tests of the bridge modes.
type Docker struct {
	Dir string
	URI string

	t     testing.TB
	procs []*exec.Cmd // containerd, dockerd
	done  []chan struct{}
}

// StartIsolatedDocker starts the private containerd and dockerd and waits until dockerd
// answers; cleanup removes its containers and networks, stops both and removes the
// directory.
func StartIsolatedDocker(t testing.TB) *Docker {
	t.Helper()
	enginetest.Services(t, "a private dockerd")
	for _, bin := range []string{"dockerd", "containerd", "docker"} {
		if _, err := exec.LookPath(bin); err != nil {
			enginetest.Missing(t, "%s: %v", bin, err)
		}
	}
	dir, err := os.MkdirTemp("", "arizuko-docker-")
	if err != nil {
		t.Fatal(err)
	}
	d := &Docker{Dir: dir, URI: "unix://" + filepath.Join(dir, "docker.sock"), t: t}
	t.Cleanup(d.destroy)
	ctrd := filepath.Join(dir, "containerd.sock")
	conf := fmt.Sprintf("version = 2\nroot = %q\nstate = %q\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = %q\n[ttrpc]\n  address = %q\n[debug]\n  address = \"\"\n[metrics]\n  address = \"\"\n",
		filepath.Join(dir, "containerd"), filepath.Join(dir, "containerd-state"), ctrd, ctrd+".ttrpc")
	if err := os.WriteFile(filepath.Join(dir, "containerd.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), []byte(fmt.Sprintf(`{"deprecated-key-path": %q}`, filepath.Join(dir, "key.json"))), 0o644); err != nil {
		t.Fatal(err)
	}
	d.start("containerd", false, "containerd", "--config", filepath.Join(dir, "containerd.toml"))
	if !waitFor(func() bool { _, err := os.Stat(ctrd); return err == nil }) {
		t.Fatalf("private containerd: no socket after 30s\n%s", d.log("containerd"))
	}
	// The same settings as the test host's dockerd (hack/testhost/up.sh), but with its
	// default bridge: in its own network namespace, that bridge is the test's alone.
	d.start("dockerd", true, "dockerd", "--host", d.URI, "--config-file", filepath.Join(dir, "daemon.json"),
		"--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"), "--pidfile", filepath.Join(dir, "dockerd.pid"),
		"--containerd", ctrd, "--storage-driver", "vfs",
		"--iptables=false", "--ip-forward=false", "--ip-masq=false", "--userland-proxy=false",
		"--exec-opt", "native.cgroupdriver=cgroupfs", "--cgroup-parent", "/arizuko-testhost-docker",
		"--default-ulimit", "nofile=1024:1024", "--default-ulimit", "nproc=4096:4096")
	eng, err := detect.Open("docker", d.URI)
	if err != nil {
		t.Fatal(err)
	}
	ok := waitFor(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := eng.Info(ctx)
		return err == nil
	})
	if !ok {
		t.Fatalf("private dockerd does not answer after 30s\n%s", d.log("dockerd"))
	}
	return d
}

// Engine is the service as a test engine.
func (d *Docker) Engine() enginetest.Engine {
	return enginetest.Engine{Name: "private-docker", Kind: "docker", URI: d.URI}
}

// CreateNetwork makes a bridge network name on the private dockerd.
func (d *Docker) CreateNetwork(name string) {
	d.t.Helper()
	if out, err := d.cli("network", "create", name).CombinedOutput(); err != nil {
		d.t.Fatalf("private dockerd: network create %s: %v\n%s", name, err, out)
	}
}

func (d *Docker) cli(args ...string) *exec.Cmd {
	cmd := exec.Command("docker", append([]string{"--host", d.URI}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + d.Dir, "DOCKER_CONFIG=" + filepath.Join(d.Dir, "cli")}
	return cmd
}

func (d *Docker) start(name string, netns bool, args ...string) {
	d.t.Helper()
	log, err := os.Create(filepath.Join(d.Dir, name+".log"))
	if err != nil {
		d.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if netns {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNET
	}
	if err := cmd.Start(); err != nil {
		d.t.Fatalf("start private %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	d.procs, d.done = append(d.procs, cmd), append(d.done, done)
}

func (d *Docker) log(name string) string {
	b, _ := os.ReadFile(filepath.Join(d.Dir, name+".log"))
	return string(b)
}

func (d *Docker) destroy() {
	if len(d.procs) == 2 {
		if ids, err := d.cli("ps", "--all", "--quiet").Output(); err == nil && len(strings.Fields(string(ids))) > 0 {
			if out, err := d.cli(append([]string{"rm", "--force", "--volumes"}, strings.Fields(string(ids))...)...).CombinedOutput(); err != nil {
				d.t.Errorf("private dockerd: rm: %v\n%s", err, out)
			}
		}
	}
	// dockerd first: it stops what runs on containerd.
	for i := len(d.procs) - 1; i >= 0; i-- {
		d.procs[i].Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done[i]:
		case <-time.After(30 * time.Second):
			syscall.Kill(-d.procs[i].Process.Pid, syscall.SIGKILL)
			<-d.done[i]
		}
	}
	for _, m := range mountsUnder(d.Dir) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			d.t.Errorf("private dockerd: unmount %s: %v", m, err)
		}
	}
	if err := os.RemoveAll(d.Dir); err != nil {
		d.t.Errorf("private dockerd: remove its directory: %v", err)
	}
}

// waitFor polls ok for up to 30 s.
func waitFor(ok func() bool) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	return false
}
