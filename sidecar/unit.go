package sidecar

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/quadlet"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/session"
)

// Defaults of a sidecar, overridable per sidecar.
const (
	DefaultMemory    = 256 << 20
	DefaultNanoCPUs  = 1e9
	DefaultPidsLimit = 256
	maxPidsLimit     = 32768
	// tmpfsOptions are those of the /tmp every sidecar gets.
	tmpfsOptions = "rw,nosuid,nodev,size=64m,mode=1777"
)

// Environment variables every sidecar gets.
const (
	EnvSocket = "ARIZUKO_SIDECAR_SOCKET" // where to listen, inside the container
	EnvName   = "ARIZUKO_SIDECAR_NAME"
	EnvFolder = "ARIZUKO_FOLDER"
)

// RoleSidecar is the value of engine.LabelRole on sidecar containers.
const RoleSidecar = "sidecar"

// LabelSidecar carries the sidecar's name on its container.
const LabelSidecar = "io.arizuko.sidecar"

// UnitOptions are what a Unit needs beyond its Config.
type UnitOptions struct {
	Instance string // engine.LabelInstance
	RunID    string // engine.LabelRun
	// SocketDir is the host directory of the folder's sidecar sockets
	// (groupfolder.Dirs.SidecarSockets), mounted read-write at session.SidecarSocketDir.
	SocketDir string
	// User is "uid:gid" on a rootful engine, as for the agent, so the agent can use the
	// socket the sidecar makes; empty on a rootless one.
	User    string
	Rlimits []engine.Rlimit // default engine.DefaultRlimits()
	// Networks are the named networks a sidecar may join (limits.allowed_networks).
	Networks []string
	// Runtime is the OCI runtime of the group's turns (engine.CheckRuntime, checked by the
	// caller); "" is the engine's default. Docker takes it per container; Podman runs
	// every container under its service's (engine.Info.RuntimePerService).
	Runtime string
}

// Unit is one sidecar of one turn, ready to run: names, limits and the hardened container.
type Unit struct {
	Name   string
	Folder groupfolder.Folder
	// Service is the transient unit's name, ContainerName + ".service".
	Service string
	// Container is the hardened container. Its Environment holds arizukod's variables
	// only; the config's are in Env, kept out of command lines (they may be secrets).
	Container   *quadlet.Container
	Env         map[string]string
	SocketDir   string
	MemoryBytes int64
	NanoCPUs    int64
	PidsLimit   int64
	Rlimits     []engine.Rlimit
	Runtime     string // the OCI runtime; "" is the engine's default
}

// Names of a sidecar's container and unit. Two daemons on one engine or one systemd
// manager (two data directories, so two instances) may run a sidecar of the same folder
// and name at once: the names carry the instance, so neither ever touches the other's.
const (
	namePrefix = "arizuko-sc-"
	// tagLen is the length of an instance's tag in the names: hex digits of its SHA-256.
	tagLen = 8
	// maxUnitName is the longest unit name systemd accepts (UNIT_NAME_MAX less its NUL).
	maxUnitName = 255
	// folderHashLen is the length of the folder's hash that ends a cut slug.
	folderHashLen = 8
)

// NamePrefix is arizuko-sc-<tag>-, how the names of the sidecars of instance begin: the tag
// is the first 8 hex digits of the SHA-256 of the instance, so that it has one length and
// one alphabet whatever the instance (a label value, which may hold '-') and a name
// reads back unambiguously.
func NamePrefix(instance string) string {
	sum := sha256.Sum256([]byte(instance))
	return namePrefix + hex.EncodeToString(sum[:])[:tagLen] + "-"
}

// ContainerName is arizuko-sc-<tag>-<folder slug>-<name> (see NamePrefix), also the unit's
// name without ".service". It names one sidecar of one folder of one instance: slugs
// join segments with '-' and neither segments nor sidecar names contain '-'. A slug too
// long for a unit name is cut and ends in '.' and 8 hex digits of the folder's SHA-256
// ('.' is in no segment), so the name stays unique.
func ContainerName(instance string, f groupfolder.Folder, name string) string {
	slug := f.ContainerSlug()
	prefix := NamePrefix(instance)
	if room := maxUnitName - len(prefix) - len("-"+name+".service"); len(slug) > room {
		sum := sha256.Sum256([]byte(f))
		slug = slug[:room-1-folderHashLen] + "." + hex.EncodeToString(sum[:])[:folderHashLen]
	}
	return prefix + slug + "-" + name
}

// Socket is the sidecar's socket on the host.
func (u *Unit) Socket() string { return filepath.Join(u.SocketDir, u.Name+".sock") }

// ContainerSocket is the sidecar's socket inside the sidecar's and the agent's containers.
func ContainerSocket(name string) string { return path.Join(session.SidecarSocketDir, name+".sock") }

// source is a sidecar as its config describes it, before hardening.
type source struct {
	c        *quadlet.Container
	env      map[string]string
	memory   int64
	nanoCPUs int64
	pids     int64
	network  string
}

func fromFields(c Config, networks []string) (*source, error) {
	bad := func(err error) (*source, error) {
		return nil, fmt.Errorf("%w: sidecar %s: %v", ErrBadConfig, c.Name, err)
	}
	if err := checkImage(c.Image); err != nil {
		return bad(err)
	}
	if err := checkArgs(c.Command); err != nil {
		return bad(err)
	}
	if err := checkEnv(c.Env); err != nil {
		return bad(err)
	}
	s := &source{c: &quadlet.Container{Image: c.Image, Exec: slices.Clone(c.Command)}, env: maps.Clone(c.Env), pids: DefaultPidsLimit, network: "none"}
	if len(s.c.Exec) == 0 {
		s.c.Exec = nil
	}
	// The sidecar is also written as a unit (arizukod quadlet): what a unit cannot say,
	// such as a lone ";" word, is refused here too.
	if _, err := s.c.Render(); err != nil {
		return bad(err)
	}
	var err error
	if s.memory, err = parseMemory(c.Memory); err != nil {
		return bad(err)
	}
	if s.nanoCPUs, err = nanoCPUs(c.CPUs); err != nil {
		return bad(err)
	}
	if c.Network != "" {
		if s.network, err = checkNetwork(c.Network, networks); err != nil {
			return bad(err)
		}
	}
	return s, nil
}

// refusal is a Quadlet key a sidecar may not use, with the reason.
type refusal struct {
	key string
	set bool
	why string
}

// fromQuadlet reads a sidecar's .container unit. Keys that would loosen the hardening
// or reach outside the container are refused, and so is every key the quadlet package
// does not model: nothing is dropped silently.
func fromQuadlet(c Config, networks []string) (*source, error) {
	bad := func(format string, args ...any) (*source, error) {
		return nil, fmt.Errorf("%w: sidecar %s: quadlet: %s", ErrBadConfig, c.Name, fmt.Sprintf(format, args...))
	}
	if len(c.Quadlet) > MaxQuadletSize {
		return bad("longer than %d bytes", MaxQuadletSize)
	}
	q, err := quadlet.ParseContainer([]byte(c.Quadlet))
	if err != nil {
		return bad("%v", err)
	}
	if u := q.Unsupported(); len(u) > 0 {
		return bad("unsupported keys: %s", strings.Join(u, ", "))
	}
	cpus, err := quadletCPUs(q.PodmanArgs)
	if err != nil {
		return bad("%v", err)
	}
	for _, r := range []refusal{
		{"ContainerName", q.ContainerName != "", "arizukod names the container arizuko-sc-<instance tag>-<folder>-<name>"},
		{"User", q.User != "" || q.Group != "", "the sidecar runs as the agent's user, so that the agent can use its socket"},
		{"UserNS", q.UserNS != "", "the user namespace is the engine's"},
		{"GroupAdd", len(q.GroupAdd) > 0, "it would add groups to the sidecar's user"},
		{"EnvironmentFile", len(q.EnvironmentFile) > 0, "it reads a host file; use Environment"},
		{"Volume", len(q.Volume) > 0, "only the socket directory is mounted"},
		{"Mount", len(q.Mount) > 0, "only the socket directory is mounted"},
		{"AddCapability", len(q.AddCapability) > 0, "every capability is dropped"},
		{"SecurityLabelDisable", isTrue(q.SecurityLabelDisable), "the security label stays"},
		{"Ulimit", len(q.Ulimit) > 0, "the resource limits are arizukod's"},
		{"ReadOnly", q.ReadOnly != nil && !*q.ReadOnly, "the root filesystem is read-only"},
		{"ReadOnlyTmpfs", isTrue(q.ReadOnlyTmpfs), "only the /tmp arizukod mounts is writable"},
		{"NoNewPrivileges", q.NoNewPrivileges != nil && !*q.NoNewPrivileges, "no-new-privileges is always set"},
		{"Pull", q.Pull != "" && q.Pull != "never", "runs never pull: import or build the image first"},
		{"Restart", q.Restart != "", "the unit's service settings are arizukod's"},
		{"RestartSec", q.RestartSec != "", "the unit's service settings are arizukod's"},
		{"TimeoutStartSec", q.TimeoutStartSec != "", "the unit's service settings are arizukod's"},
		{"TimeoutStopSec", q.TimeoutStopSec != "", "the unit's service settings are arizukod's"},
		{"WantedBy", len(q.WantedBy) > 0, "a sidecar lives for one turn and is never installed"},
	} {
		if r.set {
			return bad("%s is not allowed: %s", r.key, r.why)
		}
	}
	if err := checkImage(q.Image); err != nil {
		return bad("%v", err)
	}
	if err := checkArgs(q.Exec); err != nil {
		return bad("Exec: %v", err)
	}
	if err := checkEnv(q.Environment); err != nil {
		return bad("Environment: %v", err)
	}
	for k := range q.Label {
		if strings.HasPrefix(k, "io.arizuko.") {
			return bad("Label %s: the io.arizuko. labels are arizukod's", k)
		}
	}
	for _, t := range q.Tmpfs {
		target, _, _ := strings.Cut(t, ":")
		if !path.IsAbs(target) || path.Clean(target) != target || target == "/tmp" || target == "/var/run/pub" || strings.HasPrefix(target, "/var/run/pub/") {
			return bad("Tmpfs %s: the target must be an absolute clean path other than /tmp and /var/run/pub", clip(target))
		}
	}
	s := &source{env: q.Environment, nanoCPUs: cpus, pids: DefaultPidsLimit, network: "none"}
	if s.memory, err = parseMemory(q.Memory); err != nil {
		return bad("Memory: %v", err)
	}
	if q.PidsLimit != "" {
		if s.pids, err = strconv.ParseInt(q.PidsLimit, 10, 64); err != nil || s.pids < 1 || s.pids > maxPidsLimit {
			return bad("PidsLimit %q: a number from 1 to %d", clip(q.PidsLimit), maxPidsLimit)
		}
	}
	switch len(q.Network) {
	case 0:
	case 1:
		if s.network, err = checkNetwork(q.Network[0], networks); err != nil {
			return bad("Network: %v", err)
		}
	default:
		return bad("Network: one network at most")
	}
	s.c = q // NewUnit replaces every hardening and limit key read above
	return s, nil
}

// quadletCPUs reads the only PodmanArgs a sidecar may have: --cpus=N or --cpus N.
func quadletCPUs(args []string) (int64, error) {
	cpus := 0.0
	for i := 0; i < len(args); i++ {
		v, ok := strings.CutPrefix(args[i], "--cpus=")
		if !ok && args[i] == "--cpus" && i+1 < len(args) {
			i++
			v, ok = args[i], true
		}
		if !ok {
			return 0, fmt.Errorf("PodmanArgs %q is not allowed: only --cpus", clip(args[i]))
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("PodmanArgs --cpus %q: not a number", clip(v))
		}
		cpus = f
	}
	n, err := nanoCPUs(cpus)
	if err != nil {
		return 0, fmt.Errorf("PodmanArgs --%v", err)
	}
	return n, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// NewUnit validates c and makes the sidecar's hardened container: every capability
// dropped, no-new-privileges, a read-only root, network none unless c says otherwise,
// memory, CPU and pids limits, the rlimits, a tmpfs /tmp, the labels of arizukod, the
// socket directory as the only mount, never a pull.
func NewUnit(f groupfolder.Folder, c Config, o UnitOptions) (*Unit, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	src, err := c.source(o.Networks)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(o.SocketDir) {
		return nil, fmt.Errorf("sidecar %s: socket directory %q is not absolute", c.Name, o.SocketDir)
	}
	rl := o.Rlimits
	if rl == nil {
		rl = engine.DefaultRlimits()
	}
	name := ContainerName(o.Instance, f, c.Name)
	q := src.c
	desc := fmt.Sprintf("arizuko sidecar %s of %s", c.Name, f)
	if q.Description != "" {
		desc += ": " + q.Description
	}
	q.Description = fmt.Sprintf("%s, run %s %s", desc, o.RunID, instanceMark(o.Instance))
	q.ContainerName = name
	h := engine.Hardened()
	q.DropCapability = quadlet.Capabilities(h.CapDrop)
	q.NoNewPrivileges = ptr(h.NoNewPrivileges)
	q.ReadOnly = ptr(h.ReadOnlyRoot)
	q.ReadOnlyTmpfs = ptr(h.EngineTmpfs)
	q.Network = []string{src.network}
	q.Memory = memoryString(src.memory)
	q.PidsLimit = strconv.FormatInt(src.pids, 10)
	q.Ulimit = nil
	for _, r := range rl {
		q.Ulimit = append(q.Ulimit, fmt.Sprintf("%s=%d:%d", r.Type, r.Soft, r.Hard))
	}
	q.Tmpfs = append([]string{"/tmp:" + tmpfsOptions}, q.Tmpfs...)
	q.Mount = []string{quadlet.BindMount(o.SocketDir, session.SidecarSocketDir, false)}
	if q.Label == nil {
		q.Label = map[string]string{}
	}
	maps.Copy(q.Label, map[string]string{
		engine.LabelInstance: o.Instance,
		engine.LabelFolder:   string(f),
		engine.LabelRun:      o.RunID,
		engine.LabelRole:     RoleSidecar,
		LabelSidecar:         c.Name,
	})
	q.Environment = map[string]string{EnvSocket: ContainerSocket(c.Name), EnvName: c.Name, EnvFolder: string(f)}
	q.User = o.User
	q.Pull = h.Pull
	q.PodmanArgs = []string{"--cpus=" + cpusString(src.nanoCPUs)}
	env := src.env
	if len(env) == 0 {
		env = nil
	}
	return &Unit{
		Name: c.Name, Folder: f, Service: name + ".service", Container: q, Env: env,
		SocketDir: o.SocketDir, MemoryBytes: src.memory, NanoCPUs: src.nanoCPUs, PidsLimit: src.pids, Rlimits: rl,
		Runtime: o.Runtime,
	}, nil
}

// instanceMark ends a sidecar unit's description, so that Cleanup stops the units of
// its own instance only.
func instanceMark(instance string) string { return "[instance " + instance + "]" }

func ptr[T any](v T) *T { return &v }

// memoryString writes bytes the way both engines' CLIs read them, in the largest exact unit.
func memoryString(b int64) string {
	for _, u := range []struct {
		shift  uint
		suffix string
	}{{30, "g"}, {20, "m"}, {10, "k"}} {
		if b%(1<<u.shift) == 0 {
			return strconv.FormatInt(b>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10)
}

func cpusString(nano int64) string { return strconv.FormatFloat(float64(nano)/1e9, 'f', -1, 64) }

// EnvFile is the content of an env file (podman and docker --env-file) holding env.
func EnvFile(env map[string]string) []byte {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		b.WriteString(k + "=" + env[k] + "\n")
	}
	return []byte(b.String())
}
