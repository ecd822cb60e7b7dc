package assembly

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/turn"
)

// Secrets is every secret a System knows, as the one filter that every text it stores
// or logs passes through (Redact): what the last (re)load read (secretSources) and what
// turns read since (a group's own credential, its sidecars' env values, through learn).
// Values only come in: one a reload no longer finds stays, for a turn that started before
// may still echo it.
type Secrets struct {
	mu  sync.Mutex // one change at a time
	cur atomic.Pointer[redactor]
}

// redactor is one state of the set, with its matcher built once.
type redactor struct {
	secrets mountsec.Secrets
	replace func(string) string
}

func newRedactor(s mountsec.Secrets) *redactor {
	return &redactor{secrets: s, replace: s.Redactor()}
}

// Redact replaces every secret value in text with [REDACTED:NAME].
func (s *Secrets) Redact(text string) string {
	if r := s.cur.Load(); r != nil {
		return r.replace(text)
	}
	return text
}

// reload makes fresh the set's values under their names, and keeps every value known
// before that fresh lacks (under its old name, or NAME_PREVIOUS when fresh uses the name).
func (s *Secrets) reload(fresh mountsec.Secrets) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := mountsec.Secrets{}
	for _, k := range fresh.Names() {
		addSecret(next, k, fresh[k])
	}
	if r := s.cur.Load(); r != nil {
		for _, k := range r.secrets.Names() {
			if v := r.secrets[k]; !hasValue(next, v) {
				name := k
				if _, taken := next[k]; taken {
					name = k + "_PREVIOUS"
				}
				addSecret(next, name, v)
			}
		}
	}
	s.cur.Store(newRedactor(next))
}

// learn adds a secret a turn read, unless its value is known already.
func (s *Secrets) learn(name, value string) {
	if len(value) < mountsec.MinRedactLen {
		return
	}
	if r := s.cur.Load(); r != nil && hasValue(r.secrets, value) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := mountsec.Secrets{}
	if r := s.cur.Load(); r != nil {
		if hasValue(r.secrets, value) {
			return
		}
		for k, v := range r.secrets {
			next[k] = v
		}
	}
	addSecret(next, name, value)
	s.cur.Store(newRedactor(next))
}

// addSecret puts value into s under name, or name_2, name_3... when name holds another
// value: no value is ever lost to a name used twice.
func addSecret(s mountsec.Secrets, name, value string) {
	if value == "" {
		return
	}
	for n, i := name, 2; ; i++ {
		if v, taken := s[n]; !taken || v == value {
			s[n] = value
			return
		}
		n = name + "_" + strconv.Itoa(i)
	}
}

func hasValue(s mountsec.Secrets, value string) bool {
	for _, v := range s {
		if v == value {
			return true
		}
	}
	return false
}

// secretSources are the secrets one (re)load reads, by where they come from.
type secretSources struct {
	// env is every value of the env file, passed into containers by the allowlist or
	// not, with the git identity the containers get.
	env mountsec.Secrets
	// model is the daemon's model credential.
	model string
	// credentials are the groups' own credentials found in the credentials directories
	// ([model] credentials_dir and the unit's $CREDENTIALS_DIRECTORY), by name.
	credentials mountsec.Secrets
	// webhooks are the [[webhook]] shared secrets, in their order.
	webhooks []string
}

// all is the sources as one set of secrets.
func (src secretSources) all() mountsec.Secrets {
	out := mountsec.Secrets{}
	for _, k := range src.env.Names() {
		addSecret(out, k, src.env[k])
	}
	addSecret(out, "MODEL_CREDENTIAL", src.model)
	for _, k := range src.credentials.Names() {
		addSecret(out, turn.GroupCredentialSecret(k), src.credentials[k])
	}
	for i, v := range src.webhooks {
		addSecret(out, fmt.Sprintf("webhook:%d", i), v)
	}
	return out
}

// changed names the parts of the configuration whose secrets differ between old and src,
// for the journal: the env file's values, the model credential or the groups' credentials
// (model), and the webhooks' secrets.
func (src secretSources) changed(old secretSources) []string {
	var out []string
	if !mapsEqual(src.env, old.env) {
		out = append(out, "env_file")
	}
	if src.model != old.model || !mapsEqual(src.credentials, old.credentials) {
		out = append(out, "model")
	}
	if !slices.Equal(src.webhooks, old.webhooks) {
		out = append(out, "webhook")
	}
	return out
}

func mapsEqual(a, b mountsec.Secrets) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// readEnvSecrets reads every value of the env file: the filtered ones (with the git
// identity) and those the allowlist does not pass, which a turn may still know from
// before the allowlist changed.
func readEnvSecrets(cfg *config.Config, filtered mountsec.Secrets) (mountsec.Secrets, error) {
	out := mountsec.Secrets{}
	for k, v := range filtered {
		out[k] = v
	}
	if cfg.EnvFile == "" {
		return out, nil
	}
	all, err := mountsec.ReadEnvFile(cfg.EnvFile)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("env_file: %w", err)
	}
	for k, v := range all {
		addSecret(out, k, v)
	}
	return out, nil
}

// readCredentials reads the groups' own credentials: every file of the credentials
// directories whose name a group's containerConfig.model.credential may give. A directory
// that is not there has none; a file that does not read is left to the turn that uses it
// (which then fails saying why).
func readCredentials(dirs ...string) mountsec.Secrets {
	out := mountsec.Secrets{}
	noEnv := func(string) string { return "" }
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if gateway.CheckCredentialName(e.Name()) != nil {
				continue
			}
			if fi, err := os.Stat(filepath.Join(dir, e.Name())); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if c, err := gateway.GroupCredential(e.Name(), dir, noEnv); err == nil {
				addSecret(out, e.Name(), c.Value)
			}
		}
	}
	return out
}

// loadSecrets reads what a (re)load knows of secrets, writing the filtered env file for
// the containers (data_dir/env/env) last, once everything else read.
func loadSecrets(ctx context.Context, cfg *config.Config, layout groupfolder.Layout, model *turn.ModelGateway, webhooks []string, getenv func(string) string) (secretSources, error) {
	src := secretSources{model: model.Secret(), webhooks: webhooks,
		credentials: readCredentials(getenv("CREDENTIALS_DIRECTORY"), cfg.Model.CredentialsDir)}
	filtered, err := filterEnvFile(ctx, cfg)
	if err != nil {
		return secretSources{}, err
	}
	if src.env, err = readEnvSecrets(cfg, filtered); err != nil {
		return secretSources{}, err
	}
	if err := writeEnvFile(cfg, layout, filtered); err != nil {
		return secretSources{}, err
	}
	return src, nil
}

// filterEnvFile reads what of the service's env file the containers get; nil without
// one.
func filterEnvFile(ctx context.Context, cfg *config.Config) (mountsec.Secrets, error) {
	if cfg.EnvFile == "" {
		return nil, nil
	}
	if _, err := os.Stat(cfg.EnvFile); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	secrets, err := mountsec.BuildEnvFile(ctx, cfg.EnvFile, cfg.EnvAllow, mountsec.GitConfigIdentity)
	if err != nil {
		return nil, fmt.Errorf("env_file: %w", err)
	}
	return secrets, nil
}

// writeEnvFile writes the filtered env file into data_dir/env/env for the containers;
// nothing without an env file.
func writeEnvFile(cfg *config.Config, layout groupfolder.Layout, filtered mountsec.Secrets) error {
	if filtered == nil {
		return nil
	}
	path, err := layout.EnsureEnvDir()
	if err != nil {
		return err
	}
	return mountsec.WriteEnvFile(path, filtered)
}
