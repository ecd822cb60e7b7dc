package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/arizuko/arizukod/assembly"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/atomicfile"
	"github.com/arizuko/arizukod/quadlet"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/turn"
)

// quadletRunID is the io.arizuko.run label of the containers `arizukod quadlet` writes.
const quadletRunID = "quadlet"

// cmdQuadlet writes Podman Quadlet .container units that reproduce a turn of a group: the
// agent's container with its mount table and hardening, and one unit per sidecar, for
// running or debugging them by hand under systemd. It reads the daemon's configuration and
// prepares the group as a turn would (its directories and seeded session, which the units
// mount).
func cmdQuadlet(ctx context.Context, args []string) error {
	return runQuadlet(ctx, args, os.Stdout, os.Stderr)
}

// quadletUnit is one file to write.
type quadletUnit struct {
	name string // file name
	data []byte
	mode os.FileMode
}

func runQuadlet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("quadlet", "--folder F [-o DIR] [--config FILE] [--data-dir D] [--image REF] [--user UID:GID] [--skills-dir DIR] [--allowlist FILE]")
	fs.SetOutput(stderr)
	var lf localFlags
	lf.register(fs)
	folder := fs.String("folder", "", "group folder, e.g. main or main/research (required)")
	out := fs.String("o", ".", "directory for the units, e.g. /etc/containers/systemd or ~/.config/containers/systemd")
	user := fs.String("user", "", "uid:gid the containers run as (default: for root, the owner of the data directory unless it is root; else the rootless engine's mapping)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := groupfolder.Parse(*folder)
	if err != nil {
		return fmt.Errorf("--folder: %w", err)
	}
	outDir, err := filepath.Abs(*out)
	if err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	sys, err := lf.offline(ctx)
	if err != nil {
		return err
	}
	defer sys.Close()
	// The units mount the group's directories, which a turn would make, in the data
	// directory the daemon would make.
	if err := os.MkdirAll(sys.Layout.DataDir, 0o750); err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	if *user == "" {
		*user = dataDirOwner(sys.Layout.DataDir)
	} else if !regexp.MustCompile(`^[0-9]+:[0-9]+$`).MatchString(*user) {
		return fmt.Errorf("--user %q: want UID:GID", *user)
	}
	units, err := quadletUnits(ctx, sys, f, quadletOptions{user: *user, outDir: outDir})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	for _, u := range units {
		p := filepath.Join(outDir, u.name)
		if err := atomicfile.Write(p, u.data, u.mode); err != nil {
			return err
		}
		fmt.Fprintln(stdout, p)
	}
	return nil
}

type quadletOptions struct {
	user   string
	outDir string // where the units go: env files are named by their absolute path
}

// quadletUnits makes the units of a turn of f: each sidecar's (with its env in a file
// of mode 0600 next to it), then the agent's, which wants them.
func quadletUnits(ctx context.Context, sys *assembly.System, f groupfolder.Folder, o quadletOptions) ([]quadletUnit, error) {
	b := sys.Builder
	plan, err := b.Plan(ctx, f)
	if err != nil {
		return nil, err
	}
	if len(plan.Rejected) > 0 {
		r := plan.Rejected[0]
		return nil, fmt.Errorf("%w: %s -> %s: %v (a turn of %s would fail; see arizukod mounts)", errRejected, r.Request.HostPath, r.Request.ContainerPath, r.Err, f)
	}
	dirs, err := b.Layout.Paths(f)
	if err != nil {
		return nil, err
	}
	instance := sys.Config.Instance
	var units []quadletUnit
	var services []string
	for _, c := range plan.Config.Sidecars {
		u, err := sidecar.NewUnit(f, c, sidecar.UnitOptions{Instance: instance, RunID: quadletRunID, SocketDir: dirs.SidecarSockets, User: o.user})
		if err != nil {
			return nil, err
		}
		name := u.Container.ContainerName
		if len(u.Env) > 0 {
			u.Container.EnvironmentFile = []string{filepath.Join(o.outDir, name+".env")}
			units = append(units, quadletUnit{name + ".env", sidecar.EnvFile(u.Env), 0o600})
		}
		text, err := u.Container.Render()
		if err != nil {
			return nil, fmt.Errorf("sidecar %s: %w", c.Name, err)
		}
		header := fmt.Sprintf("# arizuko sidecar %s of %s, written by `arizukod quadlet`: the container arizukod\n"+
			"# runs around each turn of the group, with the same hardening. It listens on\n# %s (on the host: %s).\n",
			c.Name, f, sidecar.ContainerSocket(c.Name), u.Socket())
		units = append(units, quadletUnit{name + ".container", append([]byte(header), text...), 0o644})
		services = append(services, u.Service)
	}
	spec, err := quadletAgentSpec(ctx, sys, f, dirs, o)
	if err != nil {
		return nil, err
	}
	agent := agentContainer(spec, fmt.Sprintf("arizuko agent of %s", f))
	for _, s := range services {
		agent.Extra = append(agent.Extra, quadlet.Setting{Section: quadlet.SectionUnit, Key: "Wants", Value: s}, quadlet.Setting{Section: quadlet.SectionUnit, Key: "After", Value: s})
	}
	text, err := agent.Render()
	if err != nil {
		return nil, fmt.Errorf("agent unit: %w", err)
	}
	args, err := agent.PodmanRunArgs()
	if err != nil {
		return nil, fmt.Errorf("agent unit: %w", err)
	}
	header := fmt.Sprintf("# arizuko agent of %s, written by `arizukod quadlet`: the container of one turn, with\n"+
		"# the mounts and hardening arizukod gives it. The agent reads one JSON line (the turn's\n"+
		"# input) on stdin, which a Quadlet service does not give it; to run a turn by hand:\n"+
		"#   echo '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}' | \\\n#   podman run --rm -i %s\n",
		f, shellJoin(args))
	units = append(units, quadletUnit{agent.ContainerName + ".container", append([]byte(header), text...), 0o644})
	return units, nil
}

// quadletAgentSpec is the spec of the agent container the daemon would create for a turn
// of f: the turn as the daemon's builder makes it (limits, additional mounts, timeout),
// the daemon's mount table, image, instance and run timeout, all through
// runner.AgentSpec. Only the name and the run label say quadlet.
func quadletAgentSpec(ctx context.Context, sys *assembly.System, f groupfolder.Folder, dirs groupfolder.Dirs, o quadletOptions) (engine.Spec, error) {
	t, err := sys.Builder.Build(ctx, turn.Request{RunID: quadletRunID, Folder: f})
	if err != nil {
		return engine.Spec{}, err
	}
	cfg := sys.Config
	mounts := runner.MountTable(f, dirs, runner.NewMountOptions(sys.Layout, sys.SkillsDir, sys.WebDir), t.ProjectMounts, t.ExtraMounts)
	name := "arizuko-" + f.ContainerSlug() + "-" + quadletRunID
	return runner.AgentSpec(t, name, mounts, cmp.Or(t.Timeout, cfg.RunTimeout),
		runner.AgentOptions{Image: cfg.Image, Instance: cfg.Instance, User: o.user}), nil
}

// agentContainer is s as a Quadlet unit: the translation the Podman and Docker engines
// make of the same spec, with the hardening every engine applies (engine.Hardened: all
// capabilities dropped, no-new-privileges, a read-only root, no pull). A unit has no stdin
// to keep open and logs to the journal, so Stdin and LogMaxBytes have no counterpart.
func agentContainer(s engine.Spec, description string) *quadlet.Container {
	h := engine.Hardened()
	c := &quadlet.Container{
		Description:     description,
		ContainerName:   s.Name,
		Image:           s.Image,
		WorkingDir:      s.WorkingDir,
		User:            s.User,
		Environment:     map[string]string{},
		Network:         []string{s.Network},
		ReadOnly:        ptrTo(h.ReadOnlyRoot),
		ReadOnlyTmpfs:   ptrTo(h.EngineTmpfs),
		DropCapability:  quadlet.Capabilities(h.CapDrop),
		NoNewPrivileges: ptrTo(h.NoNewPrivileges),
		Memory:          strconv.FormatInt(s.MemoryBytes, 10),
		PidsLimit:       strconv.FormatInt(s.PidsLimit, 10),
		Label:           maps.Clone(s.Labels),
		Pull:            h.Pull,
		PodmanArgs:      []string{"--cpus=" + strconv.FormatFloat(float64(s.NanoCPUs)/1e9, 'f', -1, 64)},
	}
	if s.Runtime != "" {
		c.PodmanArgs = append(c.PodmanArgs, "--runtime="+s.Runtime)
	}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		c.Environment[k] = v
	}
	for _, t := range s.Tmpfs {
		c.Tmpfs = append(c.Tmpfs, t.Target+":"+t.Options)
	}
	for _, r := range s.Rlimits {
		c.Ulimit = append(c.Ulimit, fmt.Sprintf("%s=%d:%d", r.Type, r.Soft, r.Hard))
	}
	for _, m := range s.Mounts {
		c.Mount = append(c.Mount, quadlet.BindMount(m.Source, m.Target, m.ReadOnly))
	}
	return c
}

func ptrTo[T any](v T) *T { return &v }

// dataDirOwner is "uid:gid" of the data directory when root writes units for a data
// directory of another user (whose files the containers must not take over), else "".
func dataDirOwner(dataDir string) string {
	if os.Geteuid() != 0 {
		return ""
	}
	fi, err := os.Stat(dataDir)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellJoin quotes words for a POSIX shell.
func shellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		if shellSafe.MatchString(w) {
			q[i] = w
		} else {
			q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
