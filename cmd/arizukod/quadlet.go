package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/arizuko/arizukod/config"
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

// agentTmpfs is the /tmp of an agent container, as runner.Runner mounts it.
const agentTmpfs = "/tmp:rw,nosuid,nodev,size=256m,mode=1777"

// cmdQuadlet writes Podman Quadlet .container units that reproduce a turn of a group: the
// agent's container with its mount table and hardening, and one unit per sidecar, for
// running or debugging them by hand under systemd.
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
	fs := newFlags("quadlet", "--folder F [-o DIR] [--data-dir D] [--image REF] [--user UID:GID] [--skills-dir DIR] [--allowlist FILE]")
	fs.SetOutput(stderr)
	var lf localFlags
	lf.register(fs)
	folder := fs.String("folder", "", "group folder, e.g. main or main/research (required)")
	out := fs.String("o", ".", "directory for the units, e.g. /etc/containers/systemd or ~/.config/containers/systemd")
	image := fs.String("image", defaultImage(), "agent image ($CONTAINER_IMAGE)")
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
	b, st, err := lf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if *user == "" {
		*user = dataDirOwner(b.Layout.DataDir)
	} else if !regexp.MustCompile(`^[0-9]+:[0-9]+$`).MatchString(*user) {
		return fmt.Errorf("--user %q: want UID:GID", *user)
	}
	units, err := quadletUnits(ctx, b, f, quadletOptions{image: *image, user: *user, skillsDir: lf.skillsDir, outDir: outDir})
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
	image     string
	user      string
	skillsDir string
	outDir    string // where the units go: env files are named by their absolute path
}

// quadletUnits makes the units of a turn of f: each sidecar's (with its env in a file
// of mode 0600 next to it), then the agent's, which wants them.
func quadletUnits(ctx context.Context, b *turn.Builder, f groupfolder.Folder, o quadletOptions) ([]quadletUnit, error) {
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
	instance := instanceLabel(b.Layout.DataDir)
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
	agent, err := agentContainer(b.Layout, f, dirs, plan, o, instance)
	if err != nil {
		return nil, err
	}
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

// agentContainer is the container runner.Runner makes for a turn of f, as a unit.
func agentContainer(layout groupfolder.Layout, f groupfolder.Folder, dirs groupfolder.Dirs, plan turn.Plan, o quadletOptions, instance string) (*quadlet.Container, error) {
	cc := plan.Config
	memory := engine.DefaultLimits().MemoryBytes
	if cc.Memory != "" {
		var err error
		if memory, err = config.ParseMemory(cc.Memory); err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
	}
	cpus := float64(engine.DefaultLimits().NanoCPUs) / 1e9
	if cc.CPUs > 0 {
		cpus = cc.CPUs
	}
	pids := engine.DefaultLimits().PidsLimit
	if cc.Pids > 0 {
		pids = cc.Pids
	}
	network := "none"
	if cc.Network != "" {
		network = cc.Network
	}
	timeout := config.DefaultRunTimeout
	if cc.Timeout > 0 {
		timeout = time.Duration(cc.Timeout) * time.Millisecond
	}
	var extra []engine.Mount
	for _, m := range plan.Mounts {
		extra = append(extra, engine.Mount{Source: m.HostPath, Target: m.ContainerPath, ReadOnly: m.ReadOnly})
	}
	c := &quadlet.Container{
		Description:   fmt.Sprintf("arizuko agent of %s", f),
		ContainerName: "arizuko-" + f.ContainerSlug() + "-" + quadletRunID,
		Image:         o.image,
		WorkingDir:    "/workspace",
		User:          o.user,
		Environment: map[string]string{
			"HOME":                     "/root",
			"ARIZUKO_FOLDER":           string(f),
			"ARIZUKO_RUN_ID":           quadletRunID,
			"ARIZUKO_QUERY_TIMEOUT_MS": strconv.FormatInt(runner.QueryTimeout(timeout).Milliseconds(), 10),
		},
		Tmpfs:           []string{agentTmpfs},
		Network:         []string{network},
		ReadOnly:        ptrTo(true),
		ReadOnlyTmpfs:   ptrTo(false),
		DropCapability:  []string{"all"},
		NoNewPrivileges: ptrTo(true),
		Memory:          strconv.FormatInt(memory, 10),
		PidsLimit:       strconv.FormatInt(pids, 10),
		Label: map[string]string{
			engine.LabelInstance: instance,
			engine.LabelFolder:   string(f),
			engine.LabelRun:      quadletRunID,
			engine.LabelRole:     "agent",
		},
		Pull:       "never",
		PodmanArgs: []string{"--cpus=" + strconv.FormatFloat(cpus, 'f', -1, 64)},
	}
	for _, r := range engine.DefaultRlimits() {
		c.Ulimit = append(c.Ulimit, fmt.Sprintf("%s=%d:%d", r.Type, r.Soft, r.Hard))
	}
	for _, m := range runner.MountTable(f, dirs, runner.MountOptions{SkillsDir: o.skillsDir, EnvFile: envFileIfPresent(layout)}, extra) {
		c.Mount = append(c.Mount, quadlet.BindMount(m.Source, m.Target, m.ReadOnly))
	}
	return c, nil
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
