package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/runtime/engine"
)

// remove removes the container unless the run was detached; it runs even when ctx is
// cancelled.
func (tr *turnRun) remove(ctx context.Context) {
	if tr.res.Failure == FailDetached {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := tr.r.cfg.Engine.Remove(rctx, tr.id); err != nil {
		tr.note("remove failed: %v", err)
		if tr.res.Failure == FailEngine {
			// The engine went away under the turn: the queue adopts the container when
			// the engine is back, or it is a leftover; it is not this removal's to retry.
			tr.log.Warn("remove container", logging.FieldContainer, tr.res.Container, "err", err)
			return
		}
		tr.log.Error("remove container: retried once the engine answers", logging.FieldContainer, tr.res.Container, "err", err)
		tr.r.removeAgain(tr.id, tr.res.Container)
	}
}

// RetryRemovals removes again the containers whose removal failed. The queue calls it
// while the engine answers; a container still not removable stays for the next call.
func (r *Runner) RetryRemovals(ctx context.Context) {
	r.mu.Lock()
	pending := r.unremoved
	r.unremoved = nil
	r.mu.Unlock()
	for id, name := range pending {
		err := r.cfg.Engine.Remove(ctx, id)
		if err == nil || errors.Is(err, engine.ErrNoSuchContainer) {
			r.log.Info("removed container after a failed removal", logging.FieldContainer, name)
			continue
		}
		r.log.Warn("remove container again", logging.FieldContainer, name, "err", err)
		r.removeAgain(id, name)
	}
}

// removeAgain has RetryRemovals try the container id (named name) again.
func (r *Runner) removeAgain(id, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unremoved == nil {
		r.unremoved = map[string]string{}
	}
	r.unremoved[id] = name
}

// RemoveLeftovers removes the containers of this instance, running or not, that keep does
// not claim: what a crash left behind. keep lets a restarting daemon spare the containers of
// runs it adopts; nil keeps none. It returns the names of the leftovers removed: the
// containers a previous daemon prepared and no turn started, and its warm agents no
// adopted run claims, are removed too, but they are no run's remains and are not counted.
func (r *Runner) RemoveLeftovers(ctx context.Context, keep func(engine.Container) bool) ([]string, error) {
	list, err := r.cfg.Engine.List(ctx, map[string]string{engine.LabelInstance: r.cfg.Instance})
	if err != nil {
		return nil, fmt.Errorf("list leftovers: %w", err)
	}
	var removed []string
	for _, c := range list {
		if c.Labels[engine.LabelInstance] != r.cfg.Instance || keep != nil && keep(c) {
			continue
		}
		if err := r.cfg.Engine.Remove(ctx, c.ID); err != nil {
			return removed, fmt.Errorf("remove leftover %s: %w", c.Name, err)
		}
		if c.Labels[engine.LabelPrepared] != "" && (unstarted(c.State) || c.Labels[engine.LabelWarm] != "") {
			r.log.Debug("removed a container prepared by the previous daemon", logging.FieldContainer, c.Name)
			continue
		}
		r.log.Info("removed leftover container", logging.FieldContainer, c.Name, logging.FieldFolder, c.Labels[engine.LabelFolder], logging.FieldRunID, c.Labels[engine.LabelRun])
		removed = append(removed, c.Name)
	}
	return removed, nil
}

// unstarted says whether an engine's state word is one of a container never started.
func unstarted(state string) bool {
	switch strings.ToLower(state) {
	case "created", "configured", "initialized":
		return true
	}
	return false
}
