// Package detect finds the container engine to use: Podman first (CONTAINER_HOST, the
// rootless socket, the rootful socket), then Docker (DOCKER_HOST, the default socket), and
// opens the adapter for it. It owns the choice only; the adapters are runtime/podman and
// runtime/docker.
package detect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/arizuko/arizukod/runtime/docker"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/podman"
)

// Candidate is one place an engine may answer.
type Candidate struct {
	Kind string // "podman" or "docker"
	URI  string
	From string // why it is a candidate: an environment variable or a well-known path
}

// Candidates lists where to look for an engine, in order of preference: Podman first
// (CONTAINER_HOST, the rootless socket, the rootful socket), then Docker (DOCKER_HOST, the
// default socket). kind narrows the list to "podman" or "docker"; empty keeps both.
func Candidates(kind string, getenv func(string) string) []Candidate {
	var c []Candidate
	if kind == "" || kind == "podman" {
		if v := getenv("CONTAINER_HOST"); v != "" {
			c = append(c, Candidate{"podman", v, "CONTAINER_HOST"})
		}
		if d := getenv("XDG_RUNTIME_DIR"); d != "" {
			c = append(c, Candidate{"podman", "unix://" + filepath.Join(d, "podman/podman.sock"), "rootless socket"})
		}
		c = append(c, Candidate{"podman", "unix:///run/podman/podman.sock", "rootful socket"})
	}
	if kind == "" || kind == "docker" {
		if v := getenv("DOCKER_HOST"); v != "" {
			c = append(c, Candidate{"docker", v, "DOCKER_HOST"})
		}
		c = append(c, Candidate{"docker", "unix:///var/run/docker.sock", "default socket"})
	}
	return c
}

// Open returns an engine of the given kind at uri, without contacting it.
func Open(kind, uri string) (engine.Engine, error) {
	switch kind {
	case "podman":
		return podman.New(uri), nil
	case "docker":
		return docker.New(uri)
	}
	return nil, fmt.Errorf("engine %q: must be podman or docker", kind)
}

// Detect returns the first candidate engine that answers, and what it says of itself. With
// an explicit uri only that one is tried, as kind (default podman). When nothing answers,
// the error lists every socket tried and why it failed.
func Detect(ctx context.Context, kind, uri string) (engine.Engine, engine.Info, error) {
	e, err := Find(ctx, kind, uri)
	if err != nil {
		return nil, engine.Info{}, err
	}
	info, err := e.Info(ctx)
	if err != nil {
		return nil, engine.Info{}, err
	}
	return e, info, nil
}

// Find returns the first candidate engine that answers a ping, as Detect chooses it, without
// asking it for its details.
func Find(ctx context.Context, kind, uri string) (engine.Engine, error) {
	var cands []Candidate
	if uri != "" {
		if kind == "" {
			kind = "podman"
		}
		cands = []Candidate{{kind, uri, "explicit setting"}}
	} else {
		cands = Candidates(kind, os.Getenv)
	}
	var tried []string
	for _, c := range cands {
		if strings.HasPrefix(c.URI, "unix://") {
			if _, err := os.Stat(strings.TrimPrefix(c.URI, "unix://")); err != nil {
				tried = append(tried, fmt.Sprintf("%s %s (%s): %v", c.Kind, c.URI, c.From, errors.Unwrap(err)))
				continue
			}
		}
		e, err := Open(c.Kind, c.URI)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s %s (%s): %v", c.Kind, c.URI, c.From, err))
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = e.Ping(pctx)
		cancel()
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s %s (%s): %v", c.Kind, c.URI, c.From, err))
			continue
		}
		return e, nil
	}
	return nil, fmt.Errorf("%w; tried:\n  %s", engine.ErrNoEngine, strings.Join(tried, "\n  "))
}
