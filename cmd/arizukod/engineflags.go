package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"

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

// defaultDataDir is $DATA_DIR, else /var/lib/arizuko for root, else $XDG_DATA_HOME/arizuko.
func defaultDataDir() string {
	if d := os.Getenv("DATA_DIR"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/lib/arizuko"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "arizuko")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local/share/arizuko")
}

// defaultImage is $CONTAINER_IMAGE, else the example agent.
func defaultImage() string {
	if v := os.Getenv("CONTAINER_IMAGE"); v != "" {
		return v
	}
	return "localhost/arizuko-agent:latest"
}

// instanceLabel names the containers of one data directory, so two daemons on one engine
// never clean up each other's.
func instanceLabel(dataDir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dataDir)))
	return hex.EncodeToString(sum[:6])
}
