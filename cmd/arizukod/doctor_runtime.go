package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arizuko/arizukod/runtime/engine"
)

// checkRuntimes says whether the engine runs a container under each OCI runtime the
// configuration names (limits.runtime and limits.allowed_runtimes): Docker lists its
// runtimes, Podman does not, so a throw-away container of the agent image is created and
// started under each, network none like a turn's, and removed. A runtime that is not
// registered, or that cannot start a container here (gVisor without its own
// --network=none, rootless limits), fails, naming the runtime, the engine and the fix.
func checkRuntimes(ctx context.Context, o *doctorOpts) (string, error) {
	eng, info, err := o.engine(ctx)
	if err != nil {
		return "", fmt.Errorf("no engine to ask: %w", err)
	}
	cfg, err := o.config()
	if err != nil {
		return "", err
	}
	runtimes := slices.Clone(cfg.Limits.AllowedRuntimes)
	if rt := cfg.Limits.Runtime; rt != "" && !slices.Contains(runtimes, rt) {
		runtimes = append(runtimes, rt)
	}
	if len(runtimes) == 0 {
		return fmt.Sprintf("the engine's default on %s; no other allowed (limits.allowed_runtimes)", info), nil
	}
	image := cfg.Image
	if o.daemon != nil && o.daemon.Image != "" {
		image = o.daemon.Image
	}
	var bad []error
	for _, rt := range runtimes {
		if err := tryRuntime(ctx, eng, info, image, rt); err != nil {
			bad = append(bad, err)
		}
	}
	if len(bad) > 0 {
		return "", errors.Join(bad...)
	}
	def := "the engine's default"
	if cfg.Limits.Runtime != "" {
		def = cfg.Limits.Runtime
	}
	return fmt.Sprintf("%s runs containers under %s (default: %s)", info, strings.Join(runtimes, ", "), def), nil
}

// tryRuntime creates and starts one container of image under rt, and removes it.
func tryRuntime(ctx context.Context, eng engine.Engine, info engine.Info, image, rt string) error {
	if err := info.CheckRuntime(rt); err != nil {
		return err
	}
	if ok, err := eng.ImageExists(ctx, image); err != nil || !ok {
		return fmt.Errorf("runtime %s: not tried: the agent image %s is not on the engine (the image check says more)", rt, image)
	}
	s := engine.Spec{
		Name: "arizuko-doctor-" + rt + "-" + strconv.Itoa(os.Getpid()), Image: image, Network: engine.NetworkNone,
		Labels:  map[string]string{engine.LabelRole: "doctor"},
		Runtime: rt, MemoryBytes: 64 << 20, PidsLimit: 64, Rlimits: engine.DefaultRlimits(),
		Tmpfs: []engine.Tmpfs{{Target: "/tmp", Options: "rw,nosuid,nodev,size=1m"}},
	}
	id, err := eng.Create(ctx, s)
	if err != nil {
		return fmt.Errorf("runtime %s: %w", rt, info.CreateError(s, err))
	}
	defer eng.Remove(context.WithoutCancel(ctx), id)
	if err := eng.Start(ctx, id); err != nil {
		return fmt.Errorf("runtime %s: %s cannot start a container under it: %v; %s", rt, info, err, startFix(info, rt))
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := eng.Wait(wctx, id)
	if err == nil && st.Error != "" {
		return fmt.Errorf("runtime %s: the container under it failed: %s; %s", rt, st.Error, startFix(info, rt))
	}
	return nil
}

// startFix is what makes a registered runtime start containers.
func startFix(info engine.Info, rt string) string {
	if rt != engine.RuntimeRunsc {
		return "see the runtime's own documentation"
	}
	s := "register gVisor through a wrapper that passes --network=none --host-uds=all (README, gVisor)"
	if info.Rootless {
		s += "; rootless Podman on a cgroups v1 host cannot run gVisor: use a rootful engine for its groups"
	}
	return s
}
