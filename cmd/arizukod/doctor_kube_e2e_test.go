package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/internal/enginetest"
)

// TestDoctorCluster: doctor's cluster check on the test host's cluster passes with the
// engine's permissions, the RuntimeClass and a turn's Pod accepted, naming the gaps; with
// a RuntimeClass the cluster lacks, or no pod_pids_limit, it fails saying why and what
// fixes it.
func TestDoctorCluster(t *testing.T) {
	t.Setenv("ARIZUKO_MODE", "system")
	k := enginetest.KubeCluster(t)
	for _, tc := range []struct {
		name, conf string
		ok         bool
		want       []string
	}{
		{"ready", "pod_pids_limit = 1024\n[limits]\npids = 1024\n", true,
			[]string{"the account may do all the engine does", "RuntimeClass " + k.NoNetworkClass, "accepted in namespace arizuko (dry run)", "node " + k.Node + ":", "rlimits", "steering",
				"1 of 101 nodes take a turn's Pod (no node_selector or tolerations in [kubernetes])"}},
		{"kwok nodes", "pod_pids_limit = 1024\nnode_selector = { type = \"kwok\" }\ntolerations = [\"kwok.x-k8s.io/node=fake:NoSchedule\"]\n[limits]\npids = 1024\n", true,
			[]string{"100 of 101 nodes take a turn's Pod ([kubernetes] node_selector and tolerations)"}},
		{"no node takes", "pod_pids_limit = 1024\nnode_selector = { type = \"kwok\" }\n[limits]\npids = 1024\n", false,
			[]string{"no node of 101 takes a turn's Pod", "Pending, until its timeout", "node_selector and tolerations to the labels and taints"}},
		{"no class", "no_network_class = \"no-such-class\"\npod_pids_limit = 1024\n[limits]\npids = 1024\n", false,
			[]string{`RuntimeClass "no-such-class" of network none is missing`, "fix: apply contrib/kubernetes"}},
		{"pids above the turn's", "pod_pids_limit = 1024\n", false, []string{"a turn's Pod cannot be made", "up to 1024 pids", "more than the 512"}},
		{"pids unknown", "", true, []string{"not declared in [kubernetes] pod_pids_limit: turns are refused unless allow_unlimited"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := filepath.Join(t.TempDir(), "arizukod.toml")
			writeFile(t, conf, fmt.Sprintf("engine = \"kubernetes\"\ndata_dir = %q\n[kubernetes]\nkubeconfig = %q\n%s", t.TempDir(), k.Kubeconfig, tc.conf))
			stdout, stderr, _ := runCLI(t, []string{"doctor", "--config", conf, "--socket", filepath.Join(t.TempDir(), "none.sock"), "--check", "cluster"})
			if strings.HasPrefix(stdout, "ok    cluster") != tc.ok {
				t.Errorf("doctor --check cluster:\n%s%s\nwant ok=%v", stdout, stderr, tc.ok)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("doctor --check cluster lacks %q:\n%s%s", w, stdout, stderr)
				}
			}
		})
	}
}
