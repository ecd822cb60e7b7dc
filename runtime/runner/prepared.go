package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/runtime/engine"
)

// A prepared container is a folder's next agent container, created and initialized ahead
// of its turn on an engine that gains from it (engine.Preparer): the turn then only
// attaches and starts it. It is still a fresh container per turn: never started before,
// used by one turn of its own folder, removed after. Nothing of a run is in it: the run id
// reaches the agent on stdin, and its model token is minted for the container's name
// (Turn.ContainerEnv). It is used only when the spec the turn would create now has the
// same key (specKey: image, limits, network, mounts and the identity of their sources,
// env, timeout) and the image's reference named the same image all along (the runner
// looks again at every event of it); otherwise it is removed and the turn creates its own.

// prepareTimeout bounds the creation and initialization of a prepared container.
const prepareTimeout = time.Minute

// prepared is one container made ahead.
type prepared struct {
	folder groupfolder.Folder
	name   string
	id     string
	key    string
	gen    uint64 // the image generation it was made in
	made   time.Time
	// warm is set for a warm agent (warm.go), with wkey its warmKey; release is its Turn's.
	warm    *warmAgent
	wkey    string
	release func()
	once    sync.Once
}

// released calls p's release once.
func (p *prepared) released() {
	p.once.Do(func() {
		if p.release != nil {
			p.release()
		}
	})
}

// pool holds at most max prepared containers, one per folder, the least recently made
// dropped first.
type pool struct {
	max int

	mu       sync.Mutex
	watching bool   // the engine's image events are followed
	image    string // the id the configured image named at the last look; "" unknown
	warmable bool   // that image declares contract.PrepareLabel
	gen      uint64 // counts image changes and breaks of the stream
	ready    map[groupfolder.Folder]*prepared
	making   map[groupfolder.Folder]chan struct{}
	busy     map[groupfolder.Folder]int // turns between Settle and their end
	// abort cancels the making of a folder's warm agent, for a turn that does not wait
	// longer for it (Settle).
	abort map[groupfolder.Folder]context.CancelFunc
}

// preparer is the engine when preparing pays on it and the runner may prepare.
func (r *Runner) preparer() (engine.Preparer, bool) {
	if r.pool.max <= 0 {
		return nil, false
	}
	p, ok := r.cfg.Engine.(engine.Preparer)
	return p, ok
}

// WatchImages follows the engine's image events while ctx lasts, so that no prepared
// container outlives the image its reference named: until it listens, and whenever its
// stream breaks, nothing is prepared and what was is removed. It returns at once where
// the runner does not prepare (Config.Prepared 0, an engine without the gain).
func (r *Runner) WatchImages(ctx context.Context) {
	p, ok := r.preparer()
	if !ok {
		return
	}
	for ctx.Err() == nil {
		err := p.WatchImages(ctx, func() {
			r.pool.mu.Lock()
			r.pool.watching = true
			r.pool.mu.Unlock()
			r.checkImage(ctx, p)
		}, func(ref string) {
			if ref == "" || sameImage(ref, r.cfg.Image) {
				r.checkImage(ctx, p)
			}
		})
		r.pool.mu.Lock()
		r.pool.watching, r.pool.image = false, ""
		r.pool.mu.Unlock()
		r.invalidate(ctx, "the engine's image events stopped")
		if errors.Is(err, errors.ErrUnsupported) {
			r.log.Info("containers are not prepared ahead on this engine: it would not start them faster")
			return
		}
		if ctx.Err() == nil {
			r.log.Debug("image events", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// checkImage looks at the id the configured image names and drops every prepared
// container when it changed (or cannot be told): an event of the image's reference is not
// always a change of it.
func (r *Runner) checkImage(ctx context.Context, p engine.Preparer) {
	id, err := p.ImageID(ctx, r.cfg.Image)
	if err != nil {
		r.log.Debug("image of prepared containers", "image", r.cfg.Image, "err", err)
		id = ""
	}
	var labels map[string]string
	if l, ok := p.(engine.ImageLabeler); ok {
		if labels, err = l.ImageLabels(ctx, r.cfg.Image); err != nil {
			r.log.Debug("labels of the image of prepared containers", "image", r.cfg.Image, "err", err)
		}
	}
	r.pool.mu.Lock()
	changed := id != r.pool.image || id == ""
	r.pool.image = id
	r.pool.warmable = labels[contract.PrepareLabel] == "1"
	r.pool.mu.Unlock()
	if changed {
		r.invalidate(ctx, "the image changed")
	}
}

// sameImage says whether an engine's full reference (localhost/arizuko-agent:latest) names
// the configured image ref, which may leave out the registry or the tag.
func sameImage(full, ref string) bool {
	if !strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") && !strings.Contains(ref, "@") {
		ref += ":latest"
	}
	return full == ref || strings.HasSuffix(full, "/"+ref)
}

// invalidate drops every prepared container: made before an image event, they may run
// an image their reference no longer names.
func (r *Runner) invalidate(ctx context.Context, why string) {
	r.pool.mu.Lock()
	r.pool.gen++
	stale := r.pool.ready
	r.pool.ready = nil
	r.pool.mu.Unlock()
	for _, p := range stale {
		r.log.Debug("prepared container dropped: "+why, logging.FieldContainer, p.name)
		r.removeLater(ctx, p)
	}
}

// Prepare makes t's folder's next container ahead, from t as the turn would get it (no
// run, no input: those reach the agent when it starts). It does nothing when the folder
// has a prepared container for the same spec already, when preparing does not pay on the
// engine, or while image events are not followed. t's callbacks are not used.
func (r *Runner) Prepare(ctx context.Context, t Turn) error {
	pe, ok := r.preparer()
	if !ok || t.TaskID != "" {
		return nil
	}
	t.RunID = ""
	dirs, err := r.cfg.Layout.Ensure(t.Folder, os.Getuid(), os.Getgid())
	if err != nil {
		return fmt.Errorf("prepare %s: %w", t.Folder, err)
	}
	mounts, err := r.Mounts(t.Folder, dirs, t.ProjectMounts, t.ExtraMounts)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", t.Folder, err)
	}
	spec := r.spec(t, "", mounts, r.timeout(t))
	if err := r.admit(&spec); err != nil {
		return fmt.Errorf("prepare %s: %w", t.Folder, err)
	}
	key, wkey, err := turnKeys(t, spec)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", t.Folder, err)
	}
	warm := t.Warm && t.Hold != nil && r.mayWarm()
	r.pool.mu.Lock()
	// A turn of the folder that runs (Settle) may have its services up already: a warm
	// agent started now could reach them before its own turn.
	warm = warm && r.pool.busy[t.Folder] == 0
	if !r.pool.watching || r.pool.image == "" || r.pool.making[t.Folder] != nil {
		r.pool.mu.Unlock()
		return nil
	}
	if cur := r.pool.ready[t.Folder]; cur != nil && cur.key == key && cur.gen == r.pool.gen && (cur.warm != nil) == warm &&
		(!warm || cur.wkey == wkey && !cur.warm.dead()) {
		r.pool.mu.Unlock()
		return nil
	}
	done := make(chan struct{})
	if r.pool.making == nil {
		r.pool.making = map[groupfolder.Folder]chan struct{}{}
	}
	r.pool.making[t.Folder] = done
	// Made whole or not at all: a request cancelled half-way could leave a container. A
	// turn of the folder waits for it: bounded, so that a stuck engine cannot hold it; a
	// warm agent's making may be cut short by the turn (Settle), and is then removed
	// before the turn goes on.
	timeout := prepareTimeout
	if warm {
		timeout += warmReadyTimeout
	}
	actx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	cctx, cancel := context.WithTimeout(actx, timeout)
	defer cancel()
	if warm {
		if r.pool.abort == nil {
			r.pool.abort = map[groupfolder.Folder]context.CancelFunc{}
		}
		r.pool.abort[t.Folder] = abort
	}
	gen := r.pool.gen
	r.pool.mu.Unlock()
	var release func()
	if warm {
		// Held while making is set: a turn of the folder waits for it (Settle).
		if release, err = t.Hold(); err != nil {
			r.log.Warn("warm agent not made: its services", logging.FieldFolder, string(t.Folder), "err", err)
			warm, release = false, nil
		}
	}
	defer func() {
		r.pool.mu.Lock()
		delete(r.pool.making, t.Folder)
		delete(r.pool.abort, t.Folder)
		r.pool.mu.Unlock()
		close(done)
	}()

	now := time.Now()
	p := &prepared{folder: t.Folder, name: ContainerName(t.Folder, "", r.stamp(now)), key: key, gen: gen, made: now}
	spec.Name = p.name
	spec.Labels[engine.LabelPrepared] = key
	if warm {
		spec.Labels[engine.LabelWarm] = "1"
	}
	spec.Env = append(spec.Env, t.containerEnv(p.name)...)
	p.release = release
	// The creation itself is not cut short: the engine may finish a create whose request
	// was cancelled.
	if p.id, err = r.cfg.Engine.Create(context.WithoutCancel(cctx), spec); err != nil {
		p.released()
		return fmt.Errorf("prepare %s: create: %w", t.Folder, err)
	}
	if warm {
		p.wkey = wkey
		line, err := prepareLine(t)
		if err == nil {
			err = r.startWarm(cctx, p, line)
		}
		if err != nil {
			// Gone before a turn that waits for it goes on.
			r.remove(ctx, p)
			return fmt.Errorf("prepare %s: warm agent: %w", t.Folder, err)
		}
	} else if err := pe.Init(cctx, p.id); err != nil {
		r.removeLater(ctx, p)
		return fmt.Errorf("prepare %s: init: %w", t.Folder, err)
	}
	r.pool.mu.Lock()
	var drop []*prepared
	if gen != r.pool.gen || !r.pool.watching || r.pool.image == "" {
		drop = append(drop, p)
	} else {
		if old := r.pool.ready[t.Folder]; old != nil {
			drop = append(drop, old)
		}
		if r.pool.ready == nil {
			r.pool.ready = map[groupfolder.Folder]*prepared{}
		}
		r.pool.ready[t.Folder] = p
		for warm && r.pool.warmCount() > r.cfg.WarmAgents {
			oldest := p
			for _, q := range r.pool.ready {
				if q.warm != nil && q.made.Before(oldest.made) {
					oldest = q
				}
			}
			delete(r.pool.ready, oldest.folder)
			drop = append(drop, oldest)
		}
		for len(r.pool.ready) > r.pool.max {
			oldest := p
			for _, q := range r.pool.ready {
				if q.made.Before(oldest.made) {
					oldest = q
				}
			}
			delete(r.pool.ready, oldest.folder)
			drop = append(drop, oldest)
		}
	}
	r.pool.mu.Unlock()
	for _, q := range drop {
		r.removeLater(ctx, q)
	}
	return nil
}

// warmCount is how many warm agents the pool holds; mu held.
func (p *pool) warmCount() int {
	n := 0
	for _, q := range p.ready {
		if q.warm != nil {
			n++
		}
	}
	return n
}

// take hands the turn of f its prepared container when it was made from a spec of the
// same key since the last image event (a warm agent: with the same wkey, for a turn that
// may have one, still running), waiting for one being made. A prepared container of f
// that does not match is removed: the turn creates its own.
func (r *Runner) take(ctx context.Context, f groupfolder.Folder, key, wkey string, warm bool) *prepared {
	if _, ok := r.preparer(); !ok {
		return nil
	}
	r.pool.mu.Lock()
	making := r.pool.making[f]
	r.pool.mu.Unlock()
	if making != nil {
		select {
		case <-making:
		case <-ctx.Done():
			return nil
		}
	}
	r.pool.mu.Lock()
	p := r.pool.ready[f]
	delete(r.pool.ready, f)
	fresh := p != nil && p.key == key && p.gen == r.pool.gen && r.pool.watching && r.pool.image != "" &&
		(p.warm == nil || warm && p.wkey == wkey && !p.warm.dead())
	r.pool.mu.Unlock()
	if p != nil && !fresh {
		r.log.Debug("prepared container dropped: the turn's spec differs", logging.FieldContainer, p.name)
		if p.warm != nil {
			r.remove(ctx, p)
		} else {
			r.removeLater(ctx, p)
		}
		return nil
	}
	if p != nil {
		p.released()
	}
	return p
}

// remove removes a prepared container before it returns: a warm agent a turn does not
// use is gone before the turn's own container starts.
func (r *Runner) remove(ctx context.Context, p *prepared) {
	defer p.released()
	if p.warm != nil {
		p.warm.att.Close()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := r.cfg.Engine.Remove(rctx, p.id); err != nil {
		r.log.Warn("remove prepared container: retried once the engine answers", logging.FieldContainer, p.name, "err", err)
		r.removeAgain(p.id, p.name)
	}
}

// removeLater removes a prepared container in the background; Close waits for it.
func (r *Runner) removeLater(ctx context.Context, p *prepared) {
	r.removals.Add(1)
	go func() {
		defer r.removals.Done()
		defer p.released()
		if p.warm != nil {
			p.warm.att.Close()
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := r.cfg.Engine.Remove(rctx, p.id); err != nil {
			// Typically the engine is away (its image events stopped with it): the queue
			// retries once it answers, and the next daemon removes what is left.
			r.log.Warn("remove prepared container: retried once the engine answers", logging.FieldContainer, p.name, "err", err)
			r.removeAgain(p.id, p.name)
		}
	}()
}

// Prepared lists the prepared containers, by folder: for status and tests.
func (r *Runner) Prepared() map[groupfolder.Folder]string {
	r.pool.mu.Lock()
	defer r.pool.mu.Unlock()
	out := map[groupfolder.Folder]string{}
	for f, p := range r.pool.ready {
		out[f] = p.name
	}
	return out
}

// specKey is what a prepared container must share with the turn that uses it: the spec
// without its name and run, and the identity (device, inode) of every mount source, so
// that a directory or file replaced since (a renamed env file, a group folder made anew)
// is not the one the container would see.
func specKey(s engine.Spec) (string, error) {
	s.Name = ""
	labels := make(map[string]string, len(s.Labels))
	for k, v := range s.Labels {
		if k != engine.LabelRun && k != engine.LabelPrepared {
			labels[k] = v
		}
	}
	s.Labels = labels
	ids := make([]string, 0, len(s.Mounts))
	for _, m := range s.Mounts {
		fi, err := os.Stat(m.Source)
		if err != nil {
			return "", fmt.Errorf("mount %s: %w", m.Source, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return "", fmt.Errorf("mount %s: no inode", m.Source)
		}
		ids = append(ids, fmt.Sprintf("%d:%d", st.Dev, st.Ino))
	}
	b, err := json.Marshal(struct {
		Spec    engine.Spec
		Sources []string
	}{s, ids})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12]), nil
}

// dropPrepared removes every prepared container: the daemon stops.
func (r *Runner) dropPrepared(ctx context.Context) {
	r.invalidate(ctx, "the daemon stops")
}
