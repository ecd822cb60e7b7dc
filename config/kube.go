package config

import (
	"errors"
	"fmt"
	"strings"
)

// KubeConf is the cluster of engine = "kubernetes": where the daemon finds it and what the
// turns' Pods get there.
type KubeConf struct {
	// Kubeconfig is a kubeconfig file; "" is the in-cluster configuration (the daemon runs
	// in a Pod of the cluster, with its service account).
	Kubeconfig string
	// Namespace holds every Pod of the daemon.
	Namespace string
	// NoNetworkClass is the RuntimeClass of network none: Pods with loopback and no route
	// out. Turns of network none are refused while the cluster lacks it.
	NoNetworkClass string
	// NodeIPCDir is where the node agent (arizukod node) serves the turns' sockets on every
	// node; "" mounts the daemon's own IPC directories: one node, the daemon's.
	NodeIPCDir string
	// PodPidsLimit is the kubelets' podPidsLimit, what every Pod gets on the nodes; 0
	// (unknown) refuses turns as an engine without limits does.
	PodPidsLimit int64
	// RelayListen is where the nodes' relayed sockets come in (noderelay); "" for none.
	RelayListen string
	// NodeSelector and Tolerations are every turn Pod's: the nodes dedicated to turns,
	// by their labels and the taints they carry ("key[=value][:effect]").
	NodeSelector map[string]string
	Tolerations  []string
}

// Defaults of [kubernetes].
const (
	DefaultKubeNamespace      = "arizuko"
	DefaultKubeNoNetworkClass = "arizuko-nonet"
)

func setKubeNamespace(c *Config, s string) error {
	if !dnsLabel(s) {
		return fmt.Errorf("%q: a namespace is a DNS label (a-z, 0-9, '-', starting and ending with a letter or digit, at most 63)", s)
	}
	c.Kubernetes.Namespace = s
	return nil
}

func setKubeNoNetworkClass(c *Config, s string) error {
	if s == "" {
		return errors.New(`must not be empty: turns of network none need a RuntimeClass with no route out (contrib/kubernetes); the default is "` + DefaultKubeNoNetworkClass + `"`)
	}
	if len(s) > 253 || !allSplit(s, ".", dnsLabel) {
		return fmt.Errorf("%q: a RuntimeClass name is a DNS subdomain (DNS labels joined by '.', at most 253)", s)
	}
	c.Kubernetes.NoNetworkClass = s
	return nil
}

// dnsLabel says whether s is an RFC 1123 label: a-z, 0-9 and '-', starting and ending with
// a letter or digit, at most 63.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= 'a' && s[i] <= 'z' || s[i] >= '0' && s[i] <= '9' || s[i] == '-') {
			return false
		}
	}
	return true
}

func allSplit(s, sep string, ok func(string) bool) bool {
	for part := range strings.SplitSeq(s, sep) {
		if !ok(part) {
			return false
		}
	}
	return true
}
