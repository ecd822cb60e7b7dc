package turn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/tracing"
)

// Runner runs a turn's container, or adopts one a previous daemon started.
type Runner interface {
	Run(ctx context.Context, t runner.Turn) (runner.Result, error)
	Adopt(ctx context.Context, t runner.Turn, container string, startedAt time.Time) (runner.Result, error)
}

// Adoption is a container a previous daemon started for the run.
type Adoption struct {
	Container string
	StartedAt time.Time
	// InputSent says that daemon wrote the turn's input whole (Watch.OnInput was called).
	InputSent bool
}

// Watch is how the caller follows a turn's container; every field may be nil.
type Watch struct {
	// OnReady is called once the services are up, right before the container is run or
	// adopted: an adopted container may take steering from then on.
	OnReady func()
	// OnCreated learns the container's name and id before it starts.
	OnCreated func(name, id string)
	// OnInput is called once the whole input line is written to the container's stdin.
	OnInput func()
	// OnStderr gets each line the container prints on stderr.
	OnStderr func(line string)
	// OnPhases hears how long the parts of the turn took, once it is over (not when it
	// detached, nor when it could not be attempted).
	OnPhases func(Phases)
	// Detach, when closed, leaves the container running and ends the turn FailDetached.
	Detach <-chan struct{}
}

// Run is one turn from start to end, the same for the daemon's queue and `arizukod run
// --local`: the group's plan is read and its directories made once, the services that live
// as long as the container (Builder.Services) are started in them, the container is run
// (or req.Adopt's adopted) by r, and the services are stopped once it is over. The caller
// records the Result. (The runner looks at the directories once more right before the
// engine mounts them, as groupfolder.Layout.Ensure asks: starting the sidecars may take
// seconds, time enough to swap a directory for a symlink.) The error is non-nil only when the turn could not be attempted: it
// says "prepare turn" for what failed before the container, "run" for the runner's.
func (b *Builder) Run(ctx context.Context, req Request, r Runner, w Watch) (res runner.Result, err error) {
	c := &clock{begin: time.Now(), tt: b.Tracer.StartTurn(ctx, tracing.TurnStart{
		RunID: req.RunID, Folder: string(req.Folder), TaskID: req.TaskID,
		Queued: req.Queued, Picked: req.Picked, Adopted: req.Adopt != nil,
	})}
	defer func() { c.end(res, err) }()
	t, plan, dirs, err := b.build(ctx, req)
	if err != nil {
		c.phase(tracing.SpanPrepare, c.begin, err)
		return runner.Result{}, fmt.Errorf("prepare turn: %w", err)
	}
	if b.Services != nil && b.Services.Warm != nil && warmable(plan) {
		b.Services.Warm.noteSender(req.Folder, req.SenderJID)
		t.Warm = true
		if t.WarmKey, err = homeKey(b.Layout, req.Folder, dirs); err != nil {
			c.phase(tracing.SpanPrepare, c.begin, err)
			return runner.Result{}, fmt.Errorf("prepare turn: %w", err)
		}
	}
	if s, ok := r.(Settler); ok {
		// Before anything the agent could reach starts: a warm agent this turn does not
		// use is gone first (an adopted turn uses none), and none is made for the folder
		// until the turn is over.
		st := t
		st.Warm = st.Warm && req.Adopt == nil
		if b.Services != nil {
			creds := plan.Config.Credentials
			st.Env, st.ContainerEnv = append(slices.Clone(t.Env), b.Services.env(creds)...), b.Services.Model.containerEnv(creds)
		}
		defer s.Settle(ctx, st)()
	}
	// serve tells the services which container is the turn's, once the runner knows.
	serve := func(string) error { return nil }
	// The model gateway ends the turn when it cannot reach the model (cancelling rctx
	// with why), rather than leave the agent retrying for minutes.
	rctx, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	stop := func() {}
	if b.Services != nil {
		svc, err := b.Services.start(ctx, req, plan, b.Layout, dirs, &t, giveUp, c)
		if err != nil {
			c.phase(tracing.SpanPrepare, c.begin, err)
			return runner.Result{}, fmt.Errorf("prepare turn: %w", err)
		}
		stop, serve = svc.stop, svc.serve
	}
	c.prepared = c.phase(tracing.SpanPrepare, c.begin, nil)
	defer func() {
		stop()
		finished := time.Now()
		if res.Failure == runner.FailDetached || err != nil {
			return
		}
		c.ran = cmp.Or(c.ran, finished)
		c.tt.Phase(tracing.SpanFinish, c.ran, finished, nil)
		if w.OnPhases != nil {
			w.OnPhases(c.phases(finished))
		}
	}()
	if w.OnReady != nil {
		w.OnReady()
	}
	t.OnStderr, t.Detach = w.OnStderr, w.Detach
	t.OnInput = func() {
		c.input = c.phase(tracing.SpanStart, c.created, nil)
		if w.OnInput != nil {
			w.OnInput()
		}
	}
	t.OnCreated = func(name, id string) {
		c.created = c.phase(tracing.SpanCreate, c.call, nil)
		if err := serve(name); err != nil {
			b.turnLog(req).Error("model gateway", logging.FieldContainer, name, "err", err)
		}
		if w.OnCreated != nil {
			w.OnCreated(name, id)
		}
	}
	c.call = time.Now()
	if a := req.Adopt; a != nil {
		t.InputSent = a.InputSent
		if err := serve(a.Container); err != nil {
			return runner.Result{}, fmt.Errorf("prepare turn: %w", err)
		}
		res, err = r.Adopt(rctx, t, a.Container, a.StartedAt)
	} else {
		res, err = r.Run(rctx, t)
	}
	switch {
	case res.Failure == runner.FailDetached:
	case c.created.IsZero() && req.Adopt == nil:
		// No container was made: the runner's whole call was its creation.
		c.ran = c.phase(tracing.SpanCreate, c.call, failed(res, err))
		c.created = c.ran
	default:
		c.ran = c.phase(tracing.SpanRun, cmp.Or(c.input, c.created, c.call), nil)
	}
	if res.Failure != runner.FailDetached {
		b.importProject(ctx, req)
	}
	if err != nil {
		return res, fmt.Errorf("run: %w", err)
	}
	if res.Failure == runner.FailKilled && ctx.Err() == nil {
		res = modelFailure(res, context.Cause(rctx))
	}
	return res, nil
}

// importTimeout bounds taking a turn's commits into the project's repository: a local
// fetch, which a daemon that stops still finishes.
const importTimeout = 2 * time.Minute

// importProject takes what the agent committed in the group's project into the
// operator's repository, once its container is gone. A failure is logged: the turn's
// result stands, and the next turn's end tries again.
func (b *Builder) importProject(ctx context.Context, req Request) {
	if b.Projects == nil {
		return
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), importTimeout)
	defer cancel()
	if err := b.Projects.Import(ictx, req.Folder); err != nil {
		b.turnLog(req).Error("project: the group's branch was not imported", "err", err)
	}
}

// modelFailure is the result of a turn the model gateway gave up (its container was
// stopped): without a credential a misconfiguration that a retry will not fix, with an
// upstream that kept failing a failure to retry later.
func modelFailure(res runner.Result, cause error) runner.Result {
	switch {
	case errors.Is(cause, gateway.ErrNoCredential):
		res.Failure, res.Terminal = runner.FailMisconfig, true
		res.Output = contract.Output{Status: contract.StatusFatal, Error: "the agent asked for the model, and the daemon has " + cause.Error()}
	case errors.Is(cause, gateway.ErrUpstreamDown):
		res.Failure, res.Terminal = runner.FailModel, false
		res.Output = contract.Output{Status: contract.StatusFatal, Error: cause.Error()}
	}
	return res
}

// Preparer makes a folder's next container ahead of its turn.
type Preparer interface {
	Prepare(ctx context.Context, t runner.Turn) error
}

// Settler is a runner with warm agents: a turn settles its folder's warm agent before it
// starts its services, and calls done once it is over (runner.Runner.Settle).
type Settler interface {
	Settle(ctx context.Context, t runner.Turn) (done func())
}

// Warmer is a runner that may start a warm agent now (runner.Runner.Warms).
type Warmer interface {
	Warms() bool
}

// Prepare has r make f's next container ahead, from what a turn of f would get now: its
// container config's limits, network and validated mounts, its timeout and the services'
// environment. A turn that differs in any of them (a run with its own timeout, a config
// changed since) does not use it. A group whose mounts are refused gets none: its turn
// fails closed anyway.
func (b *Builder) Prepare(ctx context.Context, f groupfolder.Folder, r Preparer) error {
	plan, err := b.Plan(ctx, f)
	if err != nil || len(plan.Rejected) > 0 {
		return err
	}
	if w, ok := r.(Warmer); ok && w.Warms() && b.Services != nil && b.Services.Warm != nil && warmable(plan) {
		return b.prepareWarm(ctx, f, r)
	}
	limits, extra, err := b.containerLimits(plan)
	if err != nil {
		return err
	}
	t := runner.Turn{Folder: f, Limits: limits, ExtraMounts: extra, Timeout: plan.timeout()}
	if b.Projects != nil {
		if t.ProjectMounts, err = b.Projects.Mounts(ctx, f); err != nil {
			return err
		}
	}
	if b.Services != nil {
		creds := plan.Config.Credentials
		t.Env, t.ContainerEnv = b.Services.env(creds), b.Services.Model.containerEnv(creds)
	}
	return r.Prepare(ctx, t)
}

// prepareWarm has r start f's next agent ahead (a warm agent, for an image that declares
// it): the turn is built as the next turn of f from the last sender would be (its system
// prompt, session, grants, seeded home), without messages, run or chat; its MCP server is
// held until that turn binds it.
func (b *Builder) prepareWarm(ctx context.Context, f groupfolder.Folder, r Preparer) error {
	t, plan, dirs, err := b.build(ctx, Request{Folder: f, SenderJID: b.Services.Warm.lastSender(f)})
	if err != nil {
		return err
	}
	creds := plan.Config.Credentials
	t.Env, t.ContainerEnv = b.Services.env(creds), b.Services.Model.containerEnv(creds)
	t.Warm = true
	if t.WarmKey, err = homeKey(b.Layout, f, dirs); err != nil {
		return err
	}
	t.Hold = func() (func(), error) { return b.Services.hold(ctx, b.Layout, f, dirs) }
	return r.Prepare(ctx, t)
}
