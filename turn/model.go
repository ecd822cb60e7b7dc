package turn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/pricing"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/tracing"
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
	// GiveUp is how long the upstream may keep failing before a turn is given up
	// ([model] give_up); 0 never gives up.
	GiveUp time.Duration
	// Secret, when set, hears each group credential a turn reads (its name and value)
	// before the turn's gateway uses it: the daemon redacts it from then on.
	Secret func(name, value string)
	// Prices are the operator's prices ([prices]), each replacing the shipped default of
	// its model (pricing.Defaults).
	Prices map[string]pricing.Price
}

// ModelGateway is what every turn's model gateway shares: the upstream, the daemon's
// credential, the groups' credentials directory, the token secret and one transport, so
// that connections are reused across turns.
type ModelGateway struct {
	upstream       *url.URL
	credential     gateway.Credential // empty when none is configured
	credentialsDir string
	giveUp         time.Duration
	secret         func(name, value string)
	tokens         *gateway.Tokens
	transport      http.RoundTripper
	// pool bounds what every turn's gateway holds together; reserved are the tokens
	// reserved by the requests in flight of every turn.
	pool     *gateway.Pool
	reserved *reservations
	// prices turn usage into money; unpriced are the models without a price that were
	// logged already, each once.
	prices   pricing.Table
	unpriced *sync.Map
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
	return &ModelGateway{upstream: up, credential: cred, credentialsDir: o.CredentialsDir, giveUp: o.GiveUp, secret: o.Secret,
		tokens: tokens, transport: gateway.NewTransport(),
		pool:     gateway.NewPool(gateway.SharedRequests, gateway.SharedBodyBytes),
		reserved: &reservations{held: map[groupfolder.Folder]reserved{}},
		prices:   pricing.Defaults().With(o.Prices), unpriced: &sync.Map{}}, nil
}

// Reloaded reads the [model] settings again (a reload of the daemon's configuration) and
// returns the gateway they describe, with m's token secret, transport, pool and
// reservations: the tokens of turns running now stay valid, connections are reused, and
// the requests in flight still count against the bounds and the budgets.
func (m *ModelGateway) Reloaded(o ModelOptions, layout groupfolder.Layout, log *slog.Logger) (*ModelGateway, error) {
	n, err := NewModelGateway(o, layout, log)
	if err != nil {
		return nil, err
	}
	n.tokens, n.transport, n.pool, n.reserved, n.unpriced = m.tokens, m.transport, m.pool, m.reserved, m.unpriced
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

// Credential says where the daemon's model credential comes from (never its value), or
// ErrNoCredential with what to configure.
func (m *ModelGateway) Credential() (string, error) {
	if m.credential.Value == "" {
		return "", gateway.ErrNoCredential
	}
	return m.credential.String(), nil
}

// Upstream is where the model gateway forwards.
func (m *ModelGateway) Upstream() string { return m.upstream.String() }

// Prices is the price table the gateway turns usage into money with.
func (m *ModelGateway) Prices() pricing.Table { return m.prices }

// cost is what u's tokens cost; a model with no price is logged, once for the daemon.
func (m *ModelGateway) cost(u gateway.Usage, log *slog.Logger) pricing.Cost {
	var c pricing.Cost
	c.Add(m.prices, u.Model, tokensOf(u))
	for _, model := range c.Unpriced {
		if _, logged := m.unpriced.LoadOrStore(model, true); !logged {
			log.Warn("a model has no price: its cost is reported as unknown and no money budget counts it; add [prices.\"MODEL\"] to arizukod.toml",
				"model", model)
		}
	}
	return c
}

func tokensOf(u gateway.Usage) pricing.Tokens {
	return pricing.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens, CacheWrite: u.CacheWriteTokens,
		CacheWrite1h: u.CacheWrite1hTokens}
}

// GroupCredentialSecret is the name a group's credential name is redacted under.
func GroupCredentialSecret(name string) string { return "credential:" + name }

// startModel starts the model gateway of one turn on socket with the policy of its
// folder's path; usage is recorded against the run when it is a row of the store, and
// the budgets that warn are checked as it is. chat is the chat the turn answers, where
// budget notices go. fail hears that the turn cannot reach the model
// (gateway.ModelConfig.Fail). tt, when not nil, gets a span per model request.
func (s *Services) startModel(ctx context.Context, req Request, chat string, policy EffectiveModel, socket string, fail func(error), log *slog.Logger, tt *tracing.Turn) (*gateway.Model, error) {
	m := s.Model
	cfg := gateway.ModelConfig{
		SocketPath:      socket,
		Upstream:        m.upstream,
		Credential:      m.credential,
		Models:          policy.Models,
		RequestsPerTurn: policy.RequestsPerTurn,
		Shared:          m.pool,
		GiveUp:          m.giveUp,
		Fail:            fail,
		Transport:       m.transport,
		Logger:          log,
	}
	if tt != nil {
		cfg.OnRequest = func(r gateway.RequestTrace) { tt.Model(modelRequest(r)) }
	}
	cfg.Record = func(u gateway.Usage) {
		if s.OnUsage != nil {
			s.OnUsage(u)
		}
		used := tokensOf(u) != (pricing.Tokens{})
		if used {
			if c := m.cost(u, log); s.OnCost != nil {
				s.OnCost(req.Folder, u.Model, c)
			}
		}
		if !req.Recorded {
			return
		}
		if err := s.Store.AddUsage(context.WithoutCancel(ctx), req.RunID, store.Usage(u)); err != nil {
			log.Error("record model usage", "err", err)
			return
		}
		if used {
			s.warnBudgets(context.WithoutCancel(ctx), req, chat, policy.Budgets, log)
		}
	}
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
	if len(policy.Budgets) > 0 {
		cfg.Reserve = s.reserve(req, chat, policy.Budgets, log)
	}
	return gateway.StartModel(cfg)
}
