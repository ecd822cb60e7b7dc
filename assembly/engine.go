package assembly

import (
	"cmp"
	"context"
	"fmt"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/runtime/detect"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/kube"
)

// EngineFlags are what a command line says of the engine: --engine and --engine-socket.
type EngineFlags struct {
	Kind   string // "", "podman", "docker" or "kubernetes"
	Socket string // "", or the engine API's URI
}

// Where an engine setting came from, first to last: the first that sets it wins.
const (
	FromFlag        = "flag"
	FromFile        = "file"
	FromEnvironment = "environment"
	FromDefault     = "default sockets"
)

// EngineChoice is the engine every command and the daemon use for one configuration: its
// kind and socket, each taken from the flags, then the configuration file's engine and
// engine_socket, then $ARIZUKO_ENGINE and $ARIZUKO_ENGINE_SOCKET; without a socket, the
// first of the default sockets that answers (detect.Candidates: CONTAINER_HOST, the
// rootless and rootful Podman sockets, DOCKER_HOST, Docker's socket).
type EngineChoice struct {
	Kind       string
	Socket     string // "" when the default sockets are tried
	KindFrom   string // FromFlag, FromFile, FromEnvironment or FromDefault
	SocketFrom string
	file       string // the configuration file, for Source
	// Kube is the cluster of Kind "kubernetes", from [kubernetes] and stop_grace.
	Kube kube.Config
}

// Kubernetes is the Kind of the Kubernetes engine, whose cluster is [kubernetes] of the
// configuration rather than a socket.
const Kubernetes = "kubernetes"

// ChooseEngine decides the engine of cfg for a command given flags; getenv reads the
// environment (os.Getenv when nil).
func ChooseEngine(flags EngineFlags, cfg *config.Config, getenv func(string) string) (EngineChoice, error) {
	env := envOrOS(getenv)
	c := EngineChoice{file: cfg.Source}
	k := cfg.Kubernetes
	c.Kube = kube.Config{Kubeconfig: k.Kubeconfig, Namespace: k.Namespace, NoNetworkClass: k.NoNetworkClass, NodeIPCDir: k.NodeIPCDir,
		PodPidsLimit: k.PodPidsLimit, NodeSelector: k.NodeSelector, Tolerations: k.Tolerations, StopGrace: cfg.StopGrace}
	c.Kind, c.KindFrom = first(flags.Kind, cfg.Engine, env("ARIZUKO_ENGINE"))
	c.Socket, c.SocketFrom = first(flags.Socket, cfg.EngineSocket, env("ARIZUKO_ENGINE_SOCKET"))
	switch c.Kind {
	case "", "podman", "docker":
	case Kubernetes:
		if c.Socket != "" {
			return EngineChoice{}, fmt.Errorf("%s %q: the kubernetes engine has no socket: its cluster is kubeconfig in [kubernetes] of %s (\"\" in a Pod of the cluster)", c.source(c.SocketFrom, "engine_socket"), c.Socket, cmp.Or(cfg.Source, "arizukod.toml"))
		}
	default:
		return EngineChoice{}, fmt.Errorf("%s %q: must be podman, docker or kubernetes", c.source(c.KindFrom, "engine"), c.Kind)
	}
	return c, nil
}

// first is the first non-empty of the flag, the file's and the environment's value, and
// where it came from.
func first(flag, file, env string) (string, string) {
	switch {
	case flag != "":
		return flag, FromFlag
	case file != "":
		return file, FromFile
	case env != "":
		return env, FromEnvironment
	}
	return "", FromDefault
}

// Source says where the choice came from, for doctor: "engine_socket in FILE",
// "--engine-socket", "$ARIZUKO_ENGINE_SOCKET", or the default sockets (with the kind's
// source when one was named).
func (c EngineChoice) Source() string {
	if c.Kind == Kubernetes {
		where := "the in-cluster configuration"
		if c.Kube.Kubeconfig != "" {
			where = "kubeconfig " + c.Kube.Kubeconfig
		}
		return where + " (engine from " + c.source(c.KindFrom, "engine") + ")"
	}
	if c.Socket != "" {
		return c.source(c.SocketFrom, "engine_socket")
	}
	if c.Kind != "" {
		return "the default sockets of " + c.Kind + " (engine from " + c.source(c.KindFrom, "engine") + ")"
	}
	return "the default sockets"
}

func (c EngineChoice) source(from, key string) string {
	switch from {
	case FromFlag:
		return "--" + map[string]string{"engine": "engine", "engine_socket": "engine-socket"}[key]
	case FromFile:
		return key + " in " + c.file
	case FromEnvironment:
		return "$ARIZUKO_" + map[string]string{"engine": "ENGINE", "engine_socket": "ENGINE_SOCKET"}[key]
	}
	return "the default sockets"
}

// Open returns the engine without contacting it: the one at Socket, or one that finds
// the first default socket that answers at its first use and again whenever it stops
// answering (a daemon may start before its engine).
func (c EngineChoice) Open() (engine.Engine, error) {
	if c.Kind == Kubernetes {
		return kube.New(c.Kube)
	}
	if c.Socket != "" {
		kind := c.Kind
		if kind == "" {
			kind = "podman"
		}
		return detect.Open(kind, c.Socket)
	}
	return detect.New(c.Kind), nil
}

// Detect returns the engine that answers now, and what it says of itself; the error of
// one that does not names every socket tried.
func (c EngineChoice) Detect(ctx context.Context) (engine.Engine, engine.Info, error) {
	if c.Kind == Kubernetes {
		e, err := kube.New(c.Kube)
		if err == nil {
			err = e.Ping(ctx)
		}
		var info engine.Info
		if err == nil {
			info, err = e.Info(ctx)
		}
		if err != nil {
			return nil, engine.Info{}, fmt.Errorf("engine from %s: %w: %w", c.Source(), engine.ErrNoEngine, err)
		}
		return e, info, nil
	}
	e, info, err := detect.Detect(ctx, c.Kind, c.Socket)
	if err != nil {
		return nil, engine.Info{}, fmt.Errorf("engine from %s: %w", c.Source(), err)
	}
	return e, info, nil
}
