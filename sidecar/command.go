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
//	podman --url URI run --rm --cidfile CIDFILE ARGS   ARGS: what Podman's Quadlet generator makes of u.Container
//	docker -H URI run --rm --cidfile CIDFILE ARGS      ARGS: the same flags in Docker's words
//
// envFile, when not empty, is read by the CLI for u.Env (--env-file), so that no value of
// the config's env appears on a command line or in the unit's properties. The CLI writes
// the container's ID to cidFile, which must not exist yet: the unit's stop commands
// (stopCommand, removeCommand) name the container by it.
func (u *Unit) CommandLine(kind, cli, uri, envFile, cidFile string) ([]string, error) {
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
		return append([]string{cli, "--url", uri, "run", "--rm", "--cidfile", cidFile}, args...), nil
	case kindDocker:
		args, err := u.dockerRunArgs(envFile)
		if err != nil {
			return nil, err
		}
		return append([]string{cli, "-H", uri, "run", "--rm", "--cidfile", cidFile}, args...), nil
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

// The unit's stop commands name the container by the ID its run wrote to the cid file,
// never by its name, which a container of another instance could hold. A shell reads the
// file and appends the ID to the CLI's words (Docker's stop and rm take no --cidfile, and
// Podman 4's fail on a missing one even with --ignore); without the file no container
// was made, or the engine removed it with its container, and there is nothing to do.
const byCIDScript = `f=$1; shift; [ -s "$f" ] || exit 0; exec "$@" "$(cat "$f")"`

// byCID runs argv with the ID in cidFile as its last word, when there is one.
func byCID(cidFile string, argv ...string) []string {
	return append([]string{"/bin/sh", "-c", byCIDScript, "sh", cidFile}, argv...)
}

// stopCommand stops the container with grace: the unit's ExecStop.
func stopCommand(kind, cli, uri, cidFile string, grace time.Duration) []string {
	secs := strconv.Itoa(int(grace.Round(time.Second).Seconds()))
	if kind == kindDocker {
		return byCID(cidFile, cli, "-H", uri, "stop", "-t", secs)
	}
	return byCID(cidFile, cli, "--url", uri, "stop", "--ignore", "-t", secs)
}

// removeCommand removes the container whatever its state: the unit's ExecStopPost.
func removeCommand(kind, cli, uri, cidFile string) []string {
	if kind == kindDocker {
		return byCID(cidFile, cli, "-H", uri, "rm", "-f", "-v")
	}
	return byCID(cidFile, cli, "--url", uri, "rm", "-f", "-v", "--ignore")
}
