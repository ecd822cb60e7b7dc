package turn

import (
	"context"
	"fmt"
	"time"

	"github.com/arizuko/arizukod/runtime/runner"
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
func (b *Builder) Run(ctx context.Context, req Request, r Runner, w Watch) (runner.Result, error) {
	t, plan, dirs, err := b.build(ctx, req)
	if err != nil {
		return runner.Result{}, fmt.Errorf("prepare turn: %w", err)
	}
	if b.Services != nil {
		stop, err := b.Services.start(ctx, req, plan, dirs, &t)
		if err != nil {
			return runner.Result{}, fmt.Errorf("prepare turn: %w", err)
		}
		defer stop()
	}
	if w.OnReady != nil {
		w.OnReady()
	}
	t.OnCreated, t.OnInput, t.OnStderr, t.Detach = w.OnCreated, w.OnInput, w.OnStderr, w.Detach
	var res runner.Result
	if a := req.Adopt; a != nil {
		t.InputSent = a.InputSent
		res, err = r.Adopt(ctx, t, a.Container, a.StartedAt)
	} else {
		res, err = r.Run(ctx, t)
	}
	if err != nil {
		return res, fmt.Errorf("run: %w", err)
	}
	return res, nil
}
