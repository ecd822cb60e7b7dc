package turn

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
)

// CredentialBinding binds a secret of the credentials directory to hosts: the group's
// container gets Env holding a placeholder, and the egress proxy, for those hosts only,
// puts the secret where the placeholder is sent as Send says.
type CredentialBinding struct {
	// Env is the variable the container holds the placeholder in (GH_TOKEN).
	Env string `json:"env"`
	// Credential names the file of the credentials directory holding the secret.
	Credential string `json:"credential"`
	// Hosts are HOST:PORTs of the group's egress list the secret is sent to.
	Hosts []string `json:"hosts"`
	// Send is how: "bearer", "token", "basic" (git over HTTPS) or "header:NAME".
	Send string `json:"send"`
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// reservedEnv are the variables a binding may not take: the daemon's own, and those
// that steer the agent's traffic and trust.
var reservedEnv = []string{"ARIZUKO_", "ANTHROPIC_", "CLAUDE_", "HOME", "PATH", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
	"SSL_CERT_", "NODE_EXTRA_CA_CERTS", "GIT_SSL_", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "IS_SANDBOX"}

func checkCredentials(bs []CredentialBinding, egress []string) error {
	seen := map[string]bool{}
	for i, b := range bs {
		field := fmt.Sprintf("credentials[%d]", i)
		if !envName.MatchString(b.Env) {
			return badField("credentials", "%s.env: %q is not a variable name (letters, digits, '_')", field, b.Env)
		}
		for _, r := range reservedEnv {
			if strings.HasPrefix(strings.ToUpper(b.Env), r) {
				return badField("credentials", "%s.env: %s is the daemon's; name the variable the agent's tools read (GH_TOKEN)", field, b.Env)
			}
		}
		if seen[b.Env] {
			return badField("credentials", "%s.env: %s is bound twice", field, b.Env)
		}
		seen[b.Env] = true
		if err := gateway.CheckCredentialName(b.Credential); err != nil {
			return badField("credentials", "%s.%v", field, err)
		}
		if len(b.Hosts) == 0 {
			return badField("credentials", "%s.hosts: name the HOST:PORTs the secret is sent to", field)
		}
		for j, h := range b.Hosts {
			if err := gateway.CheckBindingHost(h, egress); err != nil {
				return badField("credentials", "%s.hosts[%d]: %v (add it to egress, or bind another host)", field, j, err)
			}
		}
		if err := gateway.CheckSend(b.Send); err != nil {
			return badField("credentials", "%s.%v", field, err)
		}
	}
	return nil
}

// OpenEgressCA opens the CA of the data directory's egress proxies: its key in
// DataDir/egress-ca.key, never mounted; its certificate in DataDir/env/egress-ca.pem,
// which every agent container gets read-only at contract.EgressCAFile.
func OpenEgressCA(l groupfolder.Layout, instance string) (*gateway.CA, error) {
	envFile, err := l.EnsureEnvDir()
	if err != nil {
		return nil, err
	}
	key, err := l.EgressCAKeyPath()
	if err != nil {
		return nil, err
	}
	return gateway.OpenCA(key, path.Join(path.Dir(envFile), groupfolder.EgressCAName), instance)
}

// caEnv tells the agent's tools where the CA of the egress proxy is: NODE_EXTRA_CA_CERTS
// adds it to Node's roots (Claude Code); the runner of the Claude image makes a bundle of
// the system's roots and it for the others (SSL_CERT_FILE, GIT_SSL_CAINFO).
func caEnv() []string {
	return []string{"ARIZUKO_EGRESS_CA=" + contract.EgressCAFile, "NODE_EXTRA_CA_CERTS=" + contract.EgressCAFile}
}

// credentialNames tells a container which of its variables are placeholders: part of the
// spec, so that a container prepared before the group's bindings changed is not used.
func credentialNames(bs []CredentialBinding) []string {
	if len(bs) == 0 {
		return nil
	}
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.Env
	}
	return []string{"ARIZUKO_CREDENTIALS=" + strings.Join(names, ",")}
}

// placeholders are the placeholders of the container named container, by variable.
func (m *ModelGateway) placeholders(container string, bs []CredentialBinding) map[string]string {
	out := map[string]string{}
	for _, b := range bs {
		out[b.Env] = m.tokens.Placeholder(container, b.Env)
	}
	return out
}

// containerEnv mints what a container named name gets: its model token and the
// placeholders of its bindings.
func (m *ModelGateway) containerEnv(bs []CredentialBinding) func(name string) []string {
	return func(name string) []string {
		env := m.ContainerEnv(name)
		for k, v := range m.placeholders(name, bs) {
			env = append(env, k+"="+v)
		}
		return env
	}
}

// bindings reads the secrets of bs for one turn's egress proxy; the daemon redacts each
// from then on.
func (m *ModelGateway) bindings(bs []CredentialBinding) ([]gateway.Binding, error) {
	var out []gateway.Binding
	for _, b := range bs {
		c, err := gateway.GroupCredential(b.Credential, m.credentialsDir, os.Getenv)
		if err != nil {
			return nil, fmt.Errorf("containerConfig.credentials (%s): %w", b.Env, err)
		}
		if m.secret != nil {
			m.secret(GroupCredentialSecret(b.Credential), c.Value)
		}
		out = append(out, gateway.Binding{Name: b.Env, Hosts: b.Hosts, Send: b.Send, Secret: c.Value})
	}
	return out, nil
}
