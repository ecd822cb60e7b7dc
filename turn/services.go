package turn

import (
	"context"
	"errors"
	"log/slog"
	"path"
	"path/filepath"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/agentdir"
	"github.com/arizuko/arizukod/ipc"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/pricing"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/scheduler"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/store"
)

// ServiceStore is what the services of a turn read and record: the MCP tools' tables,
// model usage, egress, the tokens of the day and the model usage of a period of a
// folder's subtree, the budget notices sent and the folders a budget parks.
type ServiceStore interface {
	ipc.Store
	AddUsage(ctx context.Context, runID string, u store.Usage) error
	AddEgress(ctx context.Context, runID string, e store.Egress) error
	SubtreeTokens(ctx context.Context, folder string, since int64) (int64, error)
	ModelUsage(ctx context.Context, folder string, from, to int64) ([]store.ModelUsage, error)
	NoteBudget(ctx context.Context, folder, period string, start int64, percent int) (bool, error)
	Park(ctx context.Context, folder, reason string) (store.Cursor, error)
}

// Services are what lives exactly as long as a turn's container, in the group's IPC
// directory: the group's sidecars, its MCP server on router.sock, its model gateway on
// model.sock and its egress proxy on egress.sock. Every field is required but Location
// (time.Local), Logger (slog.Default), OnUsage, OnCost and Warm.
type Services struct {
	Store    ServiceStore
	Sidecars *sidecar.Manager
	Model    *ModelGateway
	// Location is the daemon's time zone: of task schedules and the model budget's day.
	Location *time.Location
	Logger   *slog.Logger
	// EgressCA is the CA the egress proxy intercepts the hosts of a group's credentials
	// with (OpenEgressCA); without it a turn of a group with credentials fails.
	EgressCA *gateway.CA
	// OnUsage, when set, hears each model response's usage as the gateway reads it (the
	// daemon's metrics), whether or not the run is a row of the store.
	OnUsage func(gateway.Usage)
	// OnCost, when set, hears what each model response of a turn of folder cost (the
	// daemon's metrics), whether or not the run is a row of the store.
	OnCost func(folder groupfolder.Folder, model string, c pricing.Cost)

	// Warm is what the folders' warm agents hold (their MCP servers, the last sender of
	// each folder), shared by the Services of every reload; nil makes none.
	Warm *Warm
}

func (s *Services) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

func (s *Services) location() *time.Location {
	if s.Location == nil {
		return time.Local
	}
	return s.Location
}

// serviceEnv is where the agent finds the services, the same for every turn: a container
// prepared ahead of its turn has it too. Its model token is minted for the container
// (ModelGateway.ContainerEnv).
func serviceEnv() []string {
	return []string{
		"ARIZUKO_MODEL_SOCKET=" + path.Join(contract.IPCDir, contract.ModelSocket),
		"ARIZUKO_EGRESS_SOCKET=" + path.Join(contract.IPCDir, contract.EgressSocket),
	}
}

// running are the services of one turn.
type running struct {
	stop   func()
	model  *gateway.Model
	token  func(container string) string
	egress *gateway.Egress
	// placeholders are the container's placeholders of the group's credentials.
	placeholders func(container string) map[string]string
}

// serve makes the model gateway take the token of the turn's container, and the egress
// proxy know its placeholders.
func (r running) serve(container string) error {
	r.egress.SetPlaceholders(r.placeholders(container))
	return r.model.Accept(r.token(container))
}

// start starts the services of one turn and hands the agent what reaches them in t's
// environment; stop stops them, the last started first. fail hears that the turn cannot
// reach the model. c notes how long the sidecars took, and the services tell its trace
// what the agent does through them.
func (s *Services) start(ctx context.Context, req Request, plan Plan, layout groupfolder.Layout, dirs groupfolder.Dirs, t *runner.Turn, fail func(error), c *clock) (running, error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	log := s.logger().With(logging.FieldRunID, req.RunID, logging.FieldFolder, string(req.Folder))
	began := time.Now()
	sc, err := s.Sidecars.Start(ctx, req.Folder, dirs.SidecarSockets, req.RunID, t.Limits.Runtime, plan.Config.Sidecars)
	c.sidecars = time.Since(began)
	if n := len(plan.Config.Sidecars); n > 0 {
		c.tt.Sidecars(n, began, began.Add(c.sidecars), err)
	}
	if err != nil {
		return running{}, err
	}
	stops = append(stops, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := sc.Stop(sctx); err != nil {
			log.Error("stop sidecars", "err", err)
		}
	})
	var onTool func(tool, outcome string, start, end time.Time)
	var onConn func(host string, start, end time.Time, up, down int64, refused bool)
	if c.tt != nil {
		onTool, onConn = c.tt.ToolCall, c.tt.Egress
	}
	// The MCP server a warm agent of the folder connected to at its start, held until
	// now, serves the turn whatever container runs it.
	srv := s.Warm.takeHeld(req.Folder)
	if srv != nil {
		err = srv.Bind(ipc.Binding{ReplyTo: t.Input.ChatJID, RunID: s.recordedID(req), Wake: req.Wake, OnTool: onTool})
	} else {
		srv, err = ipc.Start(ctx, ipc.ServerConfig{
			Folder: string(req.Folder), SocketPath: filepath.Join(dirs.IPC, contract.RouterSocket), OpenGroup: func() (*agentdir.Dir, error) { return layout.OpenGroup(req.Folder) },
			ReplyTo: t.Input.ChatJID, Store: s.Store, RunID: s.recordedID(req), Logger: log, Wake: req.Wake, OnTool: onTool,
			NextRun: func(kind, expr string, now time.Time) (int64, error) {
				return scheduler.NextRun(kind, expr, now, s.location())
			},
		})
	}
	if err != nil {
		stopAll()
		return running{}, err
	}
	stops = append(stops, func() {
		if err := srv.Stop(); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("stop MCP server", "err", err)
		}
	})
	model, err := s.startModel(ctx, req, t.Input.ChatJID, plan.Model, filepath.Join(dirs.IPC, contract.ModelSocket), fail, log, c.tt)
	if err != nil {
		stopAll()
		return running{}, err
	}
	stops = append(stops, model.Stop)
	creds := plan.Config.Credentials
	bindings, err := s.Model.bindings(creds)
	if err == nil && len(bindings) > 0 && s.EgressCA == nil {
		err = errors.New("containerConfig.credentials: this daemon has no egress CA to send them with")
	}
	if err != nil {
		stopAll()
		return running{}, err
	}
	egress, err := gateway.StartEgress(gateway.EgressConfig{
		SocketPath: filepath.Join(dirs.IPC, contract.EgressSocket), Allow: plan.Config.Egress, Logger: log,
		Record: s.recordEgress(ctx, req, log), OnConn: onConn,
		Bindings: bindings, CA: s.EgressCA,
	})
	if err != nil {
		stopAll()
		return running{}, err
	}
	stops = append(stops, egress.Stop)
	t.Env = append(t.Env, s.env(creds)...)
	t.ContainerEnv = s.Model.containerEnv(creds)
	return running{stop: stopAll, model: model, token: s.Model.tokens.Token, egress: egress,
		placeholders: func(c string) map[string]string { return s.Model.placeholders(c, creds) }}, nil
}

// env is what a turn's container gets in its spec: where the services are, where the
// egress CA is, and which variables hold placeholders.
func (s *Services) env(creds []CredentialBinding) []string {
	env := serviceEnv()
	if s.EgressCA != nil {
		env = append(env, caEnv()...)
	}
	return append(env, credentialNames(creds)...)
}

// recordedID is the run the MCP server records outbox rows for: none for a run that is
// not a row of the store.
func (s *Services) recordedID(req Request) string {
	if !req.Recorded {
		return ""
	}
	return req.RunID
}

// recordEgress records what the egress proxy moved against the run, when it is a row of
// the store.
func (s *Services) recordEgress(ctx context.Context, req Request, log *slog.Logger) func(host string, up, down int64, refused bool) {
	if !req.Recorded {
		return nil
	}
	return func(host string, up, down int64, refused bool) {
		e := store.Egress{Host: host, BytesUp: up, BytesDown: down}
		if refused {
			e.Refused = 1
		} else {
			e.Requests = 1
		}
		if err := s.Store.AddEgress(context.WithoutCancel(ctx), req.RunID, e); err != nil {
			log.Error("record egress", "err", err)
		}
	}
}
