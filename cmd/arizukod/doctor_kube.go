package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/runtime/kube"
	"github.com/arizuko/arizukod/runtime/runner"
)

// checkKubernetes asks the cluster of engine = "kubernetes" what a turn needs of it: the
// engine's permissions, the RuntimeClass of network none, a turn's Pod (without mounts)
// made with dryRun, the nodes (the kubelet's podPidsLimit where it can be read, the
// container runtime), and names the gaps between a Pod and a Podman container. On any
// other engine there is nothing to check.
func checkKubernetes(ctx context.Context, o *doctorOpts) (string, error) {
	eng, info, err := o.engine(ctx)
	if err != nil {
		return "", fmt.Errorf("no engine to ask: %w", err)
	}
	k, ok := eng.(*kube.Engine)
	if !ok {
		return fmt.Sprintf("the engine is %s, not a cluster (engine = \"kubernetes\" and [kubernetes] of arizukod.toml run turns on one)", info), nil
	}
	cfg, err := o.config()
	if err != nil {
		return "", err
	}
	t := runner.Turn{Folder: groupfolder.Folder("main"), Limits: cfg.Limits.Limits}
	name := fmt.Sprintf("arizuko-doctor-%d", time.Now().UnixMilli())
	spec := runner.AgentSpec(t, name, nil, cfg.RunTimeout, runner.AgentOptions{Image: cfg.Image, Instance: cfg.Instance, User: fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())})
	probe, err := k.PodFor(spec)
	if err != nil {
		return "", fmt.Errorf("a turn's Pod cannot be made: %w", err)
	}
	lines, err := k.Check(ctx, probe)
	if err != nil {
		return "", fmt.Errorf("%w\n%s", err, strings.Join(lines, "\n"))
	}
	return fmt.Sprintf("%s at %s\n%s", info, info.Socket, strings.Join(lines, "\n")), nil
}

// limitsFix says how the engine gets its limits: its cgroups, or on a cluster the nodes'
// podPidsLimit declared.
func limitsFix(o *doctorOpts) string {
	const unlimited = "or set allow_unlimited = true in [limits] of arizukod.toml to run turns without the memory, CPU and pids limits"
	if _, onCluster := o.eng.(*kube.Engine); onCluster {
		return "set podPidsLimit in the kubelets' configuration and pod_pids_limit in [kubernetes] of arizukod.toml to that number, at most limits.pids, " + unlimited
	}
	return "give the engine its cgroups (arizukod.toml(5), [limits]), " + unlimited
}
