package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/runtime/detect"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
)

// Phase names, in the order a turn meets them.
const (
	phCreate   = "create"
	phInit     = "init (podman: runc create, conmon)"
	phAttach   = "attach"
	phStart    = "start"
	phExitSeen = "start -> end of output stream"
	phWaitRet  = "start -> wait returned"
	phWaitLag  = "end of stream -> wait returned"
	phInspect  = "inspect"
	phRemove   = "remove"
	phTotal    = "critical path, total"
)

// variant is one way to drive a turn through the engine API.
type variant struct {
	name  string
	about string
	// ahead: create (and, with init, initialize) the container before the clock starts,
	// as a daemon would right after the previous turn of the group.
	ahead bool
	init  bool
	// started: created, attached and started ahead, the agent blocked on its stdin. Not a
	// fresh container any more (the agent's process runs before the turn): a floor, not a plan.
	started bool
	// wait: "engine" is engine.Engine.Wait alone (the first runner's sequence), "stream" is the
	// end of the attach stream followed by inspects until the exit shows (up to ~60 ms), "10ms" is libpod's wait polling
	// every 10 ms instead of its default.
	wait string
	// removeAfter takes the removal off the critical path.
	removeAfter bool
}

// inTurn names the first variant: everything done in the turn, nothing ahead.
const inTurn = "created in the turn"

func variants(engine string) []variant {
	v := []variant{
		{name: inTurn, about: "create, attach, start, Engine.Wait (+inspect), remove: all in the turn: the first runner's sequence, before the improvements in the columns to its right", wait: "engine"},
	}
	if engine == "podman" {
		v = append(v, variant{name: "wait polls 10ms", about: "as the first, but libpod's wait with interval=10ms", wait: "10ms"})
	}
	v = append(v,
		variant{name: "stream end + inspect, remove after", about: "create, attach, start; the end of the output stream and inspects until the exit shows replace wait; removal after the result", wait: "stream", removeAfter: true},
		variant{name: "prepared (created ahead)", about: "created ahead; attach, start, end of stream, inspect; removal after the result", ahead: true, wait: "stream", removeAfter: true},
	)
	if engine == "podman" {
		v = append(v, variant{name: "prepared + initialized ahead", about: "created and initialized (podman init: conmon, runc create, mounts, cgroup) ahead; attach, start, end of stream, inspect; removal after", ahead: true, init: true, wait: "stream", removeAfter: true})
	}
	v = append(v, variant{name: "floor: started ahead", about: "started ahead with the agent blocked on stdin (no longer a fresh container, for reference only): write stdin, end of stream, inspect; removal after", ahead: true, started: true, wait: "stream", removeAfter: true})
	return v
}

// phaseBench drives containers through engine.Engine directly and times each call.
type phaseBench struct {
	engine   engine.Engine
	kind     string
	raw      *rawAPI
	image    string
	instance string
	dirs     groupfolder.Dirs
	mounts   []engine.Mount
	stdin    []byte
	rootless bool
	seq      int
	// fallbacks counts "stream" turns whose inspects still saw the container running after
	// about 60 ms, so that they waited; inspects counts the inspects of "stream" turns.
	fallbacks map[string]int
	inspects  map[string]int
}

func newPhaseBench(ctx context.Context, kind, uri, image, instance, dataDir, skillsDir string) (*phaseBench, error) {
	eng, err := detect.Open(kind, uri)
	if err != nil {
		return nil, err
	}
	info, err := eng.Info(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := newRawAPI(uri)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	layout, err := groupfolder.NewLayout(dataDir)
	if err != nil {
		return nil, err
	}
	f := groupfolder.Folder("phases")
	dirs, err := layout.Ensure(f, os.Getuid(), os.Getgid())
	if err != nil {
		return nil, err
	}
	r, err := runner.New(runner.Config{Engine: eng, Info: info, Layout: layout, Instance: instance, Image: image, SkillsDir: skillsDir,
		Timeout: config.DefaultRunTimeout, StopGrace: config.DefaultStopGrace})
	if err != nil {
		return nil, err
	}
	mounts, err := r.Mounts(f, dirs, nil, nil)
	if err != nil {
		return nil, err
	}
	stdin, err := contract.EncodeInput(contract.Input{Messages: []contract.Message{{Role: "user", Content: "noop"}}, Folder: string(f)})
	if err != nil {
		return nil, err
	}
	return &phaseBench{engine: eng, kind: kind, raw: raw, image: image, instance: instance, dirs: dirs, mounts: mounts,
		stdin: stdin, rootless: info.Rootless, fallbacks: map[string]int{}, inspects: map[string]int{}}, nil
}

// spec is the container spec runner.Runner builds for a turn: runner.AgentSpec itself.
func (b *phaseBench) spec() engine.Spec {
	b.seq++
	o := runner.AgentOptions{Image: b.image, Instance: b.instance}
	if !b.rootless {
		o.User = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	}
	t := runner.Turn{RunID: strconv.Itoa(b.seq), Folder: "phases"}
	return runner.AgentSpec(t, fmt.Sprintf("arizuko-bench-%s-%d-%d", b.kind, os.Getpid(), b.seq), b.mounts, config.DefaultRunTimeout, o)
}

// timer records named phases.
type timer map[string]time.Duration

func (t timer) since(name string, from time.Time) time.Time {
	now := time.Now()
	t[name] = now.Sub(from)
	return now
}

// turn runs one no-op turn the way v says and returns its phase timings. The clock starts
// at the first step v does not do ahead.
func (b *phaseBench) turn(ctx context.Context, v variant) (timer, error) {
	e := b.engine
	t := timer{}
	var id string
	var begin time.Time
	clock := func() {
		if begin.IsZero() {
			begin = time.Now()
		}
	}
	fail := func(step string, err error) (timer, error) {
		if id != "" {
			e.Remove(context.WithoutCancel(ctx), id)
		}
		return nil, fmt.Errorf("%s: %w", step, err)
	}
	if !v.ahead {
		clock()
	}
	t0 := time.Now()
	id, err := e.Create(ctx, b.spec())
	if err != nil {
		return fail("create", err)
	}
	t0 = t.since(phCreate, t0)
	if v.init {
		if err := b.raw.podmanInit(ctx, id); err != nil {
			return fail("init", err)
		}
		t0 = t.since(phInit, t0)
	}
	if !v.started {
		clock()
		t0 = time.Now()
	}
	att, err := e.Attach(ctx, id)
	if err != nil {
		return fail("attach", err)
	}
	defer att.Close()
	t0 = t.since(phAttach, t0)
	var out, errOut bytes.Buffer
	var streamEnd time.Time
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		att.CopyOutput(&out, &errOut)
		streamEnd = time.Now()
	}()
	if err := e.Start(ctx, id); err != nil {
		return fail("start", err)
	}
	started := t.since(phStart, t0)
	if v.started {
		// The agent now blocks on its stdin; the turn begins when its input is written.
		time.Sleep(50 * time.Millisecond)
		clock()
		started = begin
	}
	if _, err := att.Stdin.Write(b.stdin); err == nil {
		att.Stdin.Close()
	}
	switch v.wait {
	case "engine", "10ms":
		if v.wait == "engine" {
			_, err = e.Wait(ctx, id)
		} else if err = b.raw.podmanWait(ctx, id, "10ms"); err == nil {
			_, err = e.Inspect(ctx, id)
		}
		if err != nil {
			return fail("wait", err)
		}
		waited := t.since(phWaitRet, started)
		wg.Wait()
		t[phExitSeen] = streamEnd.Sub(started)
		t[phWaitLag] = waited.Sub(streamEnd)
	case "stream":
		wg.Wait()
		t[phExitSeen] = streamEnd.Sub(started)
		t1 := time.Now()
		exited, err := b.inspectUntilExited(ctx, id, v.name)
		if err != nil {
			return fail("inspect", err)
		}
		if !exited {
			b.fallbacks[v.name]++
			if _, err := e.Wait(ctx, id); err != nil {
				return fail("wait", err)
			}
		}
		t.since(phInspect, t1)
	}
	if !strings.Contains(out.String(), contract.StartMarker) {
		return fail("answer", fmt.Errorf("no answer from the agent; stderr: %q", errOut.String()))
	}
	if v.removeAfter {
		t.since(phTotal, begin)
	}
	t0 = time.Now()
	if err := e.Remove(context.WithoutCancel(ctx), id); err != nil {
		return nil, fmt.Errorf("remove: %w", err)
	}
	t.since(phRemove, t0)
	if !v.removeAfter {
		t.since(phTotal, begin)
	}
	return t, nil
}

// inspectUntilExited inspects the container after the end of its output stream until the
// engine says it exited: at once, then after 2, 4, 8, 16 and 32 ms (about 60 ms in all). The
// engine may not have recorded the exit yet when the stream ends. It counts the inspects.
func (b *phaseBench) inspectUntilExited(ctx context.Context, id, variant string) (bool, error) {
	for delay := time.Duration(0); delay <= 32*time.Millisecond; delay = max(2*time.Millisecond, 2*delay) {
		time.Sleep(delay)
		b.inspects[variant]++
		st, err := b.engine.Inspect(ctx, id)
		if err != nil {
			return false, err
		}
		if !st.Running {
			return true, nil
		}
	}
	return false, nil
}

// phaseResult is the phases of every variant on one engine.
type phaseResult struct {
	engine    string
	version   string
	variants  []variant
	samples   map[string]map[string]sample // variant -> phase -> durations
	fallbacks map[string]int
	inspects  map[string]int
	n         int
	// info and ping time engine.Engine.Info (the daemon's engine watch) and GET /_ping.
	info, ping sample
}

// runPhases runs n turns of every variant, interleaved (each round runs every variant
// once, in a rotating order), after warm turns that are not counted.
func runPhases(ctx context.Context, b *phaseBench, version string, warm, n int, progress func(string)) (*phaseResult, error) {
	vs := variants(b.kind)
	res := &phaseResult{engine: b.kind, version: version, variants: vs, samples: map[string]map[string]sample{}, n: n}
	for _, v := range vs {
		res.samples[v.name] = map[string]sample{}
	}
	for round := -warm; round < n; round++ {
		if round == 0 {
			clear(b.fallbacks)
			clear(b.inspects)
		}
		for k := range vs {
			v := vs[(k+max(round, 0))%len(vs)]
			t, err := b.turn(ctx, v)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", b.kind, v.name, err)
			}
			if round < 0 {
				continue
			}
			for p, d := range t {
				res.samples[v.name][p] = append(res.samples[v.name][p], d)
			}
		}
		if round >= 0 && (round+1)%10 == 0 {
			progress(fmt.Sprintf("phases %s: %d/%d rounds", b.kind, round+1, n))
		}
	}
	res.fallbacks, res.inspects = b.fallbacks, b.inspects
	res.info, res.ping = sample{}, sample{}
	for i := 0; i < 10; i++ {
		t0 := time.Now()
		if _, err := b.engine.Info(ctx); err != nil {
			return nil, fmt.Errorf("%s: info: %w", b.kind, err)
		}
		t1 := time.Now()
		if err := b.raw.ping(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", b.kind, err)
		}
		res.info = append(res.info, t1.Sub(t0))
		res.ping = append(res.ping, time.Since(t1))
	}
	return res, nil
}
