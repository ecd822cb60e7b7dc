package kube

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

// placement sets where the Pod may run: the nodeSelector and the tolerations of Config,
// which keep turns on nodes dedicated to them (labelled and tainted so), and a soft spread
// of the turns over the nodes by hostname. Without it, turns that ask little of large
// nodes tie in the scheduler's scores and pile onto one node (813 of 1,000 on kwok's);
// ScheduleAnyway keeps it a preference, so a turn is never left Pending for it.
func (e *Engine) placement(pod *corev1.Pod) error {
	pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       corev1.LabelHostname,
		WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{ManagedLabel: ManagedValue}},
	}}
	if err := CheckNodeSelector(e.cfg.NodeSelector); err != nil {
		return err
	}
	if len(e.cfg.NodeSelector) > 0 {
		pod.Spec.NodeSelector = maps.Clone(e.cfg.NodeSelector)
	}
	for _, s := range e.cfg.Tolerations {
		t, err := ParseToleration(s)
		if err != nil {
			return err
		}
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
	}
	return nil
}

// CheckNodeSelector is nil when every key of sel is a label key and every value a label
// value.
func CheckNodeSelector(sel map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("node selector key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(sel[k]); len(errs) > 0 {
			return fmt.Errorf("node selector %s = %q: %s", k, sel[k], strings.Join(errs, "; "))
		}
	}
	return nil
}

// ParseToleration reads a toleration as `kubectl taint` writes the taint it tolerates:
// "key=value:effect" tolerates exactly that taint, "key:effect" the key with any value,
// and without ":effect" every effect of it.
func ParseToleration(s string) (corev1.Toleration, error) {
	spec, effect, hasEffect := strings.Cut(s, ":")
	key, value, hasValue := strings.Cut(spec, "=")
	t := corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return t, fmt.Errorf("toleration %q: want key[=value][:effect], and key %q is no label key: %s", s, key, strings.Join(errs, "; "))
	}
	if hasValue {
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return t, fmt.Errorf("toleration %q: value %q: %s", s, value, strings.Join(errs, "; "))
		}
		t.Operator, t.Value = corev1.TolerationOpEqual, value
	}
	if hasEffect {
		switch e := corev1.TaintEffect(effect); e {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			t.Effect = e
		default:
			return t, fmt.Errorf("toleration %q: effect %q: want NoSchedule, PreferNoSchedule or NoExecute", s, effect)
		}
	}
	return t, nil
}

// takers counts the nodes a turn's Pod may be placed on: those whose labels match the node
// selector and whose NoSchedule and NoExecute taints the tolerations all tolerate.
// Whether they have room is the scheduler's to say.
func (e *Engine) takers(nodes []corev1.Node) (int, error) {
	var tols []corev1.Toleration
	for _, s := range e.cfg.Tolerations {
		t, err := ParseToleration(s)
		if err != nil {
			return 0, err
		}
		tols = append(tols, t)
	}
	n := 0
	for _, node := range nodes {
		if node.Spec.Unschedulable || !labels.SelectorFromSet(e.cfg.NodeSelector).Matches(labels.Set(node.Labels)) {
			continue
		}
		tolerated := true
		for _, taint := range node.Spec.Taints {
			if taint.Effect != corev1.TaintEffectPreferNoSchedule &&
				!slices.ContainsFunc(tols, func(t corev1.Toleration) bool { return t.ToleratesTaint(klog.Background(), &taint, false) }) {
				tolerated = false
			}
		}
		if tolerated {
			n++
		}
	}
	return n, nil
}

// placementLine is what doctor says of where turns may run, or the error when no node
// takes them: every turn would wait, Pending, until its timeout.
func (e *Engine) placementLine(nodes []corev1.Node) (string, error) {
	n, err := e.takers(nodes)
	where := "[kubernetes] node_selector and tolerations"
	if len(e.cfg.NodeSelector) == 0 && len(e.cfg.Tolerations) == 0 {
		where = "no node_selector or tolerations in [kubernetes]"
	}
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %w", where, err)
	case n == 0:
		return "", fmt.Errorf("no node of %d takes a turn's Pod (%s: its labels must match, its NoSchedule and NoExecute taints be tolerated): every turn would wait, Pending, until its timeout", len(nodes), where)
	}
	return fmt.Sprintf("%d of %d nodes take a turn's Pod (%s)", n, len(nodes), where), nil
}
