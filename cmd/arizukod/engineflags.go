package main

import (
	"context"
	"flag"
	"os"

	"github.com/arizuko/arizukod/assembly"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/runtime/engine"
)

// engineFlags are the flags of every command that talks to a container engine.
type engineFlags struct {
	kind   string
	socket string
}

func (e *engineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.kind, "engine", "", "container engine: podman, docker or kubernetes (default: engine of the configuration, $ARIZUKO_ENGINE, else the first that answers, podman first)")
	fs.StringVar(&e.socket, "engine-socket", "", "engine API URI, e.g. unix:///run/podman/podman.sock (default: engine_socket of the configuration, $ARIZUKO_ENGINE_SOCKET, else CONTAINER_HOST, the rootless and rootful podman sockets, DOCKER_HOST, /var/run/docker.sock)")
}

func (e *engineFlags) flags() assembly.EngineFlags {
	return assembly.EngineFlags{Kind: e.kind, Socket: e.socket}
}

// choose is the engine the daemon of cfg would use, with the flags first.
func (e *engineFlags) choose(cfg *config.Config) (assembly.EngineChoice, error) {
	return assembly.ChooseEngine(e.flags(), cfg, os.Getenv)
}

// open is the engine chosen for cfg (the flags, then the file, then the environment, then
// the default sockets), which must answer.
func (e *engineFlags) open(ctx context.Context, cfg *config.Config) (engine.Engine, engine.Info, error) {
	c, err := e.choose(cfg)
	if err != nil {
		return nil, engine.Info{}, err
	}
	return c.Detect(ctx)
}
