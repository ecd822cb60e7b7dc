package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
)

// coldResult is the socket-activated start of the daemon.
type coldResult struct {
	runs        int
	firstAnswer sample // first connection (GET /health) to the first answer, whatever it says
	firstOK     sample // first connection to the first 200 (status ok: the engine answers a ping)
	detailed    sample // first connection to the first answer with the engine's details (limits known)
	firstStatus map[string]int
	command     string
	// candidates are the -candidate builds, started in turn with -arizukod (start i of each
	// build before start i+1 of any), so that they compare under the same load.
	candidates []coldCandidate
}

type coldCandidate struct {
	name string
	res  *coldResult
}

// coldBuild is one build the cold start measures, with its own data dir.
type coldBuild struct {
	binary, cfg, dir string
	res              *coldResult
}

// coldStart starts arizukod under systemd-socket-activate, which holds the socket and execs
// the daemon with LISTEN_FDS on the first connection, and times that connection's answer.
// The data dir persists across runs, as for an installed service; the first run makes it.
func (b *bench) coldStart(ctx context.Context) error {
	ssa, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		return fmt.Errorf("cold start: %w (it is in the systemd package)", err)
	}
	newBuild := func(name, binary string) (*coldBuild, error) {
		dir := filepath.Join(b.o.work, name)
		instance := fmt.Sprintf("bench%d-%s", os.Getpid(), name)
		cfg, err := daemonConfig(dir, "cold start", "podman", b.o.podmanSocket, b.o.image, b.o.skillsDir, instance, "")
		if err != nil {
			return nil, err
		}
		b.daemons = append(b.daemons, &daemonProc{name: name, instance: instance})
		return &coldBuild{binary: binary, cfg: cfg, dir: dir, res: &coldResult{runs: b.o.coldRuns, firstStatus: map[string]int{},
			command: fmt.Sprintf("systemd-socket-activate -l SOCK %s serve --config F", binary)}}, nil
	}
	base, err := newBuild("cold", b.o.arizukod)
	if err != nil {
		return err
	}
	builds := []*coldBuild{base}
	for _, c := range b.o.candidates {
		cb, err := newBuild("cold-"+c.name, c.binary)
		if err != nil {
			return err
		}
		builds = append(builds, cb)
		base.res.candidates = append(base.res.candidates, coldCandidate{c.name, cb.res})
	}
	b.say("cold start: %d socket-activated starts of %d builds", b.o.coldRuns, len(builds))
	for i := 0; i < b.o.coldRuns; i++ {
		for j := range builds {
			// Each build goes first in turn.
			cb := builds[(i+j)%len(builds)]
			t, err := coldOnce(ctx, ssa, cb.binary, cb.cfg, filepath.Join(cb.dir, "activated.sock"), filepath.Join(cb.dir, "daemon.log"))
			if err != nil {
				return fmt.Errorf("cold start %d of %s: %w", i+1, cb.binary, err)
			}
			cb.res.firstAnswer = append(cb.res.firstAnswer, t.first)
			cb.res.firstOK = append(cb.res.firstOK, t.ok)
			cb.res.detailed = append(cb.res.detailed, t.detailed)
			cb.res.firstStatus[t.status]++
		}
	}
	b.report.cold = base.res
	return nil
}

// coldTimes is one socket-activated start, timed from its first connection.
type coldTimes struct {
	first    time.Duration // the first answer, whatever it says
	ok       time.Duration // the first 200
	detailed time.Duration // the first 200 with the engine's details (limits no longer pending)
	status   string        // what the first answer said
}

func coldOnce(ctx context.Context, ssa, bin, cfg, sock, logPath string) (coldTimes, error) {
	var t coldTimes
	os.Remove(sock)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return t, err
	}
	defer logf.Close()
	cmd := exec.Command(ssa, "-l", sock, bin, "serve", "--config", cfg)
	cmd.Env = daemonEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return t, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	// The socket exists once systemd-socket-activate listens; nothing answers on it yet.
	for t0 := time.Now(); ; time.Sleep(2 * time.Millisecond) {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			break
		}
		if time.Since(t0) > 10*time.Second {
			return t, errors.New("systemd-socket-activate did not make its socket")
		}
	}
	time.Sleep(20 * time.Millisecond) // let it reach accept()
	c := apiwire.NewClient(sock)
	t0 := time.Now()
	for {
		var h apiwire.HealthReport
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.Do(cctx, "GET", "/health", nil, &h)
		cancel()
		now := time.Since(t0)
		var apiErr *apiwire.Error
		switch {
		case err == nil || errors.As(err, &apiErr):
			if t.first == 0 {
				t.first, t.status = now, h.Status
				if apiErr != nil {
					t.status = fmt.Sprintf("HTTP %d", apiErr.Code)
				}
			}
			if err == nil && t.ok == 0 {
				t.ok = now
			}
			if err == nil && h.Status == "ok" && h.Engine.Limits != apiwire.LimitsPending {
				t.detailed = now
				return t, nil
			}
		case isRefused(err):
		default:
			return t, err
		}
		if now > 30*time.Second {
			return t, fmt.Errorf("no details of the engine after %s: %v", now, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func isRefused(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && errors.Is(err, syscall.ECONNREFUSED)
}
