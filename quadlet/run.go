package quadlet

import (
	"encoding/csv"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// PodmanRunArgs returns the arguments Podman 5.4's generator puts after `podman run` on
// the ExecStart= line it generates for this unit, restricted to the modelled keys and
// as podman receives them (systemd's specifier and variable processing done, see
// Container). The caller puts the podman binary, its global options and "run" in
// front. It follows ConvertContainer in pkg/systemd/quadlet/quadlet.go, in this order:
//
//	--name NAME
//	--tz, --pids-limit, --shm-size, --entrypoint, --workdir, --hostname,
//	--stop-signal, --stop-timeout, --pull     one each for the set single values
//	--ulimit, --group-add, --tmpfs            one per value
//	--init, --read-only-tmpfs                 --flag, or --flag=false
//	--network NET                             one per value
//	--security-opt=no-new-privileges, then --security-opt label=disable
//	--cap-drop CAP, --cap-add CAP             one per word, lower-cased
//	--read-only                               or --read-only=false
//	--user USER[:GROUP], --userns MODE
//	-v VOLUME                                 one per value
//	--env, --label, --annotation K=V          sorted by key
//	--env-file PATH, --mount SPEC             bind, volume, glob and image specs are
//	                                          rewritten type=...,source=... first
//	--memory=SIZE, PODMANARGS..., IMAGE, EXEC...
//
// Flags come as separate words (--cap-drop all, not --cap-drop=all) exactly as the
// generator emits them. Within the first three groups the generator's order is Go map
// order, so it varies from run to run; here it is the order above.
//
// Not reproduced, because they belong to the generated service rather than to the keys:
// the flags the generator always adds, --cidfile=%t/%N.cid (needs the unit's specifiers),
// --replace and --rm (container lifecycle: the caller owns it), --cgroups=split and
// --sdnotify=conmon -d (only meaningful for a Type=notify service with Delegate=yes;
// CgroupsMode and Notify are not modelled); and the service settings it writes
// (KillMode=mixed, Delegate=yes, Type=notify, NotifyAccess=all, SyslogIdentifier=%N,
// Environment=PODMAN_SYSTEMD_UNIT=%n, ExecStop/ExecStopPost `podman rm -v -f -i`,
// RequiresMountsFor=, the network-online dependencies). Keys in Extra are ignored:
// see Unsupported.
//
// Errors wrap ErrUnitContext where the generator needs more than this unit: an unset
// ContainerName (it would use systemd-%N), Image, Volume or Mount sources and Network
// names that name other Quadlet units (.image, .build, .volume, .network, .container),
// relative paths (resolved against the unit file's directory). ErrInvalid when the
// container cannot be rendered or the generator would refuse it.
func (c *Container) PodmanRunArgs() ([]string, error) {
	if _, err := c.File(); err != nil {
		return nil, err
	}
	switch {
	case c.Image == "":
		return nil, fmt.Errorf("%w: no Image (Rootfs is not modelled)", ErrInvalid)
	case strings.HasSuffix(c.Image, ".image") || strings.HasSuffix(c.Image, ".build"):
		return nil, fmt.Errorf("%w: Image %s names another Quadlet unit", ErrUnitContext, clip(c.Image))
	case c.ContainerName == "":
		return nil, fmt.Errorf("%w: no ContainerName; the generator would name the container systemd-%%N", ErrUnitContext)
	}
	args := []string{"--name", c.ContainerName}
	add := func(a ...string) { args = append(args, a...) }
	addBool := func(flag string, b *bool) {
		switch {
		case b == nil:
		case *b:
			add(flag)
		default:
			add(flag + "=false")
		}
	}

	for _, kv := range [][2]string{
		{"--tz", c.Timezone}, {"--pids-limit", c.PidsLimit}, {"--shm-size", c.ShmSize},
		{"--entrypoint", c.Entrypoint}, {"--workdir", c.WorkingDir}, {"--hostname", c.HostName},
		{"--stop-signal", c.StopSignal}, {"--stop-timeout", c.StopTimeout}, {"--pull", c.Pull},
	} {
		if kv[1] != "" {
			add(kv[0], kv[1])
		}
	}
	for _, l := range []struct {
		flag   string
		values []string
	}{{"--ulimit", c.Ulimit}, {"--group-add", c.GroupAdd}, {"--tmpfs", c.Tmpfs}} {
		for _, v := range l.values {
			add(l.flag, v)
		}
	}
	addBool("--init", c.RunInit)
	addBool("--read-only-tmpfs", c.ReadOnlyTmpfs)
	for _, n := range c.Network {
		if name, _, _ := strings.Cut(n, ":"); strings.HasSuffix(name, ".network") || strings.HasSuffix(name, ".container") {
			return nil, fmt.Errorf("%w: Network %s names another Quadlet unit", ErrUnitContext, clip(n))
		}
		add("--network", n)
	}
	if isTrue(c.NoNewPrivileges) {
		add("--security-opt=no-new-privileges")
	}
	if isTrue(c.SecurityLabelDisable) {
		add("--security-opt", "label=disable")
	}
	for _, capability := range c.DropCapability {
		add("--cap-drop", strings.ToLower(capability))
	}
	for _, capability := range c.AddCapability {
		add("--cap-add", strings.ToLower(capability))
	}
	addBool("--read-only", c.ReadOnly)
	if c.User != "" {
		user := c.User
		if c.Group != "" {
			user += ":" + c.Group
		}
		add("--user", user)
	}
	if c.UserNS != "" {
		add("--userns", c.UserNS)
	}
	for _, v := range c.Volume {
		source, dest, options := volumeParts(v)
		if err := checkSource(source, ".volume"); err != nil {
			return nil, fmt.Errorf("Volume %s: %w", clip(v), err)
		}
		add("-v", volumeWord(source, dest, options))
	}
	for _, kv := range []struct {
		flag string
		m    map[string]string
	}{{"--env", c.Environment}, {"--label", c.Label}, {"--annotation", c.Annotation}} {
		for _, k := range slices.Sorted(maps.Keys(kv.m)) {
			add(kv.flag, k+"="+kv.m[k])
		}
	}
	for _, p := range c.EnvironmentFile {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("%w: EnvironmentFile %s is relative to the unit file's directory", ErrUnitContext, clip(p))
		}
		add("--env-file", p)
	}
	for _, m := range c.Mount {
		spec, err := mountArg(m)
		if err != nil {
			return nil, fmt.Errorf("Mount %s: %w", clip(m), err)
		}
		add("--mount", spec)
	}
	if c.Memory != "" {
		add(memoryFlag + c.Memory)
	}
	add(c.PodmanArgs...)
	add(c.Image)
	add(c.Exec...)
	return args, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// checkSource follows handleStorageSource: a source starting with '.' is made absolute
// against the unit file's directory, one ending in a unit suffix names another unit.
func checkSource(source string, suffixes ...string) error {
	if strings.HasPrefix(source, ".") {
		return fmt.Errorf("%w: source %s is relative to the unit file's directory", ErrUnitContext, clip(source))
	}
	for _, s := range suffixes {
		if strings.HasSuffix(source, s) {
			return fmt.Errorf("%w: source %s names another Quadlet unit", ErrUnitContext, clip(source))
		}
	}
	return nil
}

// mountArg is the --mount argument the generator makes of a Mount word
// (resolveContainerMountParams, with FindMountType of pkg/specgenutilexternal): the
// word is read as one CSV record; for bind, volume, glob and image mounts the type goes
// first and the source is written source=..., other types are passed on unchanged.
func mountArg(m string) (string, error) {
	records, err := csv.NewReader(strings.NewReader(m)).ReadAll()
	if err != nil {
		return "", fmt.Errorf("%w: not one CSV record: %v", ErrInvalid, err)
	}
	if len(records) != 1 {
		return "", fmt.Errorf("%w: not one CSV record", ErrInvalid)
	}
	var typ string
	var tokens []string
	found := false
	for _, s := range records[0] {
		kv := strings.Split(s, "=")
		if found || len(kv) != 2 || kv[0] != "type" {
			tokens = append(tokens, s)
			continue
		}
		typ, found = kv[1], true
	}
	if !found {
		return "", fmt.Errorf("%w: no type=... option", ErrInvalid)
	}
	if typ != "bind" && typ != "volume" && typ != "glob" && typ != "image" {
		return m, nil
	}
	at, source := -1, ""
	for i, t := range tokens {
		k, v, hasValue := strings.Cut(t, "=")
		if k != "source" && k != "src" {
			continue
		}
		if !hasValue {
			return "", fmt.Errorf("%w: %s without a value", ErrInvalid, k)
		}
		at, source = i, v
	}
	if source == "" {
		return "", fmt.Errorf("%w: a %s mount needs a non-empty source= (Podman 5.4's generator crashes without it)", ErrInvalid, typ)
	}
	if err := checkSource(source, ".volume", ".image"); err != nil {
		return "", err
	}
	tokens[at] = "source=" + source
	return csvRecord(append([]string{"type=" + typ}, tokens...)), nil
}

// csvRecord writes one CSV record without its line end (convertToCSV).
func csvRecord(fields []string) string {
	var b strings.Builder
	w := csv.NewWriter(&b)
	_ = w.Write(fields) // writing to a strings.Builder cannot fail
	w.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

// BindMount returns the Mount= value for a bind mount of the host path source at
// destination in the container, read-only or read-write, in the form the generator
// passes on unchanged.
func BindMount(source, destination string, readOnly bool) string {
	mode := "rw"
	if readOnly {
		mode = "ro"
	}
	return csvRecord([]string{"type=bind", "source=" + source, "destination=" + destination, mode})
}

// Capabilities returns caps as the words of DropCapability= or AddCapability=: lower-case,
// as the generator passes them to podman run.
func Capabilities(caps []string) []string {
	out := make([]string, len(caps))
	for i, c := range caps {
		out[i] = strings.ToLower(c)
	}
	return out
}

// checkMount refuses a Mount value the generator refuses (a reference to another unit
// is the generator's business, not an error here).
func checkMount(m string) error {
	if _, err := mountArg(m); err != nil && !errors.Is(err, ErrUnitContext) {
		return err
	}
	return nil
}

// checkNetwork refuses what addNetworks refuses: options after a .container network.
func checkNetwork(n string) error {
	if name, _, found := strings.Cut(n, ":"); found && strings.HasSuffix(name, ".container") {
		return fmt.Errorf("%w: no options allowed when joining the network of %s", ErrInvalid, clip(name))
	}
	return nil
}
