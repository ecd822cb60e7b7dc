package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// checkLimits says whether the engine applies the memory, CPU and pids limits, and, when
// it cannot, whether turns run anyway (allow_unlimited = true) or are refused.
func checkLimits(ctx context.Context, o *doctorOpts) (string, error) {
	_, info, err := o.engine(ctx)
	if err != nil {
		return "", fmt.Errorf("no engine to ask: %w", err)
	}
	if info.NoLimits == "" {
		return fmt.Sprintf("%s applies the memory, CPU and pids limits", info), nil
	}
	cfg, err := o.config()
	if err != nil {
		return "", err
	}
	if err := info.CheckLimits(cfg.Limits.AllowUnlimited); err != nil {
		return "", fmt.Errorf("turns are refused: %w", err)
	}
	return fmt.Sprintf("not applied on %s: %s; turns run without them (allow_unlimited = true in %s)", info, info.NoLimits, cfg.Source), nil
}

// Where the host keeps subordinate ids and cgroups; tests point them at a fixture.
var (
	subuidFile, subgidFile = "/etc/subuid", "/etc/subgid"
	cgroupRoot             = "/sys/fs/cgroup"
)

// minSubids is the range a rootless engine needs to map an image's users (Podman's default).
const minSubids = 65536

// engineUser is the user whose engine runs the turns: the owner of a rootless engine's
// socket, or nil for a rootful engine. Without an engine to ask, a user other than root
// is taken to run rootless Podman; root cannot tell.
func engineUser(ctx context.Context, o *doctorOpts) (*user.User, error) {
	uid := os.Geteuid()
	_, info, err := o.engine(ctx)
	switch {
	case err == nil && !info.Rootless:
		return nil, nil
	case err == nil:
		var st syscall.Stat_t
		if syscall.Stat(strings.TrimPrefix(info.Socket, "unix://"), &st) == nil {
			uid = int(st.Uid)
		}
	case uid == 0:
		return nil, fmt.Errorf("no engine to ask whose it is: %w", err)
	}
	if uid == 0 {
		return nil, nil
	}
	return user.LookupId(strconv.Itoa(uid))
}

// checkSubids says whether the rootless engine's user has the subordinate uid and gid
// ranges it maps an image's users into.
func checkSubids(ctx context.Context, o *doctorOpts) (string, error) {
	u, err := engineUser(ctx, o)
	if err != nil {
		return "", err
	}
	if u == nil {
		return "not needed: the engine runs as root", nil
	}
	var got []string
	for _, file := range []string{subuidFile, subgidFile} {
		n, err := subidCount(file, u)
		if err != nil {
			return "", err
		}
		if n < minSubids {
			return "", fmt.Errorf("%s gives %s (uid %s) %d subordinate ids, fewer than the %d rootless Podman maps an image's users into", file, u.Username, u.Uid, n, minSubids)
		}
		got = append(got, fmt.Sprintf("%s %d", filepath.Base(file), n))
	}
	return fmt.Sprintf("%s (uid %s) has %s", u.Username, u.Uid, strings.Join(got, ", ")), nil
}

// subidCount adds up the ranges file (subuid(5) format) gives u, by name or uid.
func subidCount(file string, u *user.User) (int, error) {
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	total := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(fields) != 3 || (fields[0] != u.Username && fields[0] != u.Uid) {
			continue
		}
		if n, err := strconv.Atoi(fields[2]); err == nil && n > 0 {
			total += n
		}
	}
	return total, sc.Err()
}

// limitControllers are the cgroup controllers the memory, CPU and pids limits need.
var limitControllers = []string{"memory", "pids", "cpu"}

// checkCgroups says whether the cgroup the engine puts containers under has the
// controllers the limits need: on cgroups v2, the root's for a rootful engine, the
// delegated ones of the user's systemd service for a rootless one.
func checkCgroups(ctx context.Context, o *doctorOpts) (string, error) {
	u, err := engineUser(ctx, o)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err != nil {
		if u == nil {
			return "cgroups v1: a rootful engine applies the limits there", nil
		}
		return "", fmt.Errorf("cgroups v1 (no %s/cgroup.controllers): a rootless engine cannot apply the memory, CPU and pids limits; boot with systemd.unified_cgroup_hierarchy=1", cgroupRoot)
	}
	dir, who := cgroupRoot, "the root cgroup (rootful engine)"
	if u != nil {
		dir = filepath.Join(cgroupRoot, "user.slice", "user-"+u.Uid+".slice", "user@"+u.Uid+".service")
		who = fmt.Sprintf("%s's systemd service (rootless engine)", u.Username)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "", fmt.Errorf("no cgroup delegated to %s: %w", who, err)
	}
	have := strings.Fields(string(b))
	var missing []string
	for _, c := range limitControllers {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s lacks the %s controller(s) (it has: %s): the limits cannot apply there", who, strings.Join(missing, ", "), strings.Join(have, " "))
	}
	return fmt.Sprintf("cgroups v2; %s has the %s controllers", who, strings.Join(limitControllers, ", ")), nil
}
