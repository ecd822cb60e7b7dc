package kube

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arizuko/arizukod/runtime/engine"
)

// TestPodPlacement: the node selector and the tolerations of the configuration are every
// Pod's, so turns run on the nodes dedicated to them; without them a Pod has none.
func TestPodPlacement(t *testing.T) {
	e, _ := testEngine(t, Config{})
	p, err := e.PodFor(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeSelector != nil || p.Spec.Tolerations != nil {
		t.Errorf("unconfigured: nodeSelector %v, tolerations %v; want none", p.Spec.NodeSelector, p.Spec.Tolerations)
	}
	spread := p.Spec.TopologySpreadConstraints
	if len(spread) != 1 || spread[0].TopologyKey != corev1.LabelHostname || spread[0].WhenUnsatisfiable != corev1.ScheduleAnyway ||
		spread[0].MaxSkew != 1 || spread[0].LabelSelector == nil || spread[0].LabelSelector.MatchLabels[ManagedLabel] != ManagedValue {
		t.Errorf("topology spread %+v: want one soft spread of the engine's Pods by hostname", spread)
	}
	sel := map[string]string{"type": "kwok", "arizuko.io/turns": "true"}
	e, _ = testEngine(t, Config{NodeSelector: sel,
		Tolerations: []string{"kwok.x-k8s.io/node=fake:NoSchedule", "arizuko.io/turns:NoExecute", "arizuko.io/dedicated", "x=y"}})
	if p, err = e.PodFor(testSpec(t)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Spec.NodeSelector, sel) {
		t.Errorf("nodeSelector %v, want %v", p.Spec.NodeSelector, sel)
	}
	want := []corev1.Toleration{
		{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpEqual, Value: "fake", Effect: corev1.TaintEffectNoSchedule},
		{Key: "arizuko.io/turns", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: "arizuko.io/dedicated", Operator: corev1.TolerationOpExists},
		{Key: "x", Operator: corev1.TolerationOpEqual, Value: "y"},
	}
	if !reflect.DeepEqual(p.Spec.Tolerations, want) {
		t.Errorf("tolerations %+v,\nwant %+v", p.Spec.Tolerations, want)
	}
	sel["type"] = "changed"
	if p.Spec.NodeSelector["type"] != "kwok" {
		t.Error("the Pod shares the configuration's map")
	}
}

// TestPlacementRefusals: a selector or a toleration Kubernetes would refuse is refused
// before the cluster is asked, naming it.
func TestPlacementRefusals(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{NodeSelector: map[string]string{"bad key!": "x"}}, `node selector key "bad key!"`},
		{Config{NodeSelector: map[string]string{"type": "a b"}}, `node selector type = "a b"`},
		{Config{Tolerations: []string{""}}, `toleration "": want key[=value][:effect]`},
		{Config{Tolerations: []string{"k=v:Sometimes"}}, `effect "Sometimes"`},
		{Config{Tolerations: []string{"k=a b"}}, `value "a b"`},
		{Config{Tolerations: []string{"=v:NoSchedule"}}, `key ""`},
	} {
		e, _ := testEngine(t, tc.cfg)
		_, err := e.PodFor(testSpec(t))
		if !errors.Is(err, engine.ErrCreate) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want ErrCreate naming %q", tc.cfg, err, tc.want)
		}
	}
}

// TestPlacementDoctor: doctor counts the nodes a turn's Pod may land on, and a
// configuration that no node takes is an error, not a turn Pending until its timeout.
func TestPlacementDoctor(t *testing.T) {
	node := func(name string, labels map[string]string, unschedulable bool, taints ...corev1.Taint) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Unschedulable: unschedulable, Taints: taints}}
	}
	fake := corev1.Taint{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}
	nodes := []corev1.Node{
		node("real", map[string]string{"kubernetes.io/hostname": "real"}, false),
		node("kwok-0", map[string]string{"type": "kwok"}, false, fake),
		node("kwok-1", map[string]string{"type": "kwok"}, false, fake, corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}),
		node("kwok-2", map[string]string{"type": "kwok"}, true, fake),
		node("kwok-3", map[string]string{"type": "kwok"}, false, fake, corev1.Taint{Key: "gone", Effect: corev1.TaintEffectNoExecute}),
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "1 of 5 nodes take a turn's Pod (no node_selector or tolerations in [kubernetes])"},
		{Config{NodeSelector: map[string]string{"type": "kwok"}, Tolerations: []string{"kwok.x-k8s.io/node=fake:NoSchedule"}},
			"2 of 5 nodes take a turn's Pod ([kubernetes] node_selector and tolerations)"},
		{Config{NodeSelector: map[string]string{"type": "kwok"}, Tolerations: []string{"kwok.x-k8s.io/node", "gone:NoExecute"}},
			"3 of 5 nodes take a turn's Pod"},
		{Config{NodeSelector: map[string]string{"type": "kwok"}}, "no node of 5 takes a turn's Pod"},
		{Config{NodeSelector: map[string]string{"type": "gpu"}}, "no node of 5 takes a turn's Pod"},
		{Config{Tolerations: []string{"kwok.x-k8s.io/node=other:NoSchedule"}}, "1 of 5 nodes"},
	} {
		e, _ := testEngine(t, tc.cfg)
		line, err := e.placementLine(nodes)
		if got := line + fmt.Sprint(err); !strings.Contains(got, tc.want) {
			t.Errorf("%+v: %q, want %q", tc.cfg, got, tc.want)
		}
	}
}
