package gateway

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadCredential(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyFile := write("key", "sk-file\n")
	credDir := filepath.Join(dir, "creds")
	os.Mkdir(credDir, 0o700)
	os.WriteFile(filepath.Join(credDir, SystemdCredential), []byte("sk-systemd"), 0o600)
	empty := write("empty", "\n")
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, tc := range []struct {
		name   string
		src    CredentialSources
		value  string
		bearer bool
		err    string
	}{
		{"file first", CredentialSources{APIKeyFile: keyFile, Getenv: env(map[string]string{"ANTHROPIC_API_KEY": "sk-env"})}, "sk-file", false, ""},
		{"systemd credential", CredentialSources{Getenv: env(map[string]string{"CREDENTIALS_DIRECTORY": credDir, "ANTHROPIC_API_KEY": "sk-env"})}, "sk-systemd", false, ""},
		{"environment", CredentialSources{Getenv: env(map[string]string{"ANTHROPIC_API_KEY": " sk-env "})}, "sk-env", false, ""},
		{"oauth", CredentialSources{Getenv: env(map[string]string{"CLAUDE_CODE_OAUTH_TOKEN": "oat"})}, "oat", true, ""},
		{"none", CredentialSources{Getenv: env(nil)}, "", false, "no model credential"},
		{"empty file", CredentialSources{APIKeyFile: empty}, "", false, "is empty"},
		{"missing file", CredentialSources{APIKeyFile: filepath.Join(dir, "nope")}, "", false, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadCredential(tc.src)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || c.Value != tc.value || c.Bearer != tc.bearer {
				t.Fatalf("%+v %v", c, err)
			}
			if strings.Contains(c.String(), c.Value) {
				t.Errorf("String() prints the secret: %s", c)
			}
		})
	}
	if _, err := LoadCredential(CredentialSources{Getenv: env(nil)}); !errors.Is(err, ErrNoCredential) {
		t.Errorf("no credential: %v", err)
	}
}

func TestGroupCredentialNames(t *testing.T) {
	for _, name := range []string{"../key", "/etc/shadow", "a/b", "", "..", "UPPER", strings.Repeat("a", 65)} {
		if _, err := GroupCredential(name, t.TempDir(), nil); err == nil {
			t.Errorf("credential name %q accepted", name)
		}
	}
}

func TestTokens(t *testing.T) {
	p := filepath.Join(t.TempDir(), "secret")
	a, err := OpenTokens(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenTokens(p)
	if err != nil {
		t.Fatal(err)
	}
	if a.Token("arizuko-main-1") != b.Token("arizuko-main-1") {
		t.Error("a reopened secret mints other tokens: adopted turns would lose the model")
	}
	if a.Token("arizuko-main-1") == a.Token("arizuko-main-2") {
		t.Error("two turns share a token")
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("secret mode %v", fi.Mode())
	}
}
