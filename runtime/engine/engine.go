package engine

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"
)

// Engine is a container engine that can run hardened, throw-away containers.
type Engine interface {
	// Ping asks whether the engine answers, with the cheapest call it has (/_ping): the
	// liveness check.
	Ping(ctx context.Context) error
	// Info asks the engine who it is: version, rootless, networks, whether limits apply.
	// It can take hundreds of milliseconds (Podman gathers host details), so callers ask
	// it once the engine answers a Ping, not to learn that it answers.
	Info(ctx context.Context) (Info, error)
	// ImageExists reports whether ref is present locally. Runs never pull.
	ImageExists(ctx context.Context, ref string) (bool, error)
	// ImportImage makes image ref from a rootfs tar stream, with Dockerfile-style changes
	// such as `ENTRYPOINT ["/agent"]`.
	ImportImage(ctx context.Context, ref string, rootfs io.Reader, changes []string) error
	// Create creates, and never starts, a container. A missing image is ErrNoSuchImage.
	Create(ctx context.Context, spec Spec) (id string, err error)
	// Attach connects to a created container's stdin, stdout and stderr.
	Attach(ctx context.Context, id string) (*Attachment, error)
	Start(ctx context.Context, id string) error
	// Wait blocks until the container is not running and returns its final state.
	Wait(ctx context.Context, id string) (State, error)
	Inspect(ctx context.Context, id string) (State, error)
	// Signal sends a signal by name, such as "SIGUSR1".
	Signal(ctx context.Context, id, signal string) error
	// Stop sends SIGTERM, then SIGKILL after grace.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Remove removes the container by force, with its anonymous volumes. A container that
	// is already gone is not an error.
	Remove(ctx context.Context, id string) error
	// List returns the containers, running or not, that carry every one of labels.
	List(ctx context.Context, labels map[string]string) ([]Container, error)
	// Logs copies what the container printed so far, as the engine's log kept it.
	Logs(ctx context.Context, id string, stdout, stderr io.Writer) error
}

// Preparer is an engine on which a container created and initialized ahead of its turn
// starts much faster than one created on the spot: Podman, whose attach to a created
// container makes libpod set it up (conmon, the OCI runtime's create, mounts, cgroup).
// Engines without that gain (Docker pays its cost at start) do not implement it; a
// wrapper that may hold either says ErrUnsupported.
type Preparer interface {
	// Init initializes a created container without starting it.
	Init(ctx context.Context, id string) error
	// WatchImages calls ready once it listens, then changed with the reference an image
	// event names (an image imported, tagged, untagged or removed; "" when it names
	// none), until ctx ends or the stream breaks; it returns why it stopped. A container
	// made before a change of its image's reference may run an image it no longer names.
	WatchImages(ctx context.Context, ready func(), changed func(ref string)) error
	// ImageID is the id of the image ref names now. An event of ref does not always change
	// it: Podman's `run` reports a "pull" of an image it already has.
	ImageID(ctx context.Context, ref string) (string, error)
}

// ImageLabeler is a Preparer that reads an image's labels: contract.PrepareLabel says
// whether its agent may be started ahead of its turn (a warm agent). A Preparer that is
// not one gets prepared containers, never warm agents.
type ImageLabeler interface {
	// ImageLabels are the labels of the image ref names now.
	ImageLabels(ctx context.Context, ref string) (map[string]string, error)
}

// ImageRemover is an engine that names an image's id and removes an image: what
// ImportReplacing uses to remove the image a new import of the same reference replaced.
type ImageRemover interface {
	// ImageID is the id of the image ref names now.
	ImageID(ctx context.Context, ref string) (string, error)
	// RemoveImage removes image id, never by force: one a container uses, or that another
	// reference names, stays, and that is ErrImageInUse.
	RemoveImage(ctx context.Context, id string) error
}

// Info describes an engine.
type Info struct {
	Name       string // "podman" or "docker"
	Version    string
	APIVersion string
	Rootless   bool
	Socket     string // the URI it was reached at
	// Networks are the network modes the engine has besides none and named networks:
	// bridge, slirp4netns, pasta.
	Networks []string
	// NoLimits says why the engine cannot apply memory, CPU and pids limits, and what
	// would fix it; "" when it applies them.
	NoLimits string
	// Runtimes are the OCI runtimes a container can get on the engine, by name: those
	// registered with Docker; the service's own on Podman (RuntimePerService); nil when
	// the engine does not say.
	Runtimes []string
	// RuntimePerService says the engine runs every container under the runtime of the
	// service itself (Podman's API has no per-container runtime): a turn gets another
	// only from another service.
	RuntimePerService bool
}

// State is what an engine knows of a container's life.
type State struct {
	Running   bool
	ExitCode  int
	OOMKilled bool
	// DeadlineExceeded says the engine itself ended the container at its deadline
	// (Spec.Timeout): a timeout, never an OOM kill, whatever the exit code.
	DeadlineExceeded bool
	Status           string // the engine's own word: created, running, exited, ...
	Error            string // the engine's error for a container that failed to start
	StartedAt        time.Time
	FinishedAt       time.Time
	// Pid is the host's pid of the container's first process while it runs; 0 when the
	// engine does not say.
	Pid int
}

// Container is one entry of List.
type Container struct {
	ID      string
	Name    string
	Labels  map[string]string
	Running bool
	// State is the engine's word for it: created, initialized, running, exited, ...
	State   string
	Created time.Time
}

// Spec is everything an engine needs to create one agent or sidecar container. There are
// no fields for capabilities, privileges or a writable root: those are fixed.
type Spec struct {
	Name        string
	Image       string
	Labels      map[string]string
	Env         []string // KEY=VALUE
	Mounts      []Mount
	Tmpfs       []Tmpfs
	Network     string // as CheckNetwork returns it: none, a mode or a named network
	MemoryBytes int64
	NanoCPUs    int64
	PidsLimit   int64
	// Runtime is the OCI runtime by the name the engine registers it under (runc, crun,
	// runsc); "" is the engine's default. CheckRuntime is its rule, Info.CheckRuntime
	// whether the engine has it. Docker takes it per container; on Podman it is the
	// service's (Info.RuntimePerService), and the adapter sends none.
	Runtime    string
	Rlimits    []Rlimit
	User       string // "uid:gid"; empty keeps the image's user
	WorkingDir string
	Stdin      bool // keep stdin open for Attach
	// LogMaxBytes caps the engine's own log of the container's output.
	LogMaxBytes int64
	// Timeout is the turn's hard deadline. The runner enforces it; an engine that can
	// enforce one of its own (Kubernetes' activeDeadlineSeconds) sets it a little later, for
	// a daemon that is away then. 0 is none.
	Timeout time.Duration
}

// Mount is one bind mount.
type Mount struct {
	Source   string // absolute host path
	Target   string // absolute container path
	ReadOnly bool
	Origin   string // why it is there: group, share, session, ipc, skills, web, env, extra
}

// Tmpfs is one tmpfs mount, such as /tmp.
type Tmpfs struct {
	Target  string
	Options string // e.g. "rw,nosuid,nodev,size=64m,mode=1777"
}

// Rlimit is one POSIX resource limit, such as {"nofile", 1024, 1024}.
type Rlimit struct {
	Type string
	Soft uint64
	Hard uint64
}

// Attachment is a live connection to a container's standard streams.
type Attachment struct {
	// Stdin writes to the container; Close half-closes it so the container sees EOF.
	Stdin io.WriteCloser
	// copyOut demultiplexes stdout and stderr until the container's streams end.
	copyOut func(stdout, stderr io.Writer) error
	closeFn func() error
}

// NewAttachment is what an Engine's Attach returns: stdin, the function that copies the
// container's stdout and stderr until both end, and the one that drops the connection.
func NewAttachment(stdin io.WriteCloser, copyOut func(stdout, stderr io.Writer) error, close func() error) *Attachment {
	return &Attachment{Stdin: stdin, copyOut: copyOut, closeFn: close}
}

// CopyOutput copies the container's stdout and stderr into the writers until both end.
func (a *Attachment) CopyOutput(stdout, stderr io.Writer) error { return a.copyOut(stdout, stderr) }

// Close drops the connection.
func (a *Attachment) Close() error { return a.closeFn() }

// Errors callers branch on.
var (
	ErrNoSuchImage     = errors.New("no such image")
	ErrNoSuchContainer = errors.New("no such container")
	// ErrImageInUse marks an image that is not removed: a container uses it, or another
	// reference names it.
	ErrImageInUse = errors.New("image in use")
	ErrNoEngine   = errors.New("no container engine answered")
	// ErrCreate marks a container the engine refused to create: a misconfiguration that a
	// retry will not fix.
	ErrCreate = errors.New("engine refused to create the container")
	// ErrNameInUse marks a create refused because a container of that name exists, or is
	// still being removed: a retry once it is gone may succeed.
	ErrNameInUse = errors.New("the container name is in use")
)

// NameInUse says whether an engine's message refuses a create for the name (Podman: `the
// container name "x" is already in use by ...`; Docker: `Conflict. The container name "/x"
// is already in use by container ...`).
func NameInUse(msg string) bool { return strings.Contains(msg, "is already in use") }
