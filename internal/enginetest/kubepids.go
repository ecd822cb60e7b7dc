package enginetest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// PodPidsLimit is the real node's podPidsLimit, read from its kubelet's configuration file
// (the API server does not proxy to a node at a loopback address, so configz is out of
// reach): what a daemon on the cluster declares as [kubernetes] pod_pids_limit.
func (k Kube) PodPidsLimit(t testing.TB) int64 {
	t.Helper()
	file := filepath.Join(os.Getenv("ARIZUKO_TESTHOST_DIR"), "kube", "config", "kubelet.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the kubelet's configuration: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "podPidsLimit:"); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n > 0 {
				return n
			}
		}
	}
	t.Fatalf("%s sets no podPidsLimit", file)
	return 0
}
