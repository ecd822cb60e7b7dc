package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// setKubeNodeSelector takes a table of node labels and their values: the nodes turns run
// on.
func setKubeNodeSelector(c *Config, v any) error {
	table, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("want a table of node labels like { \"arizuko.io/turns\" = \"true\" }, not %s", typeName(v))
	}
	sel := make(map[string]string, len(table))
	for _, k := range slices.Sorted(maps.Keys(table)) {
		s, ok := table[k].(string)
		if !ok {
			return fmt.Errorf("%s: want a string, not %s", k, typeName(table[k]))
		}
		if err := labelKey(k); err != nil {
			return err
		}
		if errs := validation.IsValidLabelValue(s); len(errs) > 0 {
			return fmt.Errorf("%s = %q: %s", k, s, strings.Join(errs, "; "))
		}
		sel[k] = s
	}
	c.Kubernetes.NodeSelector = nil
	if len(sel) > 0 {
		c.Kubernetes.NodeSelector = sel
	}
	return nil
}

// setKubeTolerations takes the taints turns tolerate, each "key[=value][:effect]" as
// `kubectl taint` writes it (runtime/kube's ParseToleration reads them).
func setKubeTolerations(c *Config, v any) error {
	list, err := stringArray(v)
	if err != nil {
		return err
	}
	for i, s := range list {
		if err := toleration(s); err != nil {
			return fmt.Errorf("element %d: %q: %w", i+1, s, err)
		}
	}
	c.Kubernetes.Tolerations = nil
	if len(list) > 0 {
		c.Kubernetes.Tolerations = list
	}
	return nil
}

func toleration(s string) error {
	spec, effect, hasEffect := strings.Cut(s, ":")
	key, value, hasValue := strings.Cut(spec, "=")
	if err := labelKey(key); err != nil {
		return fmt.Errorf("want key[=value][:effect]: %w", err)
	}
	if errs := validation.IsValidLabelValue(value); hasValue && len(errs) > 0 {
		return fmt.Errorf("value %q: %s", value, strings.Join(errs, "; "))
	}
	if hasEffect && effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute" {
		return fmt.Errorf("effect %q: want NoSchedule, PreferNoSchedule or NoExecute", effect)
	}
	return nil
}

func labelKey(k string) error {
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return errors.New("key " + fmt.Sprintf("%q", k) + ": " + strings.Join(errs, "; "))
	}
	return nil
}
