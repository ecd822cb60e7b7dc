package assembly

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/mountsec"
)

// TestSecretSet: a reload's values are redacted under their names; a value a reload no
// longer finds stays redacted; what turns learn is added once; no value is lost to a name
// used twice.
func TestSecretSet(t *testing.T) {
	var s Secrets
	if got := s.Redact("nothing known yet"); got != "nothing known yet" {
		t.Errorf("empty set: %q", got)
	}
	s.reload(secretSources{env: mountsec.Secrets{"GH_TOKEN": "ghp_old", "NOT_PASSED": "np_value"}, model: "sk-model",
		credentials: mountsec.Secrets{"team.key": "sk-team"}, webhooks: []string{"hook-secret"}}.all())
	s.learn("sidecar:gh:TOKEN", "side-secret")
	s.learn("sidecar:gh:TOKEN", "side-secret")
	s.learn("sidecar:gh:TOKEN", "other-side")
	s.learn("sidecar:gh:DEBUG", "1")
	s.reload(secretSources{env: mountsec.Secrets{"GH_TOKEN": "ghp_new"}}.all())
	for in, want := range map[string]string{
		"ghp_new ghp_old":   "[REDACTED:GH_TOKEN] [REDACTED:GH_TOKEN_PREVIOUS]",
		"np_value sk-model": "[REDACTED:NOT_PASSED] [REDACTED:MODEL_CREDENTIAL]",
		"sk-team":           "[REDACTED:credential:team.key]",
		"hook-secret":       "[REDACTED:webhook:0]",
		"side-secret 1":     "[REDACTED:sidecar:gh:TOKEN] 1",
		"other-side":        "[REDACTED:sidecar:gh:TOKEN_2]",
	} {
		if got := s.Redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestReadCredentials: every file of the credentials directories a group could name is
// read; others, and directories that are not there, are skipped.
func TestReadCredentials(t *testing.T) {
	dir, unit := t.TempDir(), t.TempDir()
	for p, v := range map[string]string{
		filepath.Join(dir, "team.key"):           "sk-team\n",
		filepath.Join(dir, "bot.oauth"):          "oauth-token",
		filepath.Join(dir, "Not-A-Name"):         "skipped",
		filepath.Join(unit, "anthropic-api-key"): "sk-unit",
		filepath.Join(dir, "sub", "nested.key"):  "skipped too",
		filepath.Join(dir, "empty.key"):          "",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := readCredentials(unit, dir, filepath.Join(dir, "missing"), "")
	if strings.Join(got.Names(), " ") != "anthropic-api-key bot.oauth team.key" || got["team.key"] != "sk-team" || got["anthropic-api-key"] != "sk-unit" {
		t.Errorf("read %v: %q %q %q", got.Names(), got["team.key"], got["bot.oauth"], got["anthropic-api-key"])
	}
}
