package turn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/store"
)

// ModelOptions are the [model] settings every turn's model gateway shares.
type ModelOptions struct {
	Upstream       string
	APIKeyFile     string
	OAuthTokenFile string
	// CredentialsDir holds the groups' own credentials.
	CredentialsDir string
	// EnvFile is the service's env file, read for the credential's variables when the
	// process environment has none.
	EnvFile string
	// Secret, when set, hears each group credential a turn reads (its name and value)
	// before the turn's gateway uses it: the daemon redacts it from then on.
	Secret func(name, value string)
}

// ModelGateway is what every turn's model gateway shares: the upstream, the daemon's
// credential, the groups' credentials directory, the token secret and one transport, so
// that connections are reused across turns.
type ModelGateway struct {
	upstream       *url.URL
	credential     gateway.Credential // empty when none is configured
	credentialsDir string
	secret         func(name, value string)
	tokens         *gateway.Tokens
	transport      http.RoundTripper
}

// NewModelGateway reads what every turn's model gateway shares. No credential is not an
// error: each turn's gateway then answers with what to set.
func NewModelGateway(o ModelOptions, layout groupfolder.Layout, log *slog.Logger) (*ModelGateway, error) {
	up, err := url.Parse(o.Upstream)
	if err != nil {
		return nil, fmt.Errorf("model.upstream: %w", err)
	}
	fromFile := map[string]string{}
	if o.EnvFile != "" {
		if vars, err := mountsec.ReadEnvFile(o.EnvFile); err == nil {
			fromFile = vars
		}
	}
	cred, err := gateway.LoadCredential(gateway.CredentialSources{
		APIKeyFile: o.APIKeyFile, OAuthTokenFile: o.OAuthTokenFile,
		Getenv: func(k string) string {
			if v := os.Getenv(k); v != "" {
				return v
			}
			return fromFile[k]
		},
	})
	switch {
	case errors.Is(err, gateway.ErrNoCredential):
		log.Warn("no model credential: turns cannot reach the model until one is configured", "hint", err.Error())
	case err != nil:
		return nil, fmt.Errorf("model credential: %w", err)
	default:
		log.Info("model gateway", "upstream", up.String(), "credential", cred.String())
	}
	secret, err := layout.TokenSecretPath()
	if err != nil {
		return nil, err
	}
	tokens, err := gateway.OpenTokens(secret)
	if err != nil {
		return nil, err
	}
	return &ModelGateway{upstream: up, credential: cred, credentialsDir: o.CredentialsDir, secret: o.Secret,
		tokens: tokens, transport: gateway.NewTransport()}, nil
}

// Reloaded reads the [model] settings again (a reload of the daemon's configuration) and
// returns the gateway they describe, with m's token secret and transport: the tokens of
// turns running now stay valid and connections are reused.
func (m *ModelGateway) Reloaded(o ModelOptions, layout groupfolder.Layout, log *slog.Logger) (*ModelGateway, error) {
	n, err := NewModelGateway(o, layout, log)
	if err != nil {
		return nil, err
	}
	n.tokens, n.transport = m.tokens, m.transport
	return n, nil
}

// ContainerEnv is what an agent container named name gets to reach its turn's model
// gateway: its token, as ARIZUKO_MODEL_TOKEN and as the API key Claude Code sends.
func (m *ModelGateway) ContainerEnv(name string) []string {
	token := m.tokens.Token(name)
	return []string{"ARIZUKO_MODEL_TOKEN=" + token, "ANTHROPIC_API_KEY=" + token}
}

// Secret is the daemon's model credential, for redaction; empty when none is configured.
func (m *ModelGateway) Secret() string { return m.credential.Value }

// GroupCredentialSecret is the name a group's credential name is redacted under.
func GroupCredentialSecret(name string) string { return "credential:" + name }

// start starts the model gateway of one turn on socket with the group's policy; usage is
// recorded against the run when it is a row of the store.
func (s *Services) startModel(ctx context.Context, req Request, policy *ModelPolicy, socket string, log *slog.Logger) (*gateway.Model, error) {
	m := s.Model
	cfg := gateway.ModelConfig{
		SocketPath: socket,
		Upstream:   m.upstream,
		Credential: m.credential,
		Transport:  m.transport,
		Logger:     log,
	}
	if req.Recorded || s.OnUsage != nil {
		cfg.Record = func(u gateway.Usage) {
			if s.OnUsage != nil {
				s.OnUsage(u)
			}
			if !req.Recorded {
				return
			}
			if err := s.Store.AddUsage(context.WithoutCancel(ctx), req.RunID, store.Usage(u)); err != nil {
				log.Error("record model usage", "err", err)
			}
		}
	}
	if policy != nil {
		cfg.Models, cfg.RequestsPerTurn = policy.Models, policy.RequestsPerTurn
		if policy.Credential != "" {
			c, err := gateway.GroupCredential(policy.Credential, m.credentialsDir, os.Getenv)
			if err != nil {
				return nil, fmt.Errorf("containerConfig.model.credential: %w", err)
			}
			if m.secret != nil {
				m.secret(GroupCredentialSecret(policy.Credential), c.Value)
			}
			cfg.Credential = c
		}
		if limit := policy.TokensPerDay; limit > 0 {
			cfg.Budget = s.budget(req.Folder, limit)
		}
	}
	return gateway.StartModel(cfg)
}

// budget refuses a folder's model requests once it used limit tokens since midnight.
func (s *Services) budget(f groupfolder.Folder, limit int64) func(context.Context) error {
	loc := s.location()
	return func(ctx context.Context) error {
		now := time.Now().In(loc)
		midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
		used, err := s.Store.FolderTokens(ctx, string(f), midnight.UnixMilli())
		if err != nil {
			return err
		}
		if used >= limit {
			return fmt.Errorf("folder %s used %d of its %d tokens today (containerConfig.model.tokens_per_day); it resets at midnight", f, used, limit)
		}
		return nil
	}
}
