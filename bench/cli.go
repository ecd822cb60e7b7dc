package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/arizuko/arizukod/contract"
)

// hardening are the flags every command-line run gets: what runner.Runner fixes for every
// container (caps, no-new-privileges, read-only root, no network, limits, rlimits, /tmp).
var hardening = []string{
	"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--read-only", "--network", "none",
	"--memory", "1g", "--cpus", "2", "--pids-limit", "512",
	"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", "--tmpfs", "/tmp",
}

// cliMethod is one command line that runs a turn: `<argv> run --rm -i <hardening> IMAGE`.
type cliMethod struct {
	name  string
	about string
	argv  []string
	env   []string
	// local says the CLI is the engine itself (no service); a remote CLI talks to the
	// engine's API service, as arizukod does.
	local bool
}

// podmanRemote is the podman CLI in remote mode against the test host's Podman 4 service.
func podmanRemote(socket string) cliMethod {
	return cliMethod{
		name:  "podman CLI, remote",
		about: "podman --url " + socket + " run --rm -i (the CLI talks to the same API service as arizukod)",
		argv:  []string{"podman", "--url", socket},
	}
}

// podman5Remote is the podman CLI in remote mode against the test host's Podman 5 service,
// the engine arizukod's Podman 5 row runs on.
func podman5Remote(socket string) cliMethod {
	m := podmanRemote(socket)
	m.name = "podman CLI, remote, podman 5"
	return m
}

// rootlessRemote is the podman CLI in remote mode against a rootless Podman service.
func rootlessRemote(socket string) cliMethod {
	m := podmanRemote(socket)
	m.name = "podman CLI, remote, rootless"
	return m
}

// podmanLocal is the podman CLI as a gateway runs it on a host without a service: the
// local engine in the CLI's own process, on the test host's Podman 4 storage and
// configuration.
func podmanLocal(testhost string) cliMethod {
	dir := filepath.Join(testhost, "podman4")
	root := filepath.Join(dir, "storage")
	runroot := filepath.Join(testhost, "run", "podman4", "storage")
	return cliMethod{
		name:  "podman CLI, local",
		about: "podman --root " + root + " --runroot " + runroot + " run --rm -i (no service: the CLI is the engine, with conmon)",
		argv:  []string{"podman", "--root", root, "--runroot", runroot},
		env: []string{"CONTAINERS_CONF=" + filepath.Join(dir, "containers.conf"),
			"CONTAINERS_STORAGE_CONF=" + filepath.Join(dir, "storage.conf"), "TMPDIR=" + filepath.Join(dir, "tmp")},
		local: true,
	}
}

// podman5Local is Debian 13's podman CLI as the engine itself, in the test host's chroot,
// on the storage and configuration of the Podman 5 service there (hack/testhost/up.sh).
func podman5Local(testhost, chroot string) cliMethod {
	dir := filepath.Join(testhost, "podman5")
	return cliMethod{
		name:  "podman CLI, local, podman 5",
		about: "chroot " + chroot + " podman run --rm -i (no service: the CLI is the engine, on the storage of the Podman 5 service)",
		argv:  []string{"chroot", chroot, "/usr/bin/podman"},
		env: []string{"CONTAINERS_CONF=" + filepath.Join(dir, "containers.conf"), "TMPDIR=" + filepath.Join(dir, "tmp"),
			"PODMAN_IGNORE_CGROUPSV1_WARNING=1"},
		local: true,
	}
}

// rootlessLocal is the podman CLI as the engine itself, run by the rootless service's user
// on that user's storage and configuration, as a gateway running as that user would.
func rootlessLocal(uid, gid int, home, tmp string) cliMethod {
	return cliMethod{
		name:  "podman CLI, local, rootless",
		about: fmt.Sprintf("podman run --rm -i as uid %d (no service: the CLI is the engine, on that user's storage)", uid),
		argv: []string{"setpriv", fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", gid), "--init-groups",
			"env", fmt.Sprintf("XDG_RUNTIME_DIR=/run/user/%d", uid), "HOME=" + home, "TMPDIR=" + tmp,
			"CONTAINERS_CONF=" + filepath.Join(home, ".config/containers/containers.conf"), "podman"},
		local: true,
	}
}

// dockerCLI is the docker CLI against the test host's dockerd. Debian's docker.io CLI
// matches the engine; a newer CLI is pinned to the engine's API version.
func dockerCLI(cli, socket string) cliMethod {
	var env []string
	if cli == "" {
		cli = "/usr/bin/docker"
		if _, err := os.Stat(cli); err != nil {
			cli = "docker"
		}
	}
	if cli != "/usr/bin/docker" {
		env = append(env, "DOCKER_API_VERSION=1.41")
	}
	return cliMethod{
		name:  "docker CLI",
		about: cli + " -H " + socket + " run --rm -i",
		argv:  []string{cli, "-H", socket},
		env:   env,
	}
}

// run runs one turn through the command line with stdin and returns its wall time.
func (m cliMethod) run(ctx context.Context, image string, stdin []byte) (time.Duration, error) {
	args := append(append(append([]string{}, m.argv[1:]...), "run", "--rm", "-i"), hardening...)
	args = append(args, image)
	cmd := exec.CommandContext(ctx, m.argv[0], args...)
	cmd.Env = append(os.Environ(), m.env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		return d, fmt.Errorf("%s: %w: %s", m.name, err, strings.TrimSpace(errOut.String()))
	}
	if !strings.Contains(out.String(), contract.StartMarker) {
		return d, fmt.Errorf("%s: no answer from the agent: %q %q", m.name, out.String(), errOut.String())
	}
	return d, nil
}

// version asks the command line its own version.
func (m cliMethod) version(ctx context.Context) string {
	cmd := exec.CommandContext(ctx, m.argv[0], append(append([]string{}, m.argv[1:]...), "--version")...)
	cmd.Env = append(os.Environ(), m.env...)
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
