// Package docker is the engine.Engine of the Docker Engine API (API 1.41 and later), the
// fallback when no Podman answers. It translates an engine.Spec, with the hardening every
// container gets, into Docker's create request; it must not decide anything about a turn.
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/arizuko/arizukod/runtime/engine"
)

// Docker is an engine.Engine over the Docker Engine API: the fallback when no Podman answers.
type Docker struct {
	uri string
	cli *client.Client
}

// New returns an engine for the Docker API at uri (unix:///var/run/docker.sock). The
// API version is negotiated, so Docker 20.10 (API 1.41) and later work.
func New(uri string) (*Docker, error) {
	cli, err := client.NewClientWithOpts(client.WithHost(uri), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker at %s: %w", uri, err)
	}
	return &Docker{uri: uri, cli: cli}, nil
}

func dockerErr(err error) error {
	if err == nil {
		return nil
	}
	if client.IsErrNotFound(err) {
		msg := err.Error()
		if strings.Contains(msg, "image") {
			return fmt.Errorf("%w: %v", engine.ErrNoSuchImage, err)
		}
		return fmt.Errorf("%w: %v", engine.ErrNoSuchContainer, err)
	}
	return err
}

// Ping asks the Docker API's /_ping.
func (d *Docker) Ping(ctx context.Context) error {
	if _, err := d.cli.Ping(ctx); err != nil {
		return fmt.Errorf("docker at %s: %w", d.uri, err)
	}
	return nil
}

func (d *Docker) Info(ctx context.Context) (engine.Info, error) {
	v, err := d.cli.ServerVersion(ctx)
	if err != nil {
		return engine.Info{}, fmt.Errorf("docker at %s: %w", d.uri, err)
	}
	info, err := d.cli.Info(ctx)
	if err != nil {
		return engine.Info{}, fmt.Errorf("docker at %s: %w", d.uri, err)
	}
	rootless := slices.ContainsFunc(info.SecurityOptions, func(s string) bool { return strings.Contains(s, "name=rootless") })
	return engine.Info{Name: "docker", Version: v.Version, APIVersion: v.APIVersion, Rootless: rootless, Socket: d.uri,
		Networks: []string{engine.NetworkBridge}, Runtimes: slices.Sorted(maps.Keys(info.Runtimes)),
		NoLimits: noLimits(info.MemoryLimit, info.CPUCfsQuota, info.PidsLimit, info.CgroupDriver)}, nil
}

func (d *Docker) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, err := d.cli.ImageInspect(ctx, ref)
	if client.IsErrNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (d *Docker) ImportImage(ctx context.Context, ref string, rootfs io.Reader, changes []string) error {
	rc, err := d.cli.ImageImport(ctx, image.ImportSource{Source: rootfs, SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
}

// ImageID inspects the image ref names.
func (d *Docker) ImageID(ctx context.Context, ref string) (string, error) {
	img, err := d.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("%w %s: %w", engine.ErrNoSuchImage, ref, err)
	}
	if err != nil {
		return "", err
	}
	return img.ID, nil
}

// RemoveImage removes image id without force: one a container uses, or another
// reference names, is ErrImageInUse.
func (d *Docker) RemoveImage(ctx context.Context, id string) error {
	_, err := d.cli.ImageRemove(ctx, id, image.RemoveOptions{PruneChildren: true})
	switch {
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("remove image %s: %w: %w", id, engine.ErrImageInUse, err)
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("remove image %s: %w: %w", id, engine.ErrNoSuchImage, err)
	case err != nil:
		return fmt.Errorf("remove image %s: %w", id, err)
	}
	return nil
}

// createConfig is the Docker container config of s with the hardening every container
// gets (engine.Hardened: no capabilities, no new privileges, a read-only root; Docker adds
// no tmpfs of its own and its create never pulls), never the host's network or another
// namespace's.
func createConfig(s engine.Spec) (*container.Config, *container.HostConfig, error) {
	cfg := &container.Config{
		Image:        s.Image,
		Env:          s.Env,
		Labels:       s.Labels,
		User:         s.User,
		WorkingDir:   s.WorkingDir,
		OpenStdin:    s.Stdin,
		StdinOnce:    s.Stdin,
		AttachStdin:  s.Stdin,
		AttachStdout: true,
		AttachStderr: true,
	}
	// The last gate: whoever built the spec, the container never gets the host's network
	// or another namespace's. Named networks are the caller's policy.
	network, err := engine.CheckNetwork(s.Network, []string{s.Network})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", engine.ErrCreate, err)
	}
	h := engine.Hardened()
	hc := &container.HostConfig{
		CapDrop:        h.CapDrop,
		ReadonlyRootfs: h.ReadOnlyRoot,
		NetworkMode:    container.NetworkMode(network),
		Runtime:        s.Runtime,
		Tmpfs:          map[string]string{},
		LogConfig:      container.LogConfig{Type: "json-file"},
		Resources: container.Resources{
			Memory:   s.MemoryBytes,
			NanoCPUs: s.NanoCPUs,
		},
	}
	if s.LogMaxBytes > 0 {
		hc.LogConfig.Config = map[string]string{"max-size": strconv.FormatInt(s.LogMaxBytes, 10), "max-file": "1"}
	}
	if s.PidsLimit > 0 {
		hc.Resources.PidsLimit = &s.PidsLimit
	}
	for _, r := range s.Rlimits {
		hc.Resources.Ulimits = append(hc.Resources.Ulimits, &container.Ulimit{Name: r.Type, Soft: int64(r.Soft), Hard: int64(r.Hard)})
	}
	for _, m := range s.Mounts {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
	}
	for _, t := range s.Tmpfs {
		hc.Tmpfs[t.Target] = t.Options
	}
	if h.NoNewPrivileges {
		hc.SecurityOpt = append(hc.SecurityOpt, "no-new-privileges")
	}
	return cfg, hc, nil
}

func (d *Docker) Create(ctx context.Context, s engine.Spec) (string, error) {
	cfg, hc, err := createConfig(s)
	if err != nil {
		return "", err
	}
	r, err := d.cli.ContainerCreate(ctx, cfg, hc, nil, nil, s.Name)
	if err != nil {
		err = dockerErr(err)
		if errors.Is(err, engine.ErrNoSuchImage) {
			return "", fmt.Errorf("%w %s (runs never pull: import or build it first): %w", engine.ErrNoSuchImage, s.Image, engine.ErrCreate)
		}
		if client.IsErrConnectionFailed(err) {
			return "", err
		}
		if engine.NameInUse(err.Error()) {
			return "", fmt.Errorf("%w: %v", engine.ErrNameInUse, err)
		}
		return "", fmt.Errorf("%w: %v", engine.ErrCreate, err)
	}
	return r.ID, nil
}

func (d *Docker) Attach(ctx context.Context, id string) (*engine.Attachment, error) {
	hr, err := d.cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, dockerErr(err)
	}
	copyOut := func(stdout, stderr io.Writer) error {
		_, err := stdcopy.StdCopy(stdout, stderr, hr.Reader)
		return err
	}
	return engine.NewAttachment(closeWriter{hr.Conn, hr.CloseWrite}, copyOut, func() error { hr.Close(); return nil }), nil
}

type closeWriter struct {
	io.Writer
	closeWrite func() error
}

func (c closeWriter) Close() error { return c.closeWrite() }

func (d *Docker) Logs(ctx context.Context, id string, stdout, stderr io.Writer) error {
	rc, err := d.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return dockerErr(err)
	}
	defer rc.Close()
	_, err = stdcopy.StdCopy(stdout, stderr, rc)
	return err
}

func (d *Docker) Start(ctx context.Context, id string) error {
	return dockerErr(d.cli.ContainerStart(ctx, id, container.StartOptions{}))
}

func (d *Docker) Wait(ctx context.Context, id string) (engine.State, error) {
	okc, errc := d.cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case <-okc:
	case err := <-errc:
		return engine.State{}, dockerErr(err)
	}
	return d.Inspect(ctx, id)
}

func (d *Docker) Inspect(ctx context.Context, id string) (engine.State, error) {
	r, err := d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return engine.State{}, dockerErr(err)
	}
	s := r.State
	st := engine.State{Running: s.Running, ExitCode: s.ExitCode, OOMKilled: s.OOMKilled, Status: string(s.Status), Error: s.Error}
	st.StartedAt, _ = time.Parse(time.RFC3339Nano, s.StartedAt)
	st.FinishedAt, _ = time.Parse(time.RFC3339Nano, s.FinishedAt)
	return st, nil
}

func (d *Docker) Signal(ctx context.Context, id, signal string) error {
	return dockerErr(d.cli.ContainerKill(ctx, id, signal))
}

func (d *Docker) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := int(grace.Seconds())
	return dockerErr(d.cli.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs}))
}

func (d *Docker) Remove(ctx context.Context, id string) error {
	err := dockerErr(d.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}))
	if errors.Is(err, engine.ErrNoSuchContainer) {
		return nil
	}
	return err
}

func (d *Docker) List(ctx context.Context, labels map[string]string) ([]engine.Container, error) {
	f := filters.NewArgs()
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	list, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, dockerErr(err)
	}
	out := make([]engine.Container, 0, len(list))
	for _, c := range list {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, engine.Container{ID: c.ID, Name: name, Labels: c.Labels, Running: c.State == "running", State: c.State, Created: time.Unix(c.Created, 0)})
	}
	return out, nil
}
