package assembly

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/arizuko/arizukod/config"
)

// restartKeys are the keys a reload cannot apply: what the listening socket, the store, the
// engine connection, the runner, the queue and the scheduler were made with at the start.
// A reload that changes one says so and keeps the running value.
var restartKeys = []struct {
	key  string
	keep func(dst, src *config.Config) // dst's value becomes src's
	get  func(c *config.Config) any
}{
	{"data_dir", func(d, s *config.Config) { d.DataDir = s.DataDir }, func(c *config.Config) any { return c.DataDir }},
	{"listen", func(d, s *config.Config) { d.Listen = s.Listen }, func(c *config.Config) any { return c.Listen }},
	{"socket_mode", func(d, s *config.Config) { d.SocketMode = s.SocketMode }, func(c *config.Config) any { return c.SocketMode }},
	{"allow_group", func(d, s *config.Config) { d.AllowGroup = s.AllowGroup }, func(c *config.Config) any { return c.AllowGroup }},
	{"engine", func(d, s *config.Config) { d.Engine = s.Engine }, func(c *config.Config) any { return c.Engine }},
	{"engine_socket", func(d, s *config.Config) { d.EngineSocket = s.EngineSocket }, func(c *config.Config) any { return c.EngineSocket }},
	{"instance", func(d, s *config.Config) { d.Instance = s.Instance }, func(c *config.Config) any { return c.Instance }},
	{"image", func(d, s *config.Config) { d.Image = s.Image }, func(c *config.Config) any { return c.Image }},
	{"run_timeout", func(d, s *config.Config) { d.RunTimeout = s.RunTimeout }, func(c *config.Config) any { return c.RunTimeout }},
	{"stop_grace", func(d, s *config.Config) { d.StopGrace = s.StopGrace }, func(c *config.Config) any { return c.StopGrace }},
	{"max_running", func(d, s *config.Config) { d.MaxRunning = s.MaxRunning }, func(c *config.Config) any { return c.MaxRunning }},
	{"prepared", func(d, s *config.Config) { d.Prepared = s.Prepared }, func(c *config.Config) any { return c.Prepared }},
	{"warm_agents", func(d, s *config.Config) { d.WarmAgents = s.WarmAgents }, func(c *config.Config) any { return c.WarmAgents }},
	{"warm_min_available", func(d, s *config.Config) { d.WarmMinAvailable = s.WarmMinAvailable }, func(c *config.Config) any { return c.WarmMinAvailable }},
	{"retry_max", func(d, s *config.Config) { d.RetryMax = s.RetryMax }, func(c *config.Config) any { return c.RetryMax }},
	{"retry_backoff", func(d, s *config.Config) { d.RetryBackoff = s.RetryBackoff }, func(c *config.Config) any { return c.RetryBackoff }},
	{"skills_dir", func(d, s *config.Config) { d.SkillsDir = s.SkillsDir }, func(c *config.Config) any { return c.SkillsDir }},
	{"web_dir", func(d, s *config.Config) { d.WebDir = s.WebDir }, func(c *config.Config) any { return c.WebDir }},
	{"timezone", func(d, s *config.Config) { d.Location = s.Location }, func(c *config.Config) any { return c.Location.String() }},
	{"limits.allowed_networks", func(d, s *config.Config) { d.Limits.AllowedNetworks = s.Limits.AllowedNetworks },
		func(c *config.Config) any { return fmt.Sprintf("%q", c.Limits.AllowedNetworks) }},
	{"limits.allowed_runtimes", func(d, s *config.Config) { d.Limits.AllowedRuntimes = s.Limits.AllowedRuntimes },
		func(c *config.Config) any { return fmt.Sprintf("%q", c.Limits.AllowedRuntimes) }},
	{"limits.allow_unlimited", func(d, s *config.Config) { d.Limits.AllowUnlimited = s.Limits.AllowUnlimited },
		func(c *config.Config) any { return c.Limits.AllowUnlimited }},
	{"metrics.listen", func(d, s *config.Config) { d.Metrics = s.Metrics }, func(c *config.Config) any { return c.Metrics.Listen }},
	{"tracing.endpoint", func(d, s *config.Config) { d.Tracing = s.Tracing }, func(c *config.Config) any { return c.Tracing.Endpoint }},
	{"kubernetes.kubeconfig", func(d, s *config.Config) { d.Kubernetes.Kubeconfig = s.Kubernetes.Kubeconfig }, func(c *config.Config) any { return c.Kubernetes.Kubeconfig }},
	{"kubernetes.namespace", func(d, s *config.Config) { d.Kubernetes.Namespace = s.Kubernetes.Namespace }, func(c *config.Config) any { return c.Kubernetes.Namespace }},
	{"kubernetes.no_network_class", func(d, s *config.Config) { d.Kubernetes.NoNetworkClass = s.Kubernetes.NoNetworkClass },
		func(c *config.Config) any { return c.Kubernetes.NoNetworkClass }},
	{"kubernetes.node_ipc_dir", func(d, s *config.Config) { d.Kubernetes.NodeIPCDir = s.Kubernetes.NodeIPCDir }, func(c *config.Config) any { return c.Kubernetes.NodeIPCDir }},
	{"kubernetes.pod_pids_limit", func(d, s *config.Config) { d.Kubernetes.PodPidsLimit = s.Kubernetes.PodPidsLimit },
		func(c *config.Config) any { return c.Kubernetes.PodPidsLimit }},
	{"kubernetes.relay_listen", func(d, s *config.Config) { d.Kubernetes.RelayListen = s.Kubernetes.RelayListen },
		func(c *config.Config) any { return c.Kubernetes.RelayListen }},
	{"kubernetes.node_selector", func(d, s *config.Config) { d.Kubernetes.NodeSelector = s.Kubernetes.NodeSelector },
		func(c *config.Config) any { return fmt.Sprintf("%q", c.Kubernetes.NodeSelector) }},
	{"kubernetes.tolerations", func(d, s *config.Config) { d.Kubernetes.Tolerations = s.Kubernetes.Tolerations },
		func(c *config.Config) any { return fmt.Sprintf("%q", c.Kubernetes.Tolerations) }},
}

// Changes are what a reload changed: the keys that took effect and those that need a
// restart (whose running value stays).
type Changes struct {
	Applied []string
	Restart []string
}

// Reload builds the System of cfg (the configuration read again) over s's parts made
// once, and returns it: the mount allowlist, the env file, the model credential, the
// groups' credentials, the webhooks and their secrets, [limits] and [memory] are read
// again; what only a restart changes keeps s's value and is named in Changes.Restart. A
// configuration whose allowlist, env file or webhook secret does not read is refused
// whole: s stays as it was. Turns already built keep what they were built with.
func (s *System) Reload(ctx context.Context, cfg *config.Config) (*System, Changes, error) {
	if s.Model == nil {
		return nil, Changes{}, errors.New("reload: an offline System runs no turns and has nothing to reload")
	}
	var ch Changes
	for _, k := range restartKeys {
		if !reflect.DeepEqual(k.get(cfg), k.get(s.Config)) {
			ch.Restart = append(ch.Restart, k.key)
			k.keep(cfg, s.Config)
		}
	}
	model, err := s.Model.Reloaded(s.modelOptions(cfg), s.Layout, s.modelLog())
	if err != nil {
		return nil, Changes{}, err
	}
	next := *s
	b := *s.Builder
	if err := next.load(ctx, cfg, &b, model); err != nil {
		return nil, Changes{}, err
	}
	services := *b.Services
	services.Model = model
	b.Services = &services
	next.Builder = &b
	ch.Applied = changedKeys(s.Config, cfg)
	for _, k := range next.sources.changed(s.sources) {
		if !slices.Contains(ch.Applied, k) {
			ch.Applied = append(ch.Applied, k)
		}
	}
	return &next, ch, nil
}

// changedKeys names the parts of the configuration that differ, for the journal.
func changedKeys(old, cfg *config.Config) []string {
	out := []string{}
	for _, p := range []struct {
		key  string
		a, b any
	}{
		{"env_file", old.EnvFile, cfg.EnvFile},
		{"env_allow", old.EnvAllow, cfg.EnvAllow},
		{"allowlist", old.Allowlist, cfg.Allowlist},
		{"limits", old.Limits.Limits, cfg.Limits.Limits},
		{"memory", old.Memory, cfg.Memory},
		{"model", old.Model, cfg.Model},
		{"retention", old.Retention, cfg.Retention},
		{"delivery", old.Delivery, cfg.Delivery},
		{"webhook", old.Webhooks, cfg.Webhooks},
		{"prices", old.Prices, cfg.Prices},
	} {
		if !reflect.DeepEqual(p.a, p.b) {
			out = append(out, p.key)
		}
	}
	return out
}
