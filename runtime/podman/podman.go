// Package podman is the engine.Engine of Podman, over the libpod API through the Podman
// bindings' connection (Podman 4.3 and later). It translates an engine.Spec, with the
// hardening every container gets, into a libpod spec; it must not decide anything about a
// turn.
//
// Requests go through bindings.Connection.DoRequest and APIResponse.Process (the bindings'
// transport, API version and error model); the bodies are this package's own subsets of
// libpod's types (libpod.go), not the bindings' containers, images and system packages:
// those link Podman's image, storage and signing libraries into the daemon, about 12 MB of
// resident memory at start for the dozen calls made here (BENCHMARKS.md, section 4, the
// two floor rows).
package podman

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containers/podman/v5/pkg/bindings"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/arizuko/arizukod/runtime/engine"
)

// Podman is an engine.Engine over the libpod API, through the Podman bindings' connection.
type Podman struct {
	uri string

	mu   sync.Mutex
	conn *bindings.Connection // made on first use and after a failure
}

// New returns an engine for the libpod API at uri (unix:///run/podman/podman.sock,
// tcp://host:port). It connects lazily, so an engine that is down now can answer later.
func New(uri string) *Podman { return &Podman{uri: uri} }

func (p *Podman) connection(ctx context.Context) (*bindings.Connection, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		// NewConnection pings the service; bound it by the caller's context.
		c, err := bindings.NewConnection(ctx, p.uri)
		if err != nil {
			return nil, fmt.Errorf("podman at %s: %w", p.uri, err)
		}
		conn, err := bindings.GetClient(c)
		if err != nil {
			return nil, fmt.Errorf("podman at %s: %w", p.uri, err)
		}
		p.conn = conn
	}
	return p.conn, nil
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
			p.conn.Client.CloseIdleConnections()
		}
		p.conn = nil
		p.mu.Unlock()
	}
}

// request is one call of the libpod API: endpoint is relative to /vX/libpod, with %s for
// each of args (escaped by the bindings).
type request struct {
	method   string
	endpoint string
	args     []string
	params   url.Values
	body     io.Reader
}

// send makes r and returns the answer, whatever its status; the caller closes its body.
func (p *Podman) send(ctx context.Context, r request) (*bindings.APIResponse, error) {
	conn, err := p.connection(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := conn.DoRequest(ctx, r.body, r.method, r.endpoint, r.params, nil, r.args...)
	if err != nil {
		p.forget(err)
		return nil, err
	}
	return resp, nil
}

// do makes r and decodes a successful answer's JSON into out (nil: none). An error answer
// is the bindings' error model, mapped to the engine's sentinels where one fits.
func (p *Podman) do(ctx context.Context, r request, out any) error {
	resp, err := p.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := resp.Process(out); err != nil {
		p.forget(err)
		return podmanErr(err)
	}
	return nil
}

func podmanErr(err error) error {
	if err == nil {
		return nil
	}
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
	resp, err := p.send(ctx, request{method: http.MethodGet, endpoint: "/_ping"})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("podman at %s: ping answered %s", p.uri, resp.Status)
	}
	return nil
}

func (p *Podman) Info(ctx context.Context) (engine.Info, error) {
	var i libpodInfo
	if err := p.do(ctx, request{method: http.MethodGet, endpoint: "/info"}, &i); err != nil {
		return engine.Info{}, err
	}
	h := i.Host
	info := engine.Info{Name: "podman", Version: i.Version.Version, APIVersion: i.Version.APIVersion, Rootless: h.Security.Rootless, Socket: p.uri,
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
	// Podman's API runs every container under the service's own runtime: libpod ignores
	// specgen's oci_runtime, the compat API HostConfig.Runtime, and the remote CLI has no
	// --runtime. That runtime is the only one a container gets here.
	if h.OCIRuntime.Name != "" {
		info.Runtimes, info.RuntimePerService = []string{h.OCIRuntime.Name}, true
	}
	return info, nil
}

func (p *Podman) ImageExists(ctx context.Context, ref string) (bool, error) {
	resp, err := p.send(ctx, request{method: http.MethodGet, endpoint: "/images/%s/exists", args: []string{ref}})
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.IsSuccess():
		return true, nil
	case resp.StatusCode == http.StatusNotFound:
		return false, nil
	}
	return false, podmanErr(resp.Process(nil))
}

func (p *Podman) ImportImage(ctx context.Context, ref string, rootfs io.Reader, changes []string) error {
	params := url.Values{"reference": {ref}}
	for _, c := range changes {
		params.Add("changes", c)
	}
	return p.do(ctx, request{method: http.MethodPost, endpoint: "/images/import", params: params, body: rootfs}, nil)
}

func (p *Podman) Create(ctx context.Context, s engine.Spec) (string, error) {
	g, err := createSpec(s)
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(g)
	if err != nil {
		return "", fmt.Errorf("%w: %w", engine.ErrCreate, err)
	}
	var created struct {
		ID string `json:"Id"`
	}
	err = p.do(ctx, request{method: http.MethodPost, endpoint: "/containers/create", body: bytes.NewReader(body)}, &created)
	if err != nil {
		if errors.Is(err, engine.ErrNoSuchImage) {
			return "", fmt.Errorf("%w %s (runs never pull: import or build it first): %w", engine.ErrNoSuchImage, s.Image, engine.ErrCreate)
		}
		if isTransport(err) {
			return "", err
		}
		if engine.NameInUse(err.Error()) {
			return "", fmt.Errorf("%w: %v", engine.ErrNameInUse, err)
		}
		return "", fmt.Errorf("%w: %v", engine.ErrCreate, err)
	}
	return created.ID, nil
}

func (p *Podman) Start(ctx context.Context, id string) error {
	return p.do(ctx, request{method: http.MethodPost, endpoint: "/containers/%s/start", args: []string{id}}, nil)
}

func (p *Podman) Wait(ctx context.Context, id string) (engine.State, error) {
	var code int32
	params := url.Values{"condition": {"stopped", "exited"}}
	if err := p.do(ctx, request{method: http.MethodPost, endpoint: "/containers/%s/wait", args: []string{id}, params: params}, &code); err != nil {
		return engine.State{}, err
	}
	return p.Inspect(ctx, id)
}

func (p *Podman) Inspect(ctx context.Context, id string) (engine.State, error) {
	var d struct{ State libpodState }
	params := url.Values{"size": {"false"}}
	if err := p.do(ctx, request{method: http.MethodGet, endpoint: "/containers/%s/json", args: []string{id}, params: params}, &d); err != nil {
		return engine.State{}, err
	}
	s := d.State
	return engine.State{Running: s.Running, ExitCode: int(s.ExitCode), OOMKilled: s.OOMKilled, Status: s.Status, Error: s.Error, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt, Pid: s.Pid}, nil
}

func (p *Podman) Signal(ctx context.Context, id, signal string) error {
	return p.do(ctx, request{method: http.MethodPost, endpoint: "/containers/%s/kill", args: []string{id}, params: url.Values{"signal": {signal}}}, nil)
}

func (p *Podman) Stop(ctx context.Context, id string, grace time.Duration) error {
	params := url.Values{"timeout": {strconv.FormatUint(uint64(grace.Seconds()), 10)}, "ignore": {"true"}}
	resp, err := p.send(ctx, request{method: http.MethodPost, endpoint: "/containers/%s/stop", args: []string{id}, params: params})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	return podmanErr(resp.Process(nil))
}

func (p *Podman) Remove(ctx context.Context, id string) error {
	params := url.Values{"force": {"true"}, "volumes": {"true"}, "ignore": {"true"}}
	err := p.do(ctx, request{method: http.MethodDelete, endpoint: "/containers/%s", args: []string{id}, params: params}, nil)
	if errors.Is(err, engine.ErrNoSuchContainer) {
		return nil
	}
	return err
}

func (p *Podman) List(ctx context.Context, labels map[string]string) ([]engine.Container, error) {
	filter := []string{}
	for k, v := range labels {
		filter = append(filter, k+"="+v)
	}
	filters, err := json.Marshal(map[string][]string{"label": filter})
	if err != nil {
		return nil, err
	}
	var list []libpodListed
	params := url.Values{"all": {"true"}, "filters": {string(filters)}}
	if err := p.do(ctx, request{method: http.MethodGet, endpoint: "/containers/json", params: params}, &list); err != nil {
		return nil, err
	}
	out := make([]engine.Container, 0, len(list))
	for _, c := range list {
		name := ""
		if len(c.Names) > 0 {
			name = c.Names[0]
		}
		out = append(out, engine.Container{ID: c.ID, Name: name, Labels: c.Labels, Running: c.State == "running", State: c.State, Created: c.Created})
	}
	return out, nil
}

// Logs copies what the container wrote, in the engine's multiplexed framing (a container
// without a terminal), to stdout and stderr.
func (p *Podman) Logs(ctx context.Context, id string, stdout, stderr io.Writer) error {
	params := url.Values{"stdout": {"true"}, "stderr": {"true"}}
	resp, err := p.send(ctx, request{method: http.MethodGet, endpoint: "/containers/%s/logs", args: []string{id}, params: params})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if !resp.IsSuccess() {
		return podmanErr(resp.Process(nil))
	}
	_, err = stdcopy.StdCopy(stdout, stderr, resp.Body)
	return err
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
	resp, err := p.send(ctx, request{method: http.MethodPost, endpoint: "/containers/%s/init", args: []string{id}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified {
		return fmt.Errorf("init %s: the container was initialized before", id)
	}
	return podmanErr(resp.Process(nil))
}

// ImageID inspects the image ref names.
func (p *Podman) ImageID(ctx context.Context, ref string) (string, error) {
	var img struct {
		ID string `json:"Id"`
	}
	if err := p.do(ctx, request{method: http.MethodGet, endpoint: "/images/%s/json", args: []string{ref}}, &img); err != nil {
		return "", err
	}
	return img.ID, nil
}

// ImageLabels inspects the labels of the image ref names.
func (p *Podman) ImageLabels(ctx context.Context, ref string) (map[string]string, error) {
	var img struct{ Labels map[string]string }
	if err := p.do(ctx, request{method: http.MethodGet, endpoint: "/images/%s/json", args: []string{ref}}, &img); err != nil {
		return nil, err
	}
	return img.Labels, nil
}

// RemoveImage removes image id without force: one a container uses, or another
// reference names, is ErrImageInUse.
func (p *Podman) RemoveImage(ctx context.Context, id string) error {
	resp, err := p.send(ctx, request{method: http.MethodDelete, endpoint: "/images/%s", args: []string{id}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.IsSuccess():
		return nil
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("remove image %s: %w: %w", id, engine.ErrImageInUse, resp.Process(nil))
	}
	return fmt.Errorf("remove image %s: %w", id, podmanErr(resp.Process(nil)))
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
