package kube

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/runtime/engine"
)

// The names of what the engine puts on its Pods.
const (
	// ContainerName is the one container of a turn's Pod.
	ContainerName = "agent"
	// ManagedLabel marks every Pod this engine made (value ManagedValue).
	ManagedLabel = "app.kubernetes.io/managed-by"
	ManagedValue = "arizukod"
	// LabelsAnnotation holds the Spec's labels exactly, as a JSON object: a label value
	// Kubernetes cannot hold (a folder such as main/research) is a digest in the Pod's
	// labels, and List confirms every match here.
	LabelsAnnotation = "io.arizuko.labels"
	// NameAnnotation is the Spec's name when the Pod's name differs from it.
	NameAnnotation = "io.arizuko.name"
	// IPCAnnotation names the IPC directory of the turn under Config.NodeIPCDir: the base
	// name of its source, where the node agent serves the turn's sockets.
	IPCAnnotation = "io.arizuko.ipc"
	// TimeoutAnnotation is the Spec's timeout, which Start turns into the Pod's
	// activeDeadlineSeconds.
	TimeoutAnnotation = "io.arizuko.timeout"
	// StartedAnnotation is set by Start, when the runner starts the turn: a running Pod
	// without it is one created (or prepared) and never started.
	StartedAnnotation = "io.arizuko.started"
)

// deadlineSlack is what the Pod's own deadline adds to the turn's timeout and grace: the
// runner stops a turn at its timeout, and the kubelet's deadline is the backstop for a
// daemon that is away then.
const deadlineSlack = 5 * time.Second

// PodFor is the Pod of s in the engine's namespace, without contacting the cluster. It
// refuses (wrapping engine.ErrCreate) what a Pod cannot promise: a network other than
// none and bridge, an OCI runtime by name, a pids limit below the nodes' declared
// podPidsLimit, a
// memory or CPU limit of zero, a mount source that is neither a directory nor a file.
func (e *Engine) PodFor(s engine.Spec) (*corev1.Pod, error) {
	refuse := func(format string, args ...any) (*corev1.Pod, error) {
		return nil, fmt.Errorf("%w: %s: %s", engine.ErrCreate, cmp.Or(s.Name, "a pod"), fmt.Sprintf(format, args...))
	}
	if s.Name == "" {
		return refuse("no name")
	}
	if s.Image == "" {
		return refuse("no image")
	}
	if s.Runtime != "" {
		return refuse("OCI runtime %q: a Pod gets its runtime from a RuntimeClass, which network none already names; use the engine's default runtime", s.Runtime)
	}
	if s.MemoryBytes <= 0 || s.NanoCPUs <= 0 {
		return refuse("memory and CPU limits are required (memory %d bytes, %d nano-CPUs)", s.MemoryBytes, s.NanoCPUs)
	}
	if err := e.checkPids(s.PidsLimit); err != nil {
		return refuse("%v", err)
	}
	h := engine.Hardened()
	if h.Pull != engine.PullNever || !h.ReadOnlyRoot || !h.NoNewPrivileges || h.EngineTmpfs {
		return refuse("the hardening asks for what this engine does not render: %+v", h)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        podName(s.Name),
			Namespace:   e.cfg.Namespace,
			Labels:      map[string]string{ManagedLabel: ManagedValue},
			Annotations: map[string]string{},
		},
	}
	if pod.Name != s.Name {
		pod.Annotations[NameAnnotation] = s.Name
	}
	exact, err := json.Marshal(s.Labels)
	if err != nil {
		return refuse("labels: %v", err)
	}
	pod.Annotations[LabelsAnnotation] = string(exact)
	for k, v := range s.Labels {
		if isLabelKey(k) && k != ManagedLabel {
			pod.Labels[k] = SafeLabelValue(v)
		}
	}
	if s.Timeout > 0 {
		pod.Annotations[TimeoutAnnotation] = s.Timeout.String()
	}
	grace := int64(e.cfg.StopGrace / time.Second)
	sec := &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: capabilities(h.CapDrop)},
		AllowPrivilegeEscalation: new(!h.NoNewPrivileges),
		ReadOnlyRootFilesystem:   new(h.ReadOnlyRoot),
		Privileged:               new(false),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if s.User != "" {
		uid, gid, err := parseUser(s.User)
		if err != nil {
			return refuse("user %q: %v", s.User, err)
		}
		sec.RunAsUser, sec.RunAsGroup = &uid, &gid
		// uid 0 is the daemon's own on a rootful engine, as on Podman: no capabilities,
		// no privilege escalation. Every other uid is held to non-root by the kubelet too.
		sec.RunAsNonRoot = new(uid != 0)
	} else {
		sec.RunAsNonRoot = new(true)
	}
	c := corev1.Container{
		Name:            ContainerName,
		Image:           s.Image,
		ImagePullPolicy: corev1.PullNever,
		Stdin:           s.Stdin,
		StdinOnce:       s.Stdin,
		WorkingDir:      s.WorkingDir,
		SecurityContext: sec,
		Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{
				corev1.ResourceMemory: *resource.NewQuantity(s.MemoryBytes, resource.BinarySI),
				corev1.ResourceCPU:    *resource.NewMilliQuantity(max(1, s.NanoCPUs/1e6), resource.DecimalSI),
			},
			// The memory a turn may use is reserved where it is placed; CPU is shared.
			Requests: corev1.ResourceList{
				corev1.ResourceMemory: *resource.NewQuantity(s.MemoryBytes, resource.BinarySI),
				corev1.ResourceCPU:    *resource.NewMilliQuantity(0, resource.DecimalSI),
			},
		},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
	var volumes []corev1.Volume
	for i, m := range s.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Target) {
			return refuse("mount %s -> %s: both paths must be absolute", m.Source, m.Target)
		}
		path := m.Source
		kind, err := hostPathType(m.Source)
		if err != nil {
			return refuse("mount %s -> %s: %v", m.Source, m.Target, err)
		}
		if m.Target == contract.IPCDir && e.cfg.NodeIPCDir != "" {
			base := filepath.Base(m.Source)
			path = filepath.Join(e.cfg.NodeIPCDir, base)
			pod.Annotations[IPCAnnotation] = base
			// The node agent binds the turn's sockets in it once it sees the Pod: the
			// kubelet makes it if the agent has not yet, and the agent dials late.
			kind = corev1.HostPathDirectoryOrCreate
		}
		name := "m" + strconv.Itoa(i)
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &kind}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: m.Target, ReadOnly: m.ReadOnly})
	}
	for i, t := range s.Tmpfs {
		size, err := tmpfsSize(t.Options)
		if err != nil {
			return refuse("tmpfs %s: %v", t.Target, err)
		}
		name := "t" + strconv.Itoa(i)
		ed := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
		if size > 0 {
			ed.SizeLimit = resource.NewQuantity(size, resource.BinarySI)
		}
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: ed}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: t.Target})
	}
	pod.Spec = corev1.PodSpec{
		Containers:                    []corev1.Container{c},
		Volumes:                       volumes,
		RestartPolicy:                 corev1.RestartPolicyNever,
		AutomountServiceAccountToken:  new(false),
		EnableServiceLinks:            new(false),
		TerminationGracePeriodSeconds: &grace,
		SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
	}
	if err := e.placement(pod); err != nil {
		return refuse("%v", err)
	}
	switch s.Network {
	case "", engine.NetworkNone:
		if e.cfg.NoNetworkClass == "" {
			return refuse("network none needs a RuntimeClass whose Pods have no route out ([kubernetes] no_network_class), and none is configured")
		}
		pod.Spec.RuntimeClassName = &e.cfg.NoNetworkClass
	case engine.NetworkBridge:
		// The cluster's Pod network.
	default:
		return refuse("network %q: a Pod has none (a RuntimeClass with no route out) or bridge (the cluster's Pod network)", s.Network)
	}
	return pod, nil
}

// checkPids is nil when the nodes' podPidsLimit keeps a Pod within limit, or is not known:
// then Info.NoLimits says so, and the runner refuses the turn unless the operator allowed
// turns without limits.
func (e *Engine) checkPids(limit int64) error {
	switch {
	case limit <= 0, e.cfg.PodPidsLimit <= 0:
		return nil
	case e.cfg.PodPidsLimit > limit:
		return fmt.Errorf("the nodes give a Pod up to %d pids ([kubernetes] pod_pids_limit, the kubelets' podPidsLimit), more than the %d this container may have: lower podPidsLimit on the nodes, or raise the pids limit", e.cfg.PodPidsLimit, limit)
	}
	return nil
}

// capabilities are the Hardening's capability names as Kubernetes spells them.
func capabilities(names []string) []corev1.Capability {
	out := make([]corev1.Capability, len(names))
	for i, n := range names {
		out[i] = corev1.Capability(strings.ToUpper(n))
	}
	return out
}

// parseUser reads "uid:gid" (the gid defaults to the uid).
func parseUser(s string) (int64, int64, error) {
	u, g, hasGroup := strings.Cut(s, ":")
	uid, err := strconv.ParseInt(u, 10, 64)
	if err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("want numeric uid:gid")
	}
	gid := uid
	if hasGroup {
		if gid, err = strconv.ParseInt(g, 10, 64); err != nil || gid < 0 {
			return 0, 0, fmt.Errorf("want numeric uid:gid")
		}
	}
	return uid, gid, nil
}

// hostPathType is Directory or File, as the source is now: the kubelet then refuses a
// source that changed kind or vanished, instead of making an empty directory there.
func hostPathType(source string) (corev1.HostPathType, error) {
	fi, err := os.Stat(source)
	if err != nil {
		return "", fmt.Errorf("source unusable: %w", err)
	}
	switch {
	case fi.IsDir():
		return corev1.HostPathDirectory, nil
	case fi.Mode().IsRegular():
		return corev1.HostPathFile, nil
	}
	return "", fmt.Errorf("source is neither a directory nor a regular file (%s)", fi.Mode().Type())
}

// tmpfsSize reads size= from tmpfs options ("rw,nosuid,nodev,size=256m,mode=1777"); 0
// when there is none.
func tmpfsSize(options string) (int64, error) {
	for o := range strings.SplitSeq(options, ",") {
		if v, ok := strings.CutPrefix(o, "size="); ok {
			n, err := engine.ParseMemory(v)
			if err != nil {
				return 0, fmt.Errorf("size: %w", err)
			}
			return n, nil
		}
	}
	return 0, nil
}

// SafeLabelValue is v when Kubernetes can hold it as a label value, else "h-" and a digest
// of it: selector-safe, and the same for the same value. List confirms a match by the
// exact value in LabelsAnnotation.
func SafeLabelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	return "h-" + digest(v, 20)
}

// podName is name when it is a Pod name Kubernetes accepts (a DNS label, so that the Pod's
// hostname is its name), else a DNS label made of it and a digest of it.
func podName(name string) string {
	if len(validation.IsDNS1123Label(name)) == 0 {
		return name
	}
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	if base == "" {
		base = "arizuko"
	}
	return base + "-" + digest(name, 6)
}

func digest(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:n])
}

// specLabels are the exact labels of a Pod this engine made.
func specLabels(p *corev1.Pod) map[string]string {
	var labels map[string]string
	if err := json.Unmarshal([]byte(p.Annotations[LabelsAnnotation]), &labels); err != nil || labels == nil {
		return maps.Clone(p.Labels)
	}
	return labels
}

// specName is the Spec's name of a Pod this engine made.
func specName(p *corev1.Pod) string {
	if n := p.Annotations[NameAnnotation]; n != "" {
		return n
	}
	return p.Name
}

// matches says whether p carries every one of labels exactly.
func matches(p *corev1.Pod, labels map[string]string) bool {
	have := specLabels(p)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if v, ok := have[k]; !ok || v != labels[k] {
			return false
		}
	}
	return true
}
