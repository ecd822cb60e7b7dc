// Package podman is the engine.Engine of Podman, over the libpod API through the Podman
// bindings (Podman 4.3 and later). It translates an engine.Spec, with the hardening every
// container gets, into a libpod spec; it must not decide anything about a turn.
package podman

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/containers/podman/v5/pkg/bindings"
	"github.com/containers/podman/v5/pkg/bindings/containers"
	"github.com/containers/podman/v5/pkg/bindings/images"
	"github.com/containers/podman/v5/pkg/bindings/system"
	"github.com/containers/podman/v5/pkg/specgen"
	spec "github.com/opencontainers/runtime-spec/specs-go"
	nettypes "go.podman.io/common/libnetwork/types"

	"github.com/arizuko/arizukod/runtime/engine"
)

// Podman is an engine.Engine over the libpod API, through the Podman bindings.
type Podman struct {
	uri string

	mu   sync.Mutex
	conn context.Context // the bindings' connection, made on first use and after a failure
}

// New returns an engine for the libpod API at uri (unix:///run/podman/podman.sock,
// tcp://host:port). It connects lazily, so an engine that is down now can answer later.
func New(uri string) *Podman { return &Podman{uri: uri} }

// connCtx carries the caller's deadline and cancellation with the bindings' connection.
type connCtx struct {
	context.Context
	values context.Context
}

func (c connCtx) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}

func (p *Podman) ctx(ctx context.Context) (context.Context, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		// NewConnection pings the service; bound it by the caller's context.
		c, err := bindings.NewConnection(ctx, p.uri)
		if err != nil {
			return nil, fmt.Errorf("podman at %s: %w", p.uri, err)
		}
		p.conn = c
	}
	return connCtx{Context: ctx, values: p.conn}, nil
}

// forget drops the connection after a transport failure so the next call reconnects.
// A cancelled call (a Wait the runner no longer needs) says nothing about the connection;
// dropping it would leave the old client's pooled connections open, one set per turn. A
// connection that is dropped has its idle connections closed.
func (p *Podman) forget(err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "connection refused") {
		p.mu.Lock()
		if p.conn != nil {
			if c, cerr := bindings.GetClient(p.conn); cerr == nil {
				c.Client.CloseIdleConnections()
			}
		}
		p.conn = nil
		p.mu.Unlock()
	}
}

func (p *Podman) call(ctx context.Context, f func(ctx context.Context) error) error {
	c, err := p.ctx(ctx)
	if err != nil {
		return err
	}
	if err := f(c); err != nil {
		p.forget(err)
		return podmanErr(err)
	}
	return nil
}

func podmanErr(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "no such container"):
		return fmt.Errorf("%w: %v", engine.ErrNoSuchContainer, err)
	case strings.Contains(msg, "image not known"), strings.Contains(msg, "no such image"):
		return fmt.Errorf("%w: %v", engine.ErrNoSuchImage, err)
	}
	return err
}

// Ping asks libpod's /_ping: the bindings' connection (made by pinging when there is
// none) and then the ping itself.
func (p *Podman) Ping(ctx context.Context) error {
	return p.call(ctx, func(ctx context.Context) error {
		c, err := bindings.GetClient(ctx)
		if err != nil {
			return err
		}
		resp, err := c.DoRequest(ctx, nil, http.MethodGet, "/_ping", nil, nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("podman at %s: ping answered %s", p.uri, resp.Status)
		}
		return nil
	})
}

func (p *Podman) Info(ctx context.Context) (engine.Info, error) {
	var info engine.Info
	err := p.call(ctx, func(ctx context.Context) error {
		i, err := system.Info(ctx, nil)
		if err != nil {
			return err
		}
		h := i.Host
		info = engine.Info{Name: "podman", Version: i.Version.Version, APIVersion: i.Version.APIVersion, Rootless: h.Security.Rootless, Socket: p.uri,
			Networks: []string{engine.NetworkBridge},
			NoLimits: noLimits(h.Security.Rootless, h.CgroupsVersion, h.CgroupManager, h.CgroupControllers)}
		// A server older than the bindings leaves out what it does not know: Podman 4.3
		// has no pasta, so it reports none.
		if h.Slirp4NetNS.Executable != "" {
			info.Networks = append(info.Networks, engine.NetworkSlirp4netns)
		}
		if h.Pasta.Executable != "" {
			info.Networks = append(info.Networks, engine.NetworkPasta)
		}
		return nil
	})
	return info, err
}

func (p *Podman) ImageExists(ctx context.Context, ref string) (bool, error) {
	var ok bool
	err := p.call(ctx, func(ctx context.Context) error {
		var err error
		ok, err = images.Exists(ctx, ref, nil)
		return err
	})
	return ok, err
}

func (p *Podman) ImportImage(ctx context.Context, ref string, rootfs io.Reader, changes []string) error {
	return p.call(ctx, func(ctx context.Context) error {
		_, err := images.Import(ctx, rootfs, new(images.ImportOptions).WithReference(ref).WithChanges(changes))
		return err
	})
}

func (p *Podman) Create(ctx context.Context, s engine.Spec) (string, error) {
	g := specgen.NewSpecGenerator(s.Image, false)
	g.Name = s.Name
	g.Labels = s.Labels
	g.Env = envMap(s.Env)
	g.Stdin = &s.Stdin
	g.Terminal = new(bool)
	g.CapDrop = []string{"ALL"}
	g.NoNewPrivileges = ptr(true)
	g.ReadOnlyFilesystem = ptr(true)
	// Only the tmpfs mounts the spec names, not podman's default ones on a read-only root.
	g.ReadWriteTmpfs = ptr(false)
	g.User = s.User
	g.WorkDir = s.WorkingDir
	g.LogConfiguration = &specgen.LogConfig{Driver: "k8s-file", Size: s.LogMaxBytes}
	// The last gate: whoever built the spec, the container never gets the host's network
	// or another namespace's. Named networks are the caller's policy.
	network, err := engine.CheckNetwork(s.Network, []string{s.Network})
	if err != nil {
		return "", fmt.Errorf("%w: %w", engine.ErrCreate, err)
	}
	switch network {
	case engine.NetworkNone:
		g.NetNS = specgen.Namespace{NSMode: specgen.NoNetwork}
	case engine.NetworkBridge:
		g.NetNS = specgen.Namespace{NSMode: specgen.Bridge}
	case engine.NetworkSlirp4netns:
		g.NetNS = specgen.Namespace{NSMode: specgen.Slirp}
	case engine.NetworkPasta:
		g.NetNS = specgen.Namespace{NSMode: specgen.Pasta}
	default:
		g.NetNS = specgen.Namespace{NSMode: specgen.Bridge}
		g.Networks = map[string]nettypes.PerNetworkOptions{network: {}}
	}
	for _, m := range s.Mounts {
		opts := []string{"rbind", "rw"}
		if m.ReadOnly {
			opts = []string{"rbind", "ro"}
		}
		g.Mounts = append(g.Mounts, spec.Mount{Destination: m.Target, Type: "bind", Source: m.Source, Options: opts})
	}
	for _, t := range s.Tmpfs {
		g.Mounts = append(g.Mounts, spec.Mount{Destination: t.Target, Type: "tmpfs", Source: "tmpfs", Options: strings.Split(t.Options, ",")})
	}
	res := &spec.LinuxResources{}
	if s.MemoryBytes > 0 {
		res.Memory = &spec.LinuxMemory{Limit: &s.MemoryBytes}
	}
	if s.NanoCPUs > 0 {
		period := uint64(100000)
		quota := s.NanoCPUs * int64(period) / 1e9
		res.CPU = &spec.LinuxCPU{Period: &period, Quota: &quota}
	}
	if s.PidsLimit > 0 {
		res.Pids = &spec.LinuxPids{Limit: s.PidsLimit}
	}
	g.ResourceLimits = res
	for _, r := range s.Rlimits {
		g.Rlimits = append(g.Rlimits, spec.POSIXRlimit{Type: strings.ToUpper(r.Type), Soft: r.Soft, Hard: r.Hard})
	}
	var id string
	err = p.call(ctx, func(ctx context.Context) error {
		r, err := containers.CreateWithSpec(ctx, g, nil)
		if err != nil {
			return err
		}
		id = r.ID
		return nil
	})
	if err != nil {
		if errors.Is(err, engine.ErrNoSuchImage) {
			return "", fmt.Errorf("%w %s (runs never pull: import or build it first): %w", engine.ErrNoSuchImage, s.Image, engine.ErrCreate)
		}
		if isTransport(err) {
			return "", err
		}
		return "", fmt.Errorf("%w: %v", engine.ErrCreate, err)
	}
	return id, nil
}

func (p *Podman) Start(ctx context.Context, id string) error {
	return p.call(ctx, func(ctx context.Context) error { return containers.Start(ctx, id, nil) })
}

func (p *Podman) Wait(ctx context.Context, id string) (engine.State, error) {
	err := p.call(ctx, func(ctx context.Context) error {
		_, err := containers.Wait(ctx, id, new(containers.WaitOptions).WithConditions([]string{"stopped", "exited"}))
		return err
	})
	if err != nil {
		return engine.State{}, err
	}
	return p.Inspect(ctx, id)
}

func (p *Podman) Inspect(ctx context.Context, id string) (engine.State, error) {
	var st engine.State
	err := p.call(ctx, func(ctx context.Context) error {
		d, err := containers.Inspect(ctx, id, new(containers.InspectOptions).WithSize(false))
		if err != nil {
			return err
		}
		s := d.State
		st = engine.State{Running: s.Running, ExitCode: int(s.ExitCode), OOMKilled: s.OOMKilled, Status: s.Status, Error: s.Error, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt}
		return nil
	})
	return st, err
}

func (p *Podman) Signal(ctx context.Context, id, signal string) error {
	return p.call(ctx, func(ctx context.Context) error {
		return containers.Kill(ctx, id, new(containers.KillOptions).WithSignal(signal))
	})
}

func (p *Podman) Stop(ctx context.Context, id string, grace time.Duration) error {
	return p.call(ctx, func(ctx context.Context) error {
		return containers.Stop(ctx, id, new(containers.StopOptions).WithTimeout(uint(grace.Seconds())).WithIgnore(true))
	})
}

func (p *Podman) Remove(ctx context.Context, id string) error {
	err := p.call(ctx, func(ctx context.Context) error {
		_, err := containers.Remove(ctx, id, new(containers.RemoveOptions).WithForce(true).WithVolumes(true).WithIgnore(true))
		return err
	})
	if errors.Is(err, engine.ErrNoSuchContainer) {
		return nil
	}
	return err
}

func (p *Podman) List(ctx context.Context, labels map[string]string) ([]engine.Container, error) {
	var out []engine.Container
	err := p.call(ctx, func(ctx context.Context) error {
		var filter []string
		for k, v := range labels {
			filter = append(filter, k+"="+v)
		}
		list, err := containers.List(ctx, new(containers.ListOptions).WithAll(true).WithFilters(map[string][]string{"label": filter}))
		if err != nil {
			return err
		}
		for _, c := range list {
			name := ""
			if len(c.Names) > 0 {
				name = c.Names[0]
			}
			out = append(out, engine.Container{ID: c.ID, Name: name, Labels: c.Labels, Running: c.State == "running", State: c.State, Created: c.Created})
		}
		return nil
	})
	return out, err
}

func (p *Podman) Logs(ctx context.Context, id string, stdout, stderr io.Writer) error {
	return p.call(ctx, func(ctx context.Context) error {
		outc, errc := make(chan string), make(chan string)
		done := make(chan error, 1)
		go func() {
			done <- containers.Logs(ctx, id, new(containers.LogOptions).WithStdout(true).WithStderr(true), outc, errc)
		}()
		for {
			select {
			case line := <-outc:
				io.WriteString(stdout, line)
			case line := <-errc:
				io.WriteString(stderr, line)
			case err := <-done:
				return err
			}
		}
	})
}

func isTransport(err error) bool {
	var ne net.Error
	var ce bindings.ConnectError
	return errors.As(err, &ne) || errors.As(err, &ce)
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func ptr[T any](v T) *T { return &v }

// Init makes libpod initialize a created container (conmon, the OCI runtime's create,
// mounts, cgroup) without starting it: what an attach to a created container would
// otherwise do on the turn's critical path.
func (p *Podman) Init(ctx context.Context, id string) error {
	return p.call(ctx, func(ctx context.Context) error { return containers.ContainerInit(ctx, id, nil) })
}

// ImageID inspects the image ref names.
func (p *Podman) ImageID(ctx context.Context, ref string) (string, error) {
	var id string
	err := p.call(ctx, func(ctx context.Context) error {
		img, err := images.GetImage(ctx, ref, nil)
		if err != nil {
			return err
		}
		id = img.ID
		return nil
	})
	return id, err
}

// WatchImages follows libpod's event stream, filtered to images, on a connection of its
// own (a stream held open on the bindings' shared client would be dropped by forget).
func (p *Podman) WatchImages(ctx context.Context, ready func(), changed func(ref string)) error {
	conn, err := dialEngine(ctx, p.uri)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	filters := url.QueryEscape(`{"type":["image"]}`)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://d/v4.0.0/libpod/events?stream=true&filters="+filters, nil)
	if err := req.Write(conn); err != nil {
		return fmt.Errorf("image events: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return fmt.Errorf("image events: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("image events: podman answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	ready()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type  string
			Actor struct{ Attributes map[string]string }
		}
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("image events: stream ended: %w", err)
		}
		if ev.Type == "image" {
			changed(ev.Actor.Attributes["name"])
		}
	}
}
