package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/arizuko/arizukod/runtime/docker"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/podman"
)

// bench is one run of the whole measurement.
type bench struct {
	o        options
	log      *slog.Logger
	instance string // the label of the containers the bench creates itself
	began    time.Time

	podman  engine.Engine
	podman5 engine.Engine // nil without -podman5
	// p5Work is the Podman 5 daemon's directory, under a path the test host's chrooted
	// Podman 5 shares with the host (ARIZUKO_TEST_PODMAN5_SHARED_PATHS, default /tmp).
	p5Work string
	// rootless is the rootless Podman; rlWork its daemon's directory, owned by its user.
	rootless engine.Engine
	rlInfo   engine.Info
	rlWork   string
	docker   engine.Engine
	// podmanGVisor is the Podman service whose own runtime is runsc; nil without
	// -podman-gvisor.
	podmanGVisor engine.Engine
	pInfo        engine.Info
	p5Info       engine.Info
	dInfo        engine.Info
	daemons      []*daemonProc
	report       report
	// kit is what the Claude Code measurements share, made by the first of them.
	kit *claudeKit
	// closers end what the bench started besides daemons and containers, last first.
	closers []func()
}

func (b *bench) run(ctx context.Context) error {
	b.report.machine = describeMachine(ctx, b.o)
	b.report.began = b.began
	if err := b.openEngines(ctx); err != nil {
		return err
	}
	if err := b.openGVisor(ctx); err != nil {
		return err
	}
	b.report.machine.engines = append(b.report.machine.engines, fmt.Sprintf("podman %s (API %s) at %s", b.pInfo.Version, b.pInfo.APIVersion, b.o.podmanSocket))
	if b.rootless != nil {
		b.report.machine.engines = append(b.report.machine.engines, fmt.Sprintf("podman %s rootless (API %s) at %s", b.rlInfo.Version, b.rlInfo.APIVersion, b.o.rootless))
	}
	if b.podman5 != nil {
		b.report.machine.engines = append(b.report.machine.engines, fmt.Sprintf("podman %s (API %s) at %s", b.p5Info.Version, b.p5Info.APIVersion, b.o.podman5Socket))
	}
	if b.docker != nil {
		b.report.machine.engines = append(b.report.machine.engines, fmt.Sprintf("docker %s (API %s) at %s", b.dInfo.Version, b.dInfo.APIVersion, b.o.dockerSocket))
	}
	// The cold start runs no container: it alone needs no image.
	if b.o.mode != "cold" && b.o.mode != "claude" && b.o.mode != "density" {
		if err := b.importImages(ctx); err != nil {
			return err
		}
	}
	if b.o.mode == "all" || b.o.mode == "phases" {
		if err := b.phases(ctx); err != nil {
			return err
		}
	}
	if b.o.mode == "all" || b.o.mode == "latency" {
		if err := b.latency(ctx); err != nil {
			return err
		}
	}
	if b.o.mode == "all" || b.o.mode == "throughput" {
		if err := b.throughput(ctx); err != nil {
			return err
		}
	}
	if b.o.mode == "all" || b.o.mode == "gvisor" {
		if err := b.gvisor(ctx); err != nil {
			return err
		}
	}
	if b.o.mode == "all" || b.o.mode == "delivery" {
		if err := b.delivery(ctx); err != nil {
			return err
		}
	}
	if b.o.mode == "all" || b.o.mode == "tracing" {
		if err := b.tracingCost(ctx); err != nil {
			return err
		}
	}
	claude := b.o.mode == "claude" || b.o.mode == "density" || b.o.mode == "all" && b.o.claudeRunner != ""
	if claude && b.o.mode != "density" {
		if err := b.claudeLatency(ctx); err != nil {
			return err
		}
	}
	if claude && b.o.mode != "claude" {
		if err := b.density(ctx); err != nil {
			return err
		}
	}
	if b.o.mode == "all" {
		if err := b.memory(ctx); err != nil {
			return err
		}
	}
	if b.o.mode == "all" || b.o.mode == "cold" {
		if err := b.coldStart(ctx); err != nil {
			return err
		}
	}
	if b.o.mode == "all" {
		if !b.o.skipGoBench {
			b.report.goBench = runGoBenchmarks(ctx, b.o.repo, b.say)
		}
	}
	b.report.machine.loadAfter = loadAverage()
	b.report.took = time.Since(b.began)
	text := b.report.markdown(b.o.mode)
	fmt.Println(text)
	if b.o.mode == "all" {
		if err := writeFileAtomic(b.o.out, []byte(text)); err != nil {
			return err
		}
		b.say("wrote %s", b.o.out)
	}
	return nil
}

func (b *bench) openEngines(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	b.podman = podman.New(b.o.podmanSocket)
	if b.pInfo, err = b.podman.Info(cctx); err != nil {
		return fmt.Errorf("podman at %s: %w", b.o.podmanSocket, err)
	}
	if b.o.podman5Socket != "" {
		b.podman5 = podman.New(b.o.podman5Socket)
		if b.p5Info, err = b.podman5.Info(cctx); err != nil {
			return fmt.Errorf("podman 5 at %s: %w", b.o.podman5Socket, err)
		}
		shared, _, _ := strings.Cut(os.Getenv("ARIZUKO_TEST_PODMAN5_SHARED_PATHS"), " ")
		if shared == "" {
			shared = "/tmp"
		}
		if b.p5Work, err = os.MkdirTemp(shared, "arizuko-bench-p5-"); err != nil {
			return fmt.Errorf("podman 5: a directory it shares: %w", err)
		}
	}
	if b.o.rootless != "" {
		if b.o.rootlessUID == 0 {
			return fmt.Errorf("-podman-rootless %s: -rootless-uid names no user (ARIZUKO_TEST_ROOTLESS_UID)", b.o.rootless)
		}
		b.rootless = podman.New(b.o.rootless)
		if b.rlInfo, err = b.rootless.Info(cctx); err != nil {
			return fmt.Errorf("rootless podman at %s: %w", b.o.rootless, err)
		}
		if b.rlWork, err = os.MkdirTemp("/var/tmp", "arizuko-bench-rootless-"); err != nil {
			return err
		}
		if err := os.Chown(b.rlWork, b.o.rootlessUID, b.o.rootlessGID); err != nil {
			return fmt.Errorf("rootless podman: %w", err)
		}
	}
	if b.o.dockerSocket == "" {
		return nil
	}
	if b.docker, err = docker.New(b.o.dockerSocket); err != nil {
		return err
	}
	if b.dInfo, err = b.docker.Info(cctx); err != nil {
		return fmt.Errorf("docker at %s: %w", b.o.dockerSocket, err)
	}
	return nil
}

// importImages makes the bench's image from the example agent in every engine, so that
// every method runs the very same rootfs.
func (b *bench) importImages(ctx context.Context) error {
	for _, e := range []struct {
		name string
		eng  engine.Engine
	}{{"podman", b.podman}, {"podman 5", b.podman5}, {"rootless podman", b.rootless}, {"docker", b.docker}, {"podman gVisor", b.podmanGVisor}} {
		if e.eng == nil {
			continue
		}
		if err := engine.ImportStatic(ctx, e.eng, b.o.image, b.o.agent); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
	}
	b.say("imported %s (from %s) into every engine", b.o.image, b.o.agent)
	return nil
}

func (b *bench) phases(ctx context.Context) error {
	for _, e := range []struct {
		kind, uri, version string
	}{{"podman", b.o.podmanSocket, b.pInfo.Version}, {"docker", b.o.dockerSocket, b.dInfo.Version}} {
		if e.uri == "" {
			continue
		}
		pb, err := newPhaseBench(ctx, e.kind, e.uri, b.o.image, b.instance, filepath.Join(b.o.work, "phases-"+e.kind), b.o.skillsDir)
		if err != nil {
			return fmt.Errorf("phases on %s: %w", e.kind, err)
		}
		b.say("phases on %s: %d variants x %d turns", e.kind, len(variants(e.kind)), b.o.phaseTurns)
		res, err := runPhases(ctx, pb, e.version, 2, b.o.phaseTurns, func(s string) { b.say("%s", s) })
		if err != nil {
			return err
		}
		b.report.phases = append(b.report.phases, res)
	}
	return nil
}

// cleanup stops the daemons the bench started and removes every container that carries
// one of its instance labels.
func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	labels := []string{b.instance}
	for _, d := range b.daemons {
		d.stop()
		labels = append(labels, d.instance)
	}
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	for _, w := range []string{b.p5Work, b.rlWork} {
		if w != "" && !b.o.keepWork {
			defer os.RemoveAll(w)
		}
	}
	for _, eng := range []engine.Engine{b.podman, b.podman5, b.rootless, b.docker, b.podmanGVisor} {
		if eng == nil {
			continue
		}
		for _, l := range labels {
			list, err := eng.List(ctx, map[string]string{engine.LabelInstance: l})
			if err != nil {
				continue
			}
			for _, c := range list {
				if err := eng.Remove(ctx, c.ID); err != nil {
					b.say("cleanup: remove %s: %v", c.Name, err)
				}
			}
		}
	}
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bench-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
