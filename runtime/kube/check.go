package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Access is one permission the engine needs: a verb on a resource (with its subresource)
// of the core or another API group, in the engine's namespace unless cluster-wide.
type Access struct {
	Verb, Group, Resource, Subresource string
	Cluster                            bool
	Why                                string
}

func (a Access) String() string {
	r := a.Resource
	if a.Subresource != "" {
		r += "/" + a.Subresource
	}
	if a.Group != "" {
		r += "." + a.Group
	}
	return a.Verb + " " + r
}

// Needed are the permissions of the engine, the least it works with (contrib/kubernetes'
// Role and ClusterRole grant these).
var Needed = []Access{
	{Verb: "create", Resource: "pods", Why: "a Pod per turn"},
	{Verb: "get", Resource: "pods", Why: "inspect a turn's Pod"},
	{Verb: "list", Resource: "pods", Why: "find leftovers and adopt turns by label"},
	{Verb: "watch", Resource: "pods", Why: "wait for a Pod to run and to end"},
	{Verb: "patch", Resource: "pods", Why: "mark a Pod started and give it its deadline"},
	{Verb: "delete", Resource: "pods", Why: "stop and remove a Pod"},
	{Verb: "create", Resource: "pods", Subresource: "attach", Why: "the turn's stdin and stdout (SPDY, and the WebSocket upgrade's check)"},
	{Verb: "get", Resource: "pods", Subresource: "attach", Why: "the turn's stdin and stdout over WebSocket"},
	{Verb: "get", Resource: "pods", Subresource: "log", Why: "an adopted turn's output"},
	{Verb: "get", Group: "node.k8s.io", Resource: "runtimeclasses", Cluster: true, Why: "refuse network none without its RuntimeClass"},
	{Verb: "list", Resource: "nodes", Cluster: true, Why: "the images the nodes have"},
}

// Check is what doctor asks of the cluster: every permission of Needed (a
// SelfSubjectAccessReview each), the RuntimeClass of network none, a Pod of the engine
// made with dryRun (the namespace, admission and the Pod's validation), the nodes'
// podPidsLimit where the kubelet's configuration can be read (nodes/proxy, which the
// engine itself never needs), and the container runtime of each node. It returns what it
// found and the gaps between a Pod and a Podman container, line by line; the error joins
// every promise that cannot be kept.
func (e *Engine) Check(ctx context.Context, probe *corev1.Pod) ([]string, error) {
	var lines []string
	var bad []error
	var denied []string
	for _, a := range Needed {
		ok, err := e.allowed(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("kubernetes: ask whether this account may %s: %w", a, err)
		}
		if !ok {
			denied = append(denied, fmt.Sprintf("%s (%s)", a, a.Why))
		}
	}
	if len(denied) > 0 {
		bad = append(bad, fmt.Errorf("the account may not %s", strings.Join(denied, "; ")))
	} else {
		lines = append(lines, fmt.Sprintf("the account may do all the engine does (%d permissions)", len(Needed)))
	}
	rc, err := e.client.NodeV1().RuntimeClasses().Get(ctx, e.cfg.NoNetworkClass, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		bad = append(bad, fmt.Errorf("RuntimeClass %q of network none is missing: turns of network none are refused", e.cfg.NoNetworkClass))
	case err != nil:
		bad = append(bad, fmt.Errorf("RuntimeClass %q: %w", e.cfg.NoNetworkClass, err))
	default:
		lines = append(lines, fmt.Sprintf("network none is RuntimeClass %s (handler %s)", rc.Name, rc.Handler))
	}
	if probe != nil {
		if _, err := e.pods().Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			bad = append(bad, fmt.Errorf("a turn's Pod is refused in namespace %s: %w", e.cfg.Namespace, err))
		} else {
			lines = append(lines, fmt.Sprintf("a turn's Pod is accepted in namespace %s (dry run)", e.cfg.Namespace))
		}
	}
	nodes, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	listed := err == nil
	if err != nil {
		bad = append(bad, fmt.Errorf("list nodes: %w", err))
		nodes = &corev1.NodeList{}
	}
	if line, err := e.placementLine(nodes.Items); err != nil && listed {
		bad = append(bad, err)
	} else if listed {
		lines = append(lines, line)
	}
	proxy, _ := e.allowed(ctx, Access{Verb: "get", Resource: "nodes", Subresource: "proxy", Cluster: true})
	fake := 0
	for _, n := range nodes.Items {
		if _, ok := n.Annotations["kwok.x-k8s.io/node"]; ok {
			fake++
			continue
		}
		rt := n.Status.NodeInfo.ContainerRuntimeVersion
		line := fmt.Sprintf("node %s: kubelet %s, %s", n.Name, n.Status.NodeInfo.KubeletVersion, rt)
		if strings.HasPrefix(rt, "containerd://1.") {
			line += ": Pods share the node's user namespace (hostUsers: false needs containerd 2.0 or later)"
		}
		if proxy {
			pids, err := e.podPidsLimit(ctx, n.Name)
			switch {
			case err != nil:
				line += fmt.Sprintf("; podPidsLimit not read: %v", err)
			case e.cfg.PodPidsLimit > 0 && (pids <= 0 || pids > e.cfg.PodPidsLimit):
				bad = append(bad, fmt.Errorf("node %s gives a Pod %s pids (podPidsLimit), not the %d of [kubernetes] pod_pids_limit", n.Name, pidsWord(pids), e.cfg.PodPidsLimit))
			default:
				line += fmt.Sprintf("; podPidsLimit %s", pidsWord(pids))
			}
		}
		lines = append(lines, line)
	}
	if fake > 0 {
		lines = append(lines, fmt.Sprintf("%d fake (kwok) nodes not checked", fake))
	}
	if !proxy {
		lines = append(lines, "the nodes' podPidsLimit is not verified (reading the kubelet's configuration needs get nodes/proxy, which the engine does not): pod_pids_limit is taken as declared")
	}
	declared := "not declared in [kubernetes] pod_pids_limit: turns are refused unless allow_unlimited = true in [limits]"
	if e.cfg.PodPidsLimit > 0 {
		declared = fmt.Sprintf("declared %d", e.cfg.PodPidsLimit)
	}
	lines = append(lines,
		fmt.Sprintf("pids: one limit per Pod set per node (the kubelet's podPidsLimit, %s), not per container", declared),
		"rlimits: a Pod has no field for them: nofile and nproc are the container runtime's defaults (nproc is held by the pids limit)",
		"steering: Kubernetes has no signal API, so a steer (SIGUSR1) is refused while a turn runs",
		"the end of a turn is the end of its attach stream; the exit code of a complete answer reads as 0 (the kubelet's status comes ~2 s later)")
	return lines, errors.Join(bad...)
}

func pidsWord(n int64) string {
	if n <= 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// allowed asks the API server whether this account may do a.
func (e *Engine) allowed(ctx context.Context, a Access) (bool, error) {
	ra := &authv1.ResourceAttributes{Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource}
	if !a.Cluster {
		ra.Namespace = e.cfg.Namespace
	}
	r, err := e.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
		&authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

// podPidsLimit reads the kubelet's podPidsLimit from its configz, through the API
// server's node proxy.
func (e *Engine) podPidsLimit(ctx context.Context, node string) (int64, error) {
	b, err := e.client.CoreV1().RESTClient().Get().Resource("nodes").Name(node).SubResource("proxy").Suffix("configz").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	var cz struct {
		KubeletConfig struct {
			PodPidsLimit *int64 `json:"podPidsLimit"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(b, &cz); err != nil {
		return 0, fmt.Errorf("configz: %w", err)
	}
	if cz.KubeletConfig.PodPidsLimit == nil {
		return -1, nil
	}
	return *cz.KubeletConfig.PodPidsLimit, nil
}
