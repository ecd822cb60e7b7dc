package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/arizuko/arizukod/runtime/detect"
	"github.com/arizuko/arizukod/runtime/engine"
)

// engineFlags are the flags of every command that talks to a container engine.
type engineFlags struct {
	kind   string
	socket string
}

func (e *engineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.kind, "engine", os.Getenv("ARIZUKO_ENGINE"), "container engine: podman or docker (default: the first that answers, podman first)")
	fs.StringVar(&e.socket, "engine-socket", os.Getenv("ARIZUKO_ENGINE_SOCKET"), "engine API URI, e.g. unix:///run/podman/podman.sock (default: CONTAINER_HOST, the rootless and rootful podman sockets, DOCKER_HOST, /var/run/docker.sock)")
}

func (e *engineFlags) open(ctx context.Context) (engine.Engine, engine.Info, error) {
	if e.kind != "" && e.kind != "podman" && e.kind != "docker" {
		return nil, engine.Info{}, fmt.Errorf("--engine %q: must be podman or docker", e.kind)
	}
	return detect.Detect(ctx, e.kind, e.socket)
}
