package sidecar

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/session"
)

// ErrUnsupported says the engine cannot run what a sidecar asks for; it names the key.
var ErrUnsupported = errors.New("not supported by this engine")

// Engine kinds, as engine.Info.Name says them.
const (
	kindPodman = "podman"
	kindDocker = "docker"
)

// CommandLine is the engine CLI's command that runs the sidecar in the foreground and
// removes its container when it ends: the transient unit's main process.
//
//	podman --url URI run --rm ARGS   ARGS: what Podman's Quadlet generator makes of u.Container
//	docker -H URI run --rm ARGS      ARGS: the same flags in Docker's words
//
// envFile, when not empty, is read by the CLI for u.Env (--env-file), so that no value of
// the config's env appears on a command line or in the unit's properties.
func (u *Unit) CommandLine(kind, cli, uri, envFile string) ([]string, error) {
	switch kind {
	case kindPodman:
		c := *u.Container
		c.EnvironmentFile = nil
		if envFile != "" {
			c.EnvironmentFile = []string{envFile}
		}
		args, err := c.PodmanRunArgs()
		if err != nil {
			return nil, fmt.Errorf("sidecar %s: %w", u.Name, err)
		}
		return append([]string{cli, "--url", uri, "run", "--rm"}, args...), nil
	case kindDocker:
		args, err := u.dockerRunArgs(envFile)
		if err != nil {
			return nil, err
		}
		return append([]string{cli, "-H", uri, "run", "--rm"}, args...), nil
	}
	return nil, fmt.Errorf("sidecar %s: engine %q: %w", u.Name, kind, ErrUnsupported)
}

// dockerRunArgs are the flags of PodmanRunArgs as the docker CLI spells them.
func (u *Unit) dockerRunArgs(envFile string) ([]string, error) {
	c := u.Container
	for _, k := range []struct {
		key string
		set bool
	}{{"Annotation", len(c.Annotation) > 0}, {"Timezone", c.Timezone != ""}} {
		if k.set {
			return nil, fmt.Errorf("sidecar %s: %s: %w (docker)", u.Name, k.key, ErrUnsupported)
		}
	}
	h := engine.Hardened()
	a := []string{"--name", c.ContainerName, "--pull", h.Pull}
	for _, kv := range [][2]string{
		{"--pids-limit", c.PidsLimit}, {"--shm-size", c.ShmSize}, {"--entrypoint", c.Entrypoint},
		{"--workdir", c.WorkingDir}, {"--hostname", c.HostName}, {"--stop-signal", c.StopSignal},
		{"--stop-timeout", c.StopTimeout}, {"--user", c.User},
	} {
		if kv[1] != "" {
			a = append(a, kv[0], kv[1])
		}
	}
	for _, v := range c.Ulimit {
		a = append(a, "--ulimit", v)
	}
	for _, v := range c.Tmpfs {
		a = append(a, "--tmpfs", v)
	}
	if isTrue(c.RunInit) {
		a = append(a, "--init")
	}
	a = append(a, "--network", c.Network[0])
	if u.Runtime != "" {
		a = append(a, "--runtime", u.Runtime)
	}
	if h.NoNewPrivileges {
		a = append(a, "--security-opt", "no-new-privileges")
	}
	for _, capability := range h.CapDrop {
		a = append(a, "--cap-drop", capability)
	}
	if h.ReadOnlyRoot {
		a = append(a, "--read-only")
	}
	for _, kv := range []struct {
		flag string
		m    map[string]string
	}{{"--env", c.Environment}, {"--label", c.Label}} {
		for _, k := range slices.Sorted(maps.Keys(kv.m)) {
			a = append(a, kv.flag, k+"="+kv.m[k])
		}
	}
	if envFile != "" {
		a = append(a, "--env-file", envFile)
	}
	a = append(a, "--mount", "type=bind,source="+u.SocketDir+",destination="+session.SidecarSocketDir,
		"--memory", c.Memory, "--cpus", cpusString(u.NanoCPUs), c.Image)
	return append(a, c.Exec...), nil
}

// stopCommand stops the container with grace: the unit's ExecStop.
func stopCommand(kind, cli, uri, name string, grace time.Duration) []string {
	secs := strconv.Itoa(int(grace.Round(time.Second).Seconds()))
	if kind == kindDocker {
		return []string{cli, "-H", uri, "stop", "-t", secs, name}
	}
	return []string{cli, "--url", uri, "stop", "--ignore", "-t", secs, name}
}

// removeCommand removes the container whatever its state: the unit's ExecStopPost.
func removeCommand(kind, cli, uri, name string) []string {
	if kind == kindDocker {
		return []string{cli, "-H", uri, "rm", "-f", "-v", name}
	}
	return []string{cli, "--url", uri, "rm", "-f", "-v", "--ignore", name}
}
