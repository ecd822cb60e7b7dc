package kube

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

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
