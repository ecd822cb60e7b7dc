package turn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/pricing"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/sidecar"
)

// ContainerConfig is a group's container settings, stored as JSON with the group (seed 003).
type ContainerConfig struct {
	AdditionalMounts []mountsec.MountRequest `json:"additional_mounts,omitempty"`
	// Timeout is the run timeout in milliseconds; 0 keeps the daemon's.
	Timeout int64   `json:"timeout,omitempty"`
	Network string  `json:"network,omitempty"`
	Memory  string  `json:"memory,omitempty"`
	CPUs    float64 `json:"cpus,omitempty"`
	Pids    int64   `json:"pids,omitempty"`
	// Runtime is the OCI runtime of the group's agent and sidecar containers (runc, crun,
	// runsc for gVisor), one of limits.allowed_runtimes; "" keeps the daemon's
	// limits.runtime.
	Runtime string `json:"runtime,omitempty"`
	// Sidecars are the group's MCP sidecars, started around each of its turns.
	Sidecars []sidecar.Config `json:"sidecars,omitempty"`
	// Model is the group's own model policy; it binds the group's whole subtree (see
	// EffectiveModel). With none on its path a turn uses the daemon's credential, any model
	// and no budget.
	Model *ModelPolicy `json:"model,omitempty"`
	// Egress lists the HOST:PORTs the group's agent may reach through the egress proxy.
	Egress []string `json:"egress,omitempty"`
	// Credentials are secrets the egress proxy sends for the group's agent, each to hosts
	// of Egress; the container holds only a placeholder of each.
	Credentials []CredentialBinding `json:"credentials,omitempty"`
	// DeliverResult false keeps an inbox turn's result out of the outbox, for agents that
	// answer only through the send tools; nil or true delivers it to the chat (the store
	// reads the key when the run ends).
	DeliverResult *bool `json:"deliver_result,omitempty"`
}

// ModelPolicy is what a group's turns may do through the model gateway.
type ModelPolicy struct {
	// Credential names the group's own credential in the credentials directory.
	Credential string `json:"credential,omitempty"`
	// Models, when not empty, are the only models its agent may ask for.
	Models []string `json:"models,omitempty"`
	// TokensPerDay bounds input, output and cache-write tokens over the calendar day.
	TokensPerDay int64 `json:"tokens_per_day,omitempty"`
	// RequestsPerTurn bounds the model requests of one turn.
	RequestsPerTurn int64 `json:"requests_per_turn,omitempty"`
	// USDPerDay and USDPerMonth bound what the model usage of the group's subtree costs
	// over the calendar day and month, in US dollars at the daemon's prices ([prices]).
	USDPerDay   float64 `json:"usd_per_day,omitempty"`
	USDPerMonth float64 `json:"usd_per_month,omitempty"`
	// BudgetAction is what reaching USDPerDay or USDPerMonth does: BudgetRefuse (the
	// default), BudgetWarn or BudgetPark.
	BudgetAction string `json:"budget_action,omitempty"`
}

// The actions of a money budget (ModelPolicy.BudgetAction).
const (
	// BudgetRefuse: a request that could take the cost past the budget is refused.
	BudgetRefuse = "refuse"
	// BudgetWarn: nothing is refused; at 80% and at 100% of the budget a notice goes to
	// the chat of the turn that reached it and a warning to the log, once a period each.
	BudgetWarn = "warn"
	// BudgetPark: as refuse, and the group whose request was refused is parked until an
	// operator unparks it.
	BudgetPark = "park"
)

// Budget is a budget on a turn's path: TokensPerDay, and USDPerDay and USDPerMonth in
// micro-dollars, of Folder, which the turns of Folder and of every folder below it spend
// together.
type Budget struct {
	Folder       groupfolder.Folder
	TokensPerDay int64
	PerDay       pricing.Micros
	PerMonth     pricing.Micros
	// Action is what reaching PerDay or PerMonth does: BudgetRefuse, BudgetWarn or
	// BudgetPark.
	Action string
}

// EffectiveModel is the model policy a folder's turns run under: its own and every
// ancestor's together, for a group's policy binds its whole subtree. A child can narrow
// what its ancestors allow, never widen it.
type EffectiveModel struct {
	// Credential is the credential of the nearest folder on the path that names one, ""
	// for the daemon's. A folder may name only the credential its ancestors name, if any.
	Credential string
	// Models are the models every list on the path allows; nil when no folder lists any,
	// empty when the lists have none in common.
	Models []string
	// RequestsPerTurn is the smallest on the path; 0 for none.
	RequestsPerTurn int64
	// Budgets are the budgets on the path, the folder's own first: a request must fit in
	// each that refuses.
	Budgets []Budget
}

// effectiveModel is the policy of the last of path, which lists a folder and its
// ancestors from the world down, each with its own policy (nil for none).
func effectiveModel(path []groupfolder.Folder, policies []*ModelPolicy) (EffectiveModel, error) {
	var e EffectiveModel
	var from groupfolder.Folder // the folder that named e.Credential
	for i, p := range policies {
		if p == nil {
			continue
		}
		f := path[i]
		if p.Credential != "" {
			if e.Credential != "" && p.Credential != e.Credential {
				return e, badField("model.credential", "model.credential: %s names %q, but %s names %q for its whole subtree; a group may name only its ancestors' credential, or none",
					f, p.Credential, from, e.Credential)
			}
			e.Credential, from = p.Credential, f
		}
		if len(p.Models) > 0 {
			if e.Models == nil {
				e.Models = slices.Clone(p.Models)
			} else {
				e.Models = slices.DeleteFunc(e.Models, func(m string) bool { return !slices.Contains(p.Models, m) })
			}
		}
		if n := p.RequestsPerTurn; n > 0 && (e.RequestsPerTurn == 0 || n < e.RequestsPerTurn) {
			e.RequestsPerTurn = n
		}
		if p.TokensPerDay > 0 || p.USDPerDay > 0 || p.USDPerMonth > 0 {
			b := Budget{Folder: f, TokensPerDay: p.TokensPerDay, Action: p.BudgetAction}
			// checkModelPolicy accepted both amounts.
			b.PerDay, _ = pricing.MicrosOf(p.USDPerDay)
			b.PerMonth, _ = pricing.MicrosOf(p.USDPerMonth)
			if b.Action == "" && (b.PerDay > 0 || b.PerMonth > 0) {
				b.Action = BudgetRefuse
			}
			e.Budgets = slices.Insert(e.Budgets, 0, b)
		}
	}
	return e, nil
}

// ConfigError is a mistake in a container config. It matches ErrBadContainerConfig
// (errors.Is); Field names the key it is about ("network", "sidecars", "model.models";
// "" for the whole document), for an answer that names it.
type ConfigError struct {
	Field string
	Err   error
}

func (e *ConfigError) Error() string { return ErrBadContainerConfig.Error() + ": " + e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Is reports whether target is ErrBadContainerConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrBadContainerConfig }

func badField(field, format string, args ...any) error {
	return &ConfigError{Field: field, Err: fmt.Errorf(format, args...)}
}

// ParseContainerConfig decodes and checks a container config; unknown fields are
// errors. networks are the named networks the operator allowed
// (limits.allowed_networks): the network, and each sidecar's, must pass
// engine.CheckNetwork with them. The returned config's Network is as CheckNetwork
// names it ("" is "none"). The runtime is checked as a name here; CheckRuntime holds it
// to the operator's list.
func ParseContainerConfig(raw []byte, networks []string) (ContainerConfig, error) {
	var c ContainerConfig
	if len(bytes.TrimSpace(raw)) == 0 {
		return c, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return c, badField(te.Field, "%s: must be %s, not %s", te.Field, te.Type, te.Value)
		}
		return c, badField("", "%v", err)
	}
	switch {
	case c.Timeout < 0:
		return c, badField("timeout", "timeout: must not be negative")
	case c.CPUs < 0 || c.CPUs > 1024:
		return c, badField("cpus", "cpus: %v is out of range", c.CPUs)
	case c.Pids < 0:
		return c, badField("pids", "pids: must not be negative")
	}
	if c.Memory != "" {
		if _, err := engine.ParseMemory(c.Memory); err != nil {
			return c, badField("memory", "memory: %v", err)
		}
	}
	if c.Runtime != "" {
		if err := engine.CheckRuntimeName(c.Runtime); err != nil {
			return c, badField("runtime", "runtime: %v", err)
		}
	}
	if c.Network != "" {
		network, err := engine.CheckNetwork(c.Network, networks)
		if err != nil {
			return c, &ConfigError{Field: "network", Err: err}
		}
		c.Network = network
	}
	if err := sidecar.Validate(c.Sidecars, networks); err != nil {
		return c, &ConfigError{Field: "sidecars", Err: err}
	}
	if err := gateway.CheckEgress(c.Egress); err != nil {
		return c, &ConfigError{Field: "egress", Err: err}
	}
	if err := checkModelPolicy(c.Model); err != nil {
		return c, err
	}
	if err := checkCredentials(c.Credentials, c.Egress); err != nil {
		return c, err
	}
	return c, nil
}

// CheckRuntime refuses a config whose runtime the operator did not allow
// (limits.allowed_runtimes), naming the field.
func (c ContainerConfig) CheckRuntime(allowed []string) error {
	if err := engine.CheckRuntime(c.Runtime, allowed); err != nil {
		return &ConfigError{Field: "runtime", Err: fmt.Errorf("runtime: %w", err)}
	}
	return nil
}

func checkModelPolicy(m *ModelPolicy) error {
	if m == nil {
		return nil
	}
	switch {
	case m.TokensPerDay < 0:
		return badField("model.tokens_per_day", "model.tokens_per_day: must not be negative")
	case m.RequestsPerTurn < 0:
		return badField("model.requests_per_turn", "model.requests_per_turn: must not be negative")
	}
	for _, k := range []struct {
		name string
		v    float64
	}{{"usd_per_day", m.USDPerDay}, {"usd_per_month", m.USDPerMonth}} {
		if _, err := pricing.MicrosOf(k.v); err != nil {
			return badField("model."+k.name, "model.%s: %v (dollars, like 5 or 2.50)", k.name, err)
		}
	}
	switch m.BudgetAction {
	case "", BudgetRefuse, BudgetWarn, BudgetPark:
	default:
		return badField("model.budget_action", "model.budget_action: %q is not refuse, warn or park", m.BudgetAction)
	}
	if m.BudgetAction != "" && m.USDPerDay == 0 && m.USDPerMonth == 0 {
		return badField("model.budget_action", "model.budget_action: %q acts on usd_per_day or usd_per_month, and neither is set", m.BudgetAction)
	}
	if m.Credential != "" {
		if err := gateway.CheckCredentialName(m.Credential); err != nil {
			return badField("model.credential", "model.%v", err)
		}
	}
	for i, name := range m.Models {
		if name == "" || len(name) > 128 {
			return badField("model.models", "model.models[%d]: a model name of 1 to 128 characters", i)
		}
	}
	return nil
}

// parseModelPolicy reads only the model policy of a container config, checked as
// ParseContainerConfig checks it: what an ancestor's config means to its subtree.
func parseModelPolicy(raw []byte) (*ModelPolicy, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var c struct {
		Model json.RawMessage `json:"model"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, badField("", "%v", err)
	}
	if len(c.Model) == 0 || string(c.Model) == "null" {
		return nil, nil
	}
	var m ModelPolicy
	dec := json.NewDecoder(bytes.NewReader(c.Model))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, badField("model", "model: %v", err)
	}
	return &m, checkModelPolicy(&m)
}
