package daemon

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/ipc"
	"github.com/arizuko/arizukod/queue"
	"github.com/arizuko/arizukod/scheduler"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// turnHooks surround each turn with what lives exactly as long as its container: the
// group's sidecars and its MCP server on data/ipc/<folder>/router.sock.
type turnHooks struct {
	layout   groupfolder.Layout
	store    *store.Store
	builder  *turn.Builder
	sidecars *sidecar.Manager
	queue    func() *queue.Queue
	loc      *time.Location
	log      *slog.Logger
}

// Before starts the sidecars, then the MCP server; the returned func stops both.
func (h *turnHooks) Before(ctx context.Context, run *store.Run, f groupfolder.Folder) (func(), error) {
	plan, err := h.builder.Plan(ctx, f)
	if err != nil {
		return nil, err
	}
	sc, err := h.sidecars.Start(ctx, f, run.ID, plan.Config.Sidecars)
	if err != nil {
		return nil, err
	}
	stopSidecars := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := sc.Stop(sctx); err != nil {
			h.log.Error("stop sidecars", "ARIZUKO_RUN_ID", run.ID, "ARIZUKO_FOLDER", run.Folder, "err", err)
		}
	}
	ipcDir, err := h.layout.IPCDir(f)
	if err != nil {
		stopSidecars()
		return nil, err
	}
	groupDir, err := h.layout.GroupDir(f)
	if err != nil {
		stopSidecars()
		return nil, err
	}
	srv, err := ipc.Start(ctx, ipc.ServerConfig{
		Folder: string(f), SocketPath: filepath.Join(ipcDir, "router.sock"), GroupDir: groupDir,
		Store: h.store, RunID: run.ID, Logger: h.log,
		Wake: func(string) { h.queue().Wake() },
		NextRun: func(kind, expr string, now time.Time) (int64, error) {
			return scheduler.NextRun(kind, expr, now, h.loc)
		},
	})
	if err != nil {
		stopSidecars()
		return nil, err
	}
	return func() {
		if err := srv.Stop(); err != nil && !errors.Is(err, context.Canceled) {
			h.log.Warn("stop MCP server", "ARIZUKO_RUN_ID", run.ID, "err", err)
		}
		stopSidecars()
	}, nil
}
