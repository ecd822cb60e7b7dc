package detect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/arizuko/arizukod/runtime/engine"
)

// Detecting is an engine.Engine that finds its engine on first use, and again whenever
// the one it found stops answering a ping: for a daemon that starts before its engine does.
type Detecting struct {
	kind string

	mu  sync.Mutex
	cur engine.Engine
}

// New returns an engine.Engine over the first candidate of kind that answers.
func New(kind string) *Detecting { return &Detecting{kind: kind} }

// Ping detects the engine when there is none, or when the current one does not answer.
func (d *Detecting) Ping(ctx context.Context) error {
	_, err := d.answering(ctx)
	return err
}

// Info asks the engine that answers, detecting it as Ping does.
func (d *Detecting) Info(ctx context.Context) (engine.Info, error) {
	e, err := d.answering(ctx)
	if err != nil {
		return engine.Info{}, err
	}
	return e.Info(ctx)
}

// answering returns the current engine if it answers a ping, or else the first one Find
// finds, which becomes the current one.
func (d *Detecting) answering(ctx context.Context) (engine.Engine, error) {
	d.mu.Lock()
	cur := d.cur
	d.mu.Unlock()
	if cur != nil && cur.Ping(ctx) == nil {
		return cur, nil
	}
	e, err := Find(ctx, d.kind, "")
	d.mu.Lock()
	d.cur = e
	d.mu.Unlock()
	return e, err
}

func (d *Detecting) current() (engine.Engine, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return nil, fmt.Errorf("%w yet", engine.ErrNoEngine)
	}
	return d.cur, nil
}

func (d *Detecting) ImageExists(ctx context.Context, ref string) (bool, error) {
	e, err := d.current()
	if err != nil {
		return false, err
	}
	return e.ImageExists(ctx, ref)
}

func (d *Detecting) ImportImage(ctx context.Context, ref string, rootfs io.Reader, changes []string) error {
	e, err := d.current()
	if err != nil {
		return err
	}
	return e.ImportImage(ctx, ref, rootfs, changes)
}

func (d *Detecting) Create(ctx context.Context, spec engine.Spec) (string, error) {
	e, err := d.current()
	if err != nil {
		return "", err
	}
	return e.Create(ctx, spec)
}

func (d *Detecting) Attach(ctx context.Context, id string) (*engine.Attachment, error) {
	e, err := d.current()
	if err != nil {
		return nil, err
	}
	return e.Attach(ctx, id)
}

func (d *Detecting) Start(ctx context.Context, id string) error {
	e, err := d.current()
	if err != nil {
		return err
	}
	return e.Start(ctx, id)
}

func (d *Detecting) Wait(ctx context.Context, id string) (engine.State, error) {
	e, err := d.current()
	if err != nil {
		return engine.State{}, err
	}
	return e.Wait(ctx, id)
}

func (d *Detecting) Inspect(ctx context.Context, id string) (engine.State, error) {
	e, err := d.current()
	if err != nil {
		return engine.State{}, err
	}
	return e.Inspect(ctx, id)
}

func (d *Detecting) Signal(ctx context.Context, id, signal string) error {
	e, err := d.current()
	if err != nil {
		return err
	}
	return e.Signal(ctx, id, signal)
}

func (d *Detecting) Stop(ctx context.Context, id string, grace time.Duration) error {
	e, err := d.current()
	if err != nil {
		return err
	}
	return e.Stop(ctx, id, grace)
}

func (d *Detecting) Remove(ctx context.Context, id string) error {
	e, err := d.current()
	if err != nil {
		return err
	}
	return e.Remove(ctx, id)
}

func (d *Detecting) List(ctx context.Context, labels map[string]string) ([]engine.Container, error) {
	e, err := d.current()
	if err != nil {
		return nil, err
	}
	return e.List(ctx, labels)
}

func (d *Detecting) Logs(ctx context.Context, id string, stdout, stderr io.Writer) error {
	e, err := d.current()
	if err != nil {
		return err
	}
	return e.Logs(ctx, id, stdout, stderr)
}

// Init initializes a created container on an engine that prepares containers; on
// another it is errors.ErrUnsupported.
func (d *Detecting) Init(ctx context.Context, id string) error {
	e, err := d.current()
	if err != nil {
		return err
	}
	p, ok := e.(engine.Preparer)
	if !ok {
		return fmt.Errorf("init on %T: %w", e, errors.ErrUnsupported)
	}
	return p.Init(ctx, id)
}

// WatchImages watches the current engine's images when it prepares containers; on
// another it is errors.ErrUnsupported at once.
func (d *Detecting) WatchImages(ctx context.Context, ready func(), changed func(ref string)) error {
	e, err := d.current()
	if err != nil {
		return err
	}
	p, ok := e.(engine.Preparer)
	if !ok {
		return fmt.Errorf("image events of %T: %w", e, errors.ErrUnsupported)
	}
	return p.WatchImages(ctx, ready, changed)
}

// ImageID asks the current engine when it prepares containers; on another it is
// errors.ErrUnsupported.
func (d *Detecting) ImageID(ctx context.Context, ref string) (string, error) {
	e, err := d.current()
	if err != nil {
		return "", err
	}
	p, ok := e.(engine.Preparer)
	if !ok {
		return "", fmt.Errorf("image id on %T: %w", e, errors.ErrUnsupported)
	}
	return p.ImageID(ctx, ref)
}

// ImageLabels asks the current engine when it reads image labels; on another it is
// errors.ErrUnsupported.
func (d *Detecting) ImageLabels(ctx context.Context, ref string) (map[string]string, error) {
	e, err := d.current()
	if err != nil {
		return nil, err
	}
	p, ok := e.(engine.ImageLabeler)
	if !ok {
		return nil, fmt.Errorf("image labels on %T: %w", e, errors.ErrUnsupported)
	}
	return p.ImageLabels(ctx, ref)
}
