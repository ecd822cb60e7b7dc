package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
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
func Open(kind, uri string) (Engine, error) {
	switch kind {
	case "podman":
		return NewPodman(uri), nil
	case "docker":
		return NewDocker(uri)
	}
	return nil, fmt.Errorf("engine %q: must be podman or docker", kind)
}

// Detect returns the first candidate engine that answers. With an explicit uri only that
// one is tried, as kind (default podman). When nothing answers, the error lists every
// socket tried and why it failed.
func Detect(ctx context.Context, kind, uri string) (Engine, Info, error) {
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
		info, err := e.Info(pctx)
		cancel()
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s %s (%s): %v", c.Kind, c.URI, c.From, err))
			continue
		}
		return e, info, nil
	}
	return nil, Info{}, fmt.Errorf("%w; tried:\n  %s", ErrNoEngine, strings.Join(tried, "\n  "))
}

// Detecting is an Engine that finds its engine on first use, and again whenever the one it
// found stops answering Info: for a daemon that starts before its engine does.
type Detecting struct {
	kind string

	mu  sync.Mutex
	cur Engine
}

// NewDetecting returns an Engine over the first candidate of kind that answers.
func NewDetecting(kind string) *Detecting { return &Detecting{kind: kind} }

// Info detects the engine when there is none, or when the current one does not answer.
func (d *Detecting) Info(ctx context.Context) (Info, error) {
	d.mu.Lock()
	cur := d.cur
	d.mu.Unlock()
	if cur != nil {
		if info, err := cur.Info(ctx); err == nil {
			return info, nil
		}
	}
	e, info, err := Detect(ctx, d.kind, "")
	d.mu.Lock()
	d.cur = e
	d.mu.Unlock()
	return info, err
}

func (d *Detecting) engine() (Engine, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return nil, fmt.Errorf("%w yet", ErrNoEngine)
	}
	return d.cur, nil
}

func (d *Detecting) ImageExists(ctx context.Context, ref string) (bool, error) {
	e, err := d.engine()
	if err != nil {
		return false, err
	}
	return e.ImageExists(ctx, ref)
}

func (d *Detecting) ImportImage(ctx context.Context, ref string, rootfs io.Reader, changes []string) error {
	e, err := d.engine()
	if err != nil {
		return err
	}
	return e.ImportImage(ctx, ref, rootfs, changes)
}

func (d *Detecting) Create(ctx context.Context, spec Spec) (string, error) {
	e, err := d.engine()
	if err != nil {
		return "", err
	}
	return e.Create(ctx, spec)
}

func (d *Detecting) Attach(ctx context.Context, id string) (*Attachment, error) {
	e, err := d.engine()
	if err != nil {
		return nil, err
	}
	return e.Attach(ctx, id)
}

func (d *Detecting) Start(ctx context.Context, id string) error {
	e, err := d.engine()
	if err != nil {
		return err
	}
	return e.Start(ctx, id)
}

func (d *Detecting) Wait(ctx context.Context, id string) (State, error) {
	e, err := d.engine()
	if err != nil {
		return State{}, err
	}
	return e.Wait(ctx, id)
}

func (d *Detecting) Inspect(ctx context.Context, id string) (State, error) {
	e, err := d.engine()
	if err != nil {
		return State{}, err
	}
	return e.Inspect(ctx, id)
}

func (d *Detecting) Signal(ctx context.Context, id, signal string) error {
	e, err := d.engine()
	if err != nil {
		return err
	}
	return e.Signal(ctx, id, signal)
}

func (d *Detecting) Stop(ctx context.Context, id string, grace time.Duration) error {
	e, err := d.engine()
	if err != nil {
		return err
	}
	return e.Stop(ctx, id, grace)
}

func (d *Detecting) Remove(ctx context.Context, id string) error {
	e, err := d.engine()
	if err != nil {
		return err
	}
	return e.Remove(ctx, id)
}

func (d *Detecting) List(ctx context.Context, labels map[string]string) ([]Container, error) {
	e, err := d.engine()
	if err != nil {
		return nil, err
	}
	return e.List(ctx, labels)
}

func (d *Detecting) Logs(ctx context.Context, id string, stdout, stderr io.Writer) error {
	e, err := d.engine()
	if err != nil {
		return err
	}
	return e.Logs(ctx, id, stdout, stderr)
}
