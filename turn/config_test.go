package turn_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/turn"
)

func TestParseContainerConfig(t *testing.T) {
	for _, c := range []struct {
		in      string
		wantErr string
		field   string // the ConfigError's Field
	}{
		{`{}`, "", ""},
		{`{"additional_mounts":[{"host_path":"/x","container_path":"x","readonly":true}],"timeout":600000,"memory":"512m","cpus":1.5,"pids":100,"network":"none"}`, "", ""},
		{`{"bogus":1}`, "bogus", ""},
		{`{"timeout":-1}`, "timeout", "timeout"},
		{`{"memory":"lots"}`, "memory", "memory"},
		{`{"cpus":-2}`, "cpus", "cpus"},
		{`{"model":{"models":[""]}}`, "model.models[0]", "model.models"},
		{`[1]`, "bad container config", ""},
		{`{"deliver_result":false}`, "", ""},
		{`{"deliver_result":"no"}`, "deliver_result: must be bool", "deliver_result"},
		{`{"egress":["github.com:443"],"credentials":[{"env":"GH_TOKEN","credential":"github","hosts":["github.com:443"],"send":"token"}]}`, "", ""},
		{`{"egress":["github.com:443"],"credentials":[{"env":"GH_TOKEN","credential":"github","hosts":["gitlab.com:443"],"send":"token"}]}`, "credentials[0].hosts[0]", "credentials"},
		{`{"egress":["github.com:443"],"credentials":[{"env":"GH_TOKEN","credential":"../etc/shadow","hosts":["github.com:443"],"send":"token"}]}`, "credentials[0].credential", "credentials"},
		{`{"egress":["github.com:443"],"credentials":[{"env":"GH_TOKEN","credential":"github","hosts":["github.com:443"],"send":"digest"}]}`, "credentials[0].bad credential binding: send", "credentials"},
		{`{"egress":["github.com:443"],"credentials":[{"env":"GH_TOKEN","credential":"github","hosts":[],"send":"token"}]}`, "credentials[0].hosts: name", "credentials"},
		{`{"egress":["github.com:443"],"credentials":[{"env":"HTTPS_PROXY","credential":"github","hosts":["github.com:443"],"send":"token"}]}`, "HTTPS_PROXY is the daemon's", "credentials"},
		{`{"egress":["github.com:443"],"credentials":[{"env":"GH TOKEN","credential":"github","hosts":["github.com:443"],"send":"token"}]}`, "not a variable name", "credentials"},
		{`{"egress":["github.com:443"],"credentials":[{"env":"T","credential":"a","hosts":["github.com:443"],"send":"token"},{"env":"T","credential":"b","hosts":["github.com:443"],"send":"token"}]}`, "T is bound twice", "credentials"},
	} {
		_, err := turn.ParseContainerConfig([]byte(c.in), nil)
		if (err == nil) != (c.wantErr == "") || err != nil && !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("ParseContainerConfig(%s) = %v, want error containing %q", c.in, err, c.wantErr)
		}
		var ce *turn.ConfigError
		if err != nil && (!errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, turn.ErrBadContainerConfig)) {
			t.Errorf("ParseContainerConfig(%s) = %#v, want a ConfigError of field %q", c.in, err, c.field)
		}
	}
}

// TestContainerConfigNetwork: the network of a group's container config follows
// engine.CheckNetwork with the operator's list, and is kept as the engines name it.
func TestContainerConfigNetwork(t *testing.T) {
	allowed := []string{"agents"}
	for _, c := range []struct {
		network, want, err string
	}{
		{"", "", ""},
		{"none", "none", ""},
		{"bridge", "bridge", ""},
		{"slirp4netns", "slirp4netns", ""},
		{"slirp", "slirp4netns", ""},
		{"pasta", "pasta", ""},
		{"agents", "agents", ""},
		{"host", "", "host's network"},
		{"container:4f1c2a", "", "share another network namespace"},
		{"ns:/proc/1/ns/net", "", "share another network namespace"},
		{"lab", "", `"lab" is not in limits.allowed_networks`},
		{"a;b", "", "a network name is"},
	} {
		raw, _ := json.Marshal(map[string]string{"network": c.network})
		got, err := turn.ParseContainerConfig(raw, allowed)
		var ce *turn.ConfigError
		switch {
		case c.err == "" && (err != nil || got.Network != c.want):
			t.Errorf("network %q: %q, %v; want %q", c.network, got.Network, err, c.want)
		case c.err != "" && (!errors.As(err, &ce) || ce.Field != "network" || !errors.Is(err, engine.ErrNetwork) || !strings.Contains(err.Error(), c.err)):
			t.Errorf("network %q: %v; want a ConfigError of field network with %q", c.network, err, c.err)
		}
	}
	if _, err := turn.ParseContainerConfig([]byte(`{"sidecars":[{"name":"a","image":"i","network":"host"}]}`), allowed); err == nil || !strings.Contains(err.Error(), "host's network") {
		t.Errorf("a sidecar on the host's network: %v", err)
	}
}

// TestContainerConfigRuntime: a group's runtime is a name, and one the operator listed in
// limits.allowed_runtimes; a refusal names the field.
func TestContainerConfigRuntime(t *testing.T) {
	allowed := []string{"runc", "runsc"}
	for _, c := range []struct {
		in, err string
	}{
		{`{}`, ""},
		{`{"runtime":"runsc"}`, ""},
		{`{"runtime":"runc"}`, ""},
		{`{"runtime":"crun"}`, `runtime: OCI runtime not allowed: "crun" is not in limits.allowed_runtimes of the daemon's configuration (it lists runc, runsc)`},
		{`{"runtime":"/usr/bin/runsc"}`, "runtime: \"/usr/bin/runsc\": an OCI runtime's name"},
		{`{"runtime":"kata runtime"}`, "an OCI runtime's name"},
		{`{"runtime":7}`, "runtime: must be string"},
	} {
		cfg, err := turn.ParseContainerConfig([]byte(c.in), nil)
		if err == nil {
			err = cfg.CheckRuntime(allowed)
		}
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want error containing %q", c.in, err, c.err)
			continue
		}
		var ce *turn.ConfigError
		if err != nil && (!errors.As(err, &ce) || ce.Field != "runtime" || !errors.Is(err, turn.ErrBadContainerConfig)) {
			t.Errorf("%s: %#v, want a ConfigError of field runtime", c.in, err)
		}
	}
	cfg, err := turn.ParseContainerConfig([]byte(`{"runtime":"runsc"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckRuntime(nil); !errors.Is(err, engine.ErrRuntime) || !strings.Contains(err.Error(), "it lists none") {
		t.Errorf("no runtime allowed: %v, want ErrRuntime saying it lists none", err)
	}
}
