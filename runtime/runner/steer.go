package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/runtime/engine"
)

// ErrNotRunning says a container is not running (not yet started, or ended), so it cannot
// be steered.
var ErrNotRunning = errors.New("container is not running")

// Steer drops messages into a running turn's IPC input directory and sends SIGUSR1 so the
// agent reads them. A container that is gone or not running is engine.ErrNoSuchContainer or
// ErrNotRunning, and the messages are taken back: the caller is told they were not
// delivered, so they must not turn up later.
func (r *Runner) Steer(ctx context.Context, f groupfolder.Folder, containerID string, msgs []contract.Message) error {
	ipc, err := r.cfg.Layout.OpenIPC(f)
	if err != nil {
		return fmt.Errorf("steer %s: %w", f, err)
	}
	defer ipc.Close()
	now := time.Now().UnixNano()
	var written []string
	takeBack := func() {
		for _, name := range written {
			ipc.Remove(name)
		}
	}
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			takeBack()
			return err
		}
		// The input directory is the agent's: written through the IPC directory's
		// descriptor, a link it planted there (input/ itself or a file's name) is never
		// followed.
		name := fmt.Sprintf("input/%d-%03d.json", now, i)
		if err := ipc.WriteFile(name, b, 0o644, nil); err != nil {
			takeBack()
			// The folder's next turn clears the directory as it begins: a write that
			// fails then is a steer that came after its turn had ended.
			if gone := r.notRunning(ctx, containerID); gone != nil {
				return fmt.Errorf("steer %s: %w (%v)", f, gone, err)
			}
			return fmt.Errorf("steer %s: %w", f, err)
		}
		written = append(written, name)
	}
	// The engine refuses a signal to a container that is not running, each in its own
	// words: ask it what the container is then. One that started meanwhile (the signal
	// came while it was being started) gets the signal again.
	var serr error
	for try := 0; ; try++ {
		if serr = r.cfg.Engine.Signal(ctx, containerID, "SIGUSR1"); serr == nil {
			return nil
		}
		st, ierr := r.cfg.Engine.Inspect(context.WithoutCancel(ctx), containerID)
		switch {
		case errors.Is(serr, engine.ErrNoSuchContainer), errors.Is(ierr, engine.ErrNoSuchContainer):
			takeBack()
			return fmt.Errorf("steer %s: %w", f, engine.ErrNoSuchContainer)
		case ierr == nil && !st.Running:
			takeBack()
			return fmt.Errorf("steer %s: %w (%s)", f, ErrNotRunning, st.Status)
		case ierr == nil && try < 2:
			continue
		}
		takeBack()
		return fmt.Errorf("steer %s: signal: %w", f, serr)
	}
}

// notRunning is engine.ErrNoSuchContainer or ErrNotRunning when the container is gone or
// no longer runs, else nil.
func (r *Runner) notRunning(ctx context.Context, containerID string) error {
	st, err := r.cfg.Engine.Inspect(context.WithoutCancel(ctx), containerID)
	switch {
	case errors.Is(err, engine.ErrNoSuchContainer):
		return engine.ErrNoSuchContainer
	case err == nil && !st.Running:
		return ErrNotRunning
	}
	return nil
}

// clearInput removes what an earlier turn left in f's IPC input directory: a stale _close
// would end the new turn at once. A file already gone is fine: a steer to the earlier turn
// that found it ended takes its messages back. Links the agent left there are removed,
// never followed.
func (r *Runner) clearInput(f groupfolder.Folder) error {
	ipc, err := r.cfg.Layout.OpenIPC(f)
	if err != nil {
		return err
	}
	defer ipc.Close()
	return ipc.Clear(contract.InputDir)
}

// writeClose creates the close sentinel in f's IPC input directory, O_EXCL through the
// IPC directory's descriptor: whatever the agent put at that name (its own _close, a
// link to a host file) stays as it is.
func (r *Runner) writeClose(f groupfolder.Folder) error {
	ipc, err := r.cfg.Layout.OpenIPC(f)
	if err != nil {
		return err
	}
	defer ipc.Close()
	file, err := ipc.Create(contract.InputDir+"/"+CloseSentinel, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return file.Close()
}
