package daemon

import (
	"context"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/sidecar"
)

// up reports whether turns may start (and running ones be adopted): the engine answers,
// its details (which the runner checks limits and networks against) are known, and a
// killed daemon's sidecars are stopped.
func (d *Daemon) up() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.engineUp && d.infoKnown && d.cleared
}

func (d *Daemon) engineInfo() engine.Info {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.info
}

// engineCheck is one ping of the engine. Whoever asks while it is under way takes its
// answer rather than pinging again: the watch and the first /health of a socket-activated
// start ask at once, and the start pings ahead while it opens the store.
type engineCheck struct {
	done chan struct{} // closed once the engine answered
	err  error
}

// ping pings the engine in the background. The ping is shared, so it ends with its own
// timeout rather than with the context of whoever asked first.
func (d *Daemon) ping(ctx context.Context) *engineCheck {
	c := &engineCheck{done: make(chan struct{})}
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		c.err = d.engine.Ping(cctx)
		cancel()
		close(c.done)
	}()
	return c
}

// pingAhead starts the first ping before anything it reports to exists: the first
// checkEngine takes its answer.
func (d *Daemon) pingAhead(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.checking = d.ping(ctx)
}

// checkEngine pings the engine now (or takes the answer of the ping under way), records
// the answer and reports whether it answered. An engine that answers and whose details are
// not known (first answer, or back after being away, perhaps another one) is asked for
// them in the background.
func (d *Daemon) checkEngine(ctx context.Context) bool {
	d.mu.Lock()
	c := d.checking
	if c == nil {
		c = d.ping(ctx)
		d.checking = c
	}
	d.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		return false
	}
	err := c.err
	d.mu.Lock()
	if d.checking != c {
		// Another caller recorded this answer.
		d.mu.Unlock()
		return err == nil
	}
	d.checking = nil
	was, first := d.engineUp, d.checkedAt.IsZero()
	d.engineUp, d.checkedAt = err == nil, time.Now()
	if err == nil {
		d.engErr = ""
		d.answerOnce.Do(func() { close(d.answered) })
	} else {
		d.engErr, d.infoKnown = err.Error(), false
	}
	ask := err == nil && !d.infoKnown && !d.infoBusy
	d.infoBusy = d.infoBusy || ask
	d.mu.Unlock()
	switch {
	case err == nil && !was:
		d.log.Info("engine answers a ping", "socket", d.cfg.EngineSocket)
	case err != nil && (was || first):
		d.log.Warn("engine unavailable: work stays queued until it answers", "err", err)
	}
	if ask {
		go d.askInfo(context.WithoutCancel(ctx))
	}
	d.notifyStatus()
	return err == nil
}

// askInfo asks the engine for its details; once they are known turns may start.
func (d *Daemon) askInfo(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	info, err := d.engine.Info(cctx)
	cancel()
	d.mu.Lock()
	d.infoBusy = false
	if err == nil {
		d.info, d.infoKnown = info, true
	}
	d.mu.Unlock()
	if err != nil {
		d.log.Warn("engine answers a ping but not Info: turns wait until it does", "err", err)
		return
	}
	d.log.Info("engine answers", "engine", info.Name, "version", info.Version, "rootless", info.Rootless, "socket", info.Socket)
	d.queue.Wake()
	d.notifyStatus()
}

// clearSidecars stops what the sidecars of a killed daemon left (transient units,
// containers, env files) once the engine first answers, before any turn can start new
// ones (up) but off the path of the first answer to /health. One attempt, as at every
// start: what it could not stop is logged.
func (d *Daemon) clearSidecars(ctx context.Context, m *sidecar.Manager) {
	select {
	case <-d.answered:
	case <-ctx.Done():
		return
	}
	if stopped, err := m.Cleanup(ctx); err != nil {
		d.log.Warn("stopping leftover sidecars", "err", err, "stopped", stopped)
	} else if len(stopped) > 0 {
		d.log.Info("stopped leftover sidecars", "units", stopped)
	}
	d.mu.Lock()
	d.cleared = true
	d.mu.Unlock()
	d.queue.Wake()
}

// Health reports the daemon's state for GET /health. A daemon that has no answer from its
// engine yet (the first connection of a socket-activated start) pings it first, or waits for
// the ping under way, so that its first answer says how the engine is rather than
// "starting"; nothing else of the start (the engine's details, a killed daemon's sidecars)
// holds it up.
func (d *Daemon) Health(ctx context.Context) apiwire.HealthReport {
	d.mu.Lock()
	unchecked := d.checkedAt.IsZero()
	d.mu.Unlock()
	if unchecked {
		d.checkEngine(ctx)
	}
	return d.report(ctx)
}

// report is the daemon's state as last seen, for Health and STATUS=.
func (d *Daemon) report(ctx context.Context) apiwire.HealthReport {
	d.mu.Lock()
	info, known := d.info, d.infoKnown
	h := apiwire.HealthReport{Status: "ok", Version: d.version, Image: d.cfg.Image, Engine: apiwire.EngineHealth{Up: d.engineUp, Error: d.engErr}}
	if known {
		h.Engine.Name, h.Engine.Version, h.Engine.Socket = info.Name, info.Version, info.Socket
	}
	unchecked := d.checkedAt.IsZero()
	d.mu.Unlock()
	switch {
	case unchecked:
		h.Status = "starting"
	case !h.Engine.Up:
		h.Status = "degraded"
	case known && info.CheckLimits(d.cfg.Limits.AllowUnlimited) != nil:
		// Every turn would be refused: the daemon cannot do its work until this is fixed.
		h.Status = "degraded"
	}
	switch {
	case h.Engine.Up && known:
		h.Engine.Limits = limitsHealth(info, d.cfg.Limits.AllowUnlimited)
	case h.Engine.Up:
		h.Engine.Limits = apiwire.LimitsPending
	}
	if m := d.sys.Load().Model; m != nil {
		h.Model.Upstream = m.Upstream()
		if cred, err := m.Credential(); err != nil {
			h.Model.Error = err.Error()
		} else {
			h.Model.Credential = cred
		}
	}
	if c, err := d.store.CountRuns(ctx); err == nil {
		h.Running, h.Queued = c.Running, c.Queued
	}
	return h
}

// limitsHealth is EngineHealth.Limits for an engine that answers.
func limitsHealth(info engine.Info, allowUnlimited bool) string {
	switch err := info.CheckLimits(allowUnlimited); {
	case err != nil:
		return err.Error()
	case info.NoLimits != "":
		return "not applied (allow_unlimited = true): " + info.NoLimits
	}
	return "applied"
}
