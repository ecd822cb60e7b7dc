package turn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/mountsec"
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
	// Sidecars are the group's MCP sidecars, started around each of its turns.
	Sidecars []sidecar.Config `json:"sidecars,omitempty"`
	// Model is the group's own model policy; nil uses the daemon's credential, any model
	// and no budget.
	Model *ModelPolicy `json:"model,omitempty"`
	// Egress lists the HOST:PORTs the group's agent may reach through the egress proxy.
	Egress []string `json:"egress,omitempty"`
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
// names it ("" is "none").
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
	if m := c.Model; m != nil {
		switch {
		case m.TokensPerDay < 0:
			return c, badField("model.tokens_per_day", "model.tokens_per_day: must not be negative")
		case m.RequestsPerTurn < 0:
			return c, badField("model.requests_per_turn", "model.requests_per_turn: must not be negative")
		}
		if m.Credential != "" {
			if err := gateway.CheckCredentialName(m.Credential); err != nil {
				return c, badField("model.credential", "model.%v", err)
			}
		}
		for i, name := range m.Models {
			if name == "" || len(name) > 128 {
				return c, badField("model.models", "model.models[%d]: a model name of 1 to 128 characters", i)
			}
		}
	}
	return c, nil
}
