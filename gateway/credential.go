package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ErrNoCredential: no model credential is configured, so no turn can reach the model.
var ErrNoCredential = errors.New("no model credential: set [model] api_key_file in arizukod.toml, LoadCredential=anthropic-api-key:PATH in the unit, or ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN) in the daemon's environment")

// Credential is what the gateway adds to each forwarded request. Its String never prints
// the secret.
type Credential struct {
	// Bearer sends Value as "Authorization: Bearer" (an OAuth token) instead of x-api-key.
	Bearer bool
	Value  string
	// Source says where it was read (a file path or a variable name), for doctor and logs.
	Source string
}

func (c Credential) String() string {
	kind := "API key"
	if c.Bearer {
		kind = "OAuth token"
	}
	return fmt.Sprintf("%s from %s", kind, c.Source)
}

func (c Credential) apply(h http.Header) {
	if c.Bearer {
		h.Set("Authorization", "Bearer "+c.Value)
		return
	}
	h.Set("X-Api-Key", c.Value)
}

// SystemdCredential is the name of the key among the unit's credentials
// (LoadCredential=anthropic-api-key:/etc/arizuko/anthropic-api-key).
const SystemdCredential = "anthropic-api-key"

// CredentialSources is where the daemon's credential may come from, first found wins.
type CredentialSources struct {
	APIKeyFile     string // [model] api_key_file
	OAuthTokenFile string // [model] oauth_token_file
	Getenv         func(string) string
}

// LoadCredential finds the daemon's model credential: the configured files, then the
// systemd credential, then ANTHROPIC_API_KEY, then CLAUDE_CODE_OAUTH_TOKEN. It returns
// ErrNoCredential when there is none.
func LoadCredential(src CredentialSources) (Credential, error) {
	getenv := src.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if src.APIKeyFile != "" {
		return readCredential(src.APIKeyFile, false)
	}
	if src.OAuthTokenFile != "" {
		return readCredential(src.OAuthTokenFile, true)
	}
	if dir := getenv("CREDENTIALS_DIRECTORY"); dir != "" {
		p := filepath.Join(dir, SystemdCredential)
		if _, err := os.Stat(p); err == nil {
			return readCredential(p, false)
		}
	}
	if v := strings.TrimSpace(getenv("ANTHROPIC_API_KEY")); v != "" {
		return Credential{Value: v, Source: "$ANTHROPIC_API_KEY"}, nil
	}
	if v := strings.TrimSpace(getenv("CLAUDE_CODE_OAUTH_TOKEN")); v != "" {
		return Credential{Value: v, Bearer: true, Source: "$CLAUDE_CODE_OAUTH_TOKEN"}, nil
	}
	return Credential{}, ErrNoCredential
}

// credentialName is a group's credential name: a file name, never a path.
var credentialName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// CheckCredentialName says whether name may name a group's credential.
func CheckCredentialName(name string) error {
	if !credentialName.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("credential %q: must be a file name of lowercase letters, digits, '.', '_' and '-' (up to 64), looked up in the credentials directory", name)
	}
	return nil
}

// GroupCredential reads a group's own credential name from dir (the daemon's credentials
// directory) or, first, from the unit's $CREDENTIALS_DIRECTORY. A name ending in
// ".oauth" holds an OAuth token.
func GroupCredential(name, dir string, getenv func(string) string) (Credential, error) {
	if err := CheckCredentialName(name); err != nil {
		return Credential{}, err
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	bearer := strings.HasSuffix(name, ".oauth")
	if cd := getenv("CREDENTIALS_DIRECTORY"); cd != "" {
		if p := filepath.Join(cd, name); fileExists(p) {
			return readCredential(p, bearer)
		}
	}
	return readCredential(filepath.Join(dir, name), bearer)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// readCredential reads a secret file: its first line, trimmed.
func readCredential(path string, bearer bool) (Credential, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Credential{}, fmt.Errorf("credential: %w", err)
	}
	v, _, _ := strings.Cut(string(data), "\n")
	v = strings.TrimSpace(v)
	if v == "" {
		return Credential{}, fmt.Errorf("credential: %s is empty", path)
	}
	return Credential{Value: v, Bearer: bearer, Source: path}, nil
}
