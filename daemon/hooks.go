package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/ipc"
	"github.com/arizuko/arizukod/queue"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/scheduler"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// Where the agent finds the per-turn sockets: the group's IPC directory is mounted there.
const (
	containerIPCDir = "/var/run/pub/arizuko"
	modelSocket     = "model.sock"
	egressSocket    = "egress.sock"
)

// modelGateway is what every turn's model gateway shares.
type modelGateway struct {
	upstream       *url.URL
	credential     gateway.Credential // the daemon's; empty when none is configured
	credentialsDir string             // the groups' own credentials
	tokens         *gateway.Tokens
	transport      http.RoundTripper // shared by all turns, so connections are reused
}

// turnHooks surround each turn with what lives exactly as long as its container: the
// group's sidecars, its MCP server on data/ipc/<folder>/router.sock, its model gateway on
// model.sock and its egress proxy on egress.sock.
type turnHooks struct {
	layout   groupfolder.Layout
	store    *store.Store
	builder  *turn.Builder
	sidecars *sidecar.Manager
	model    modelGateway
	queue    func() *queue.Queue
	loc      *time.Location
	log      *slog.Logger
}

// Before starts the sidecars, the MCP server, the model gateway and the egress proxy, and
// hands the agent its model token; the returned func stops them all.
func (h *turnHooks) Before(ctx context.Context, run *store.Run, f groupfolder.Folder, t *runner.Turn) (func(), error) {
	plan, err := h.builder.Plan(ctx, f)
	if err != nil {
		return nil, err
	}
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	log := h.log.With("ARIZUKO_RUN_ID", run.ID, "ARIZUKO_FOLDER", run.Folder)
	sc, err := h.sidecars.Start(ctx, f, run.ID, plan.Config.Sidecars)
	if err != nil {
		return nil, err
	}
	stops = append(stops, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := sc.Stop(sctx); err != nil {
			log.Error("stop sidecars", "err", err)
		}
	})
	ipcDir, err := h.layout.IPCDir(f)
	if err != nil {
		stopAll()
		return nil, err
	}
	groupDir, err := h.layout.GroupDir(f)
	if err != nil {
		stopAll()
		return nil, err
	}
	srv, err := ipc.Start(ctx, ipc.ServerConfig{
		Folder: string(f), SocketPath: filepath.Join(ipcDir, "router.sock"), GroupDir: groupDir,
		ReplyTo: t.Input.ChatJID, Store: h.store, RunID: run.ID, Logger: h.log,
		Wake: func(string) { h.queue().Wake() },
		NextRun: func(kind, expr string, now time.Time) (int64, error) {
			return scheduler.NextRun(kind, expr, now, h.loc)
		},
	})
	if err != nil {
		stopAll()
		return nil, err
	}
	stops = append(stops, func() {
		if err := srv.Stop(); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("stop MCP server", "err", err)
		}
	})
	model, err := h.startModel(ctx, run, plan.Config.Model, ipcDir, log)
	if err != nil {
		stopAll()
		return nil, err
	}
	stops = append(stops, model.Stop)
	egress, err := gateway.StartEgress(gateway.EgressConfig{
		SocketPath: filepath.Join(ipcDir, egressSocket), Allow: plan.Config.Egress, Logger: log,
		Record: func(host string, up, down int64, refused bool) {
			e := store.Egress{Host: host, BytesUp: up, BytesDown: down}
			if refused {
				e.Refused = 1
			} else {
				e.Requests = 1
			}
			if err := h.store.AddEgress(context.WithoutCancel(ctx), run.ID, e); err != nil {
				log.Error("record egress", "err", err)
			}
		},
	})
	if err != nil {
		stopAll()
		return nil, err
	}
	stops = append(stops, egress.Stop)
	token := h.model.tokens.Token(run.ID, run.Attempt)
	t.Env = append(t.Env,
		"ARIZUKO_MODEL_TOKEN="+token,
		"ANTHROPIC_API_KEY="+token,
		"ARIZUKO_MODEL_SOCKET="+containerIPCDir+"/"+modelSocket,
		"ARIZUKO_EGRESS_SOCKET="+containerIPCDir+"/"+egressSocket,
	)
	return stopAll, nil
}

// startModel starts the turn's model gateway with the group's policy.
func (h *turnHooks) startModel(ctx context.Context, run *store.Run, policy *turn.ModelPolicy, ipcDir string, log *slog.Logger) (*gateway.Model, error) {
	cfg := gateway.ModelConfig{
		SocketPath: filepath.Join(ipcDir, modelSocket),
		Token:      h.model.tokens.Token(run.ID, run.Attempt),
		Upstream:   h.model.upstream,
		Credential: h.model.credential,
		Transport:  h.model.transport,
		Logger:     log,
		Record: func(u gateway.Usage) {
			if err := h.store.AddUsage(context.WithoutCancel(ctx), run.ID, store.Usage(u)); err != nil {
				log.Error("record model usage", "err", err)
			}
		},
	}
	if policy != nil {
		cfg.Models, cfg.RequestsPerTurn = policy.Models, policy.RequestsPerTurn
		if policy.Credential != "" {
			c, err := gateway.GroupCredential(policy.Credential, h.model.credentialsDir, os.Getenv)
			if err != nil {
				return nil, fmt.Errorf("container_config.model.credential: %w", err)
			}
			cfg.Credential = c
		}
		if limit := policy.TokensPerDay; limit > 0 {
			cfg.Budget = func(ctx context.Context) error {
				now := time.Now().In(h.loc)
				midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, h.loc)
				used, err := h.store.FolderTokens(ctx, run.Folder, midnight.UnixMilli())
				if err != nil {
					return err
				}
				if used >= limit {
					return fmt.Errorf("folder %s used %d of its %d tokens today (container_config.model.tokens_per_day); it resets at midnight", run.Folder, used, limit)
				}
				return nil
			}
		}
	}
	return gateway.StartModel(cfg)
}
