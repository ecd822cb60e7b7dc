// Command bench measures arizukod on the real test host (hack/testhost) and writes
// BENCHMARKS.md: turn latency through the daemon's API against the podman and docker command
// lines on the same engines and image, throughput over many groups, cold start through
// socket activation, the daemon's resident memory, the per-phase cost of a turn at the
// engine API, the Go benchmarks of the memory and ipc packages, and real Claude Code turns
// against a scripted Messages API: their latency bare on the host, by podman run and through
// arizukod (warm agents off and on), and how many of them one host carries at once.
//
// It is run by hack/bench.sh (`make bench`), which builds bin/arizukod and bin/agent and
// brings the test host up first. It owns nothing but what it creates: a work directory, its
// own image tags (the example agent's and the Claude Code image's), daemons it starts, and
// containers carrying its own instance label, all of which it removes but the images. It must not touch the engines' other containers or images.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the bench's flags.
type options struct {
	mode          string
	podmanSocket  string
	dockerSocket  string
	podman5Socket string
	// podmanGVisorSocket is a Podman 4 service whose own runtime is runsc.
	podmanGVisorSocket string
	podman5Chroot      string // the Podman 5 service's chroot, for its local CLI
	rootless           string // the rootless Podman service, run by rootlessUID:rootlessGID
	rootlessUID        int
	rootlessGID        int
	testhostDir        string
	dockerCLI          string
	arizukod           string
	depsFloor          string
	depsFloorAPI       string
	agent              string
	image              string
	skillsDir          string
	repo               string
	work               string
	out                string
	warm               int
	turns              int
	phaseTurns         int
	tpTurns            int
	tpFolders          int
	dlMessages         int
	dlChats            int
	sweep              intsFlag
	coldRuns           int
	skipGoBench        bool
	keepWork           bool
	daemonEngines      string
	candidates         candidateFlag
	// The Claude Code measurements.
	claudeRunner  string // the arizuko-claude binary the bench's Claude image is built with
	cacheDir      string // agentimage's cache: the Debian rootfs and Claude Code's package
	claudeWarm    int
	claudeTurns   int
	warmAgents    int
	densityLevels intsFlag
	densityCap    int
	densityHold   time.Duration
}

// candidate is another arizukod build measured next to the one under test.
type candidate struct{ name, binary string }

// candidateFlag collects -candidate NAME=BINARY.
type candidateFlag []candidate

func (c *candidateFlag) String() string { return fmt.Sprint(*c) }

func (c *candidateFlag) Set(v string) error {
	name, bin, ok := strings.Cut(v, "=")
	if !ok || name == "" || bin == "" || strings.ContainsAny(name, "/ ") {
		return fmt.Errorf("want NAME=BINARY, got %q", v)
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	*c = append(*c, candidate{name, abs})
	return nil
}

// envInt is the integer in the environment variable k, or 0.
func envInt(k string) int {
	n, _ := strconv.Atoi(os.Getenv(k))
	return n
}

// intsFlag is a comma-separated list of positive integers.
type intsFlag []int

func (f *intsFlag) String() string {
	var s []string
	for _, n := range *f {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

func (f *intsFlag) Set(v string) error {
	*f = nil
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 1 {
			return fmt.Errorf("%q: want positive integers separated by commas", v)
		}
		*f = append(*f, n)
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.mode, "mode", "all", "all: every measurement and BENCHMARKS.md; phases, latency, throughput, delivery, cold, gvisor, tracing, claude (Claude Code turn latency), density (concurrent Claude Code turns): only that measurement, printed")
	fs.StringVar(&o.podmanSocket, "podman", os.Getenv("ARIZUKO_TEST_PODMAN4"), "the Podman 4 API service (unix://PATH)")
	fs.StringVar(&o.podman5Socket, "podman5", os.Getenv("ARIZUKO_TEST_PODMAN5"), "the Podman 5 API service (unix://PATH); empty skips its latency rows")
	fs.StringVar(&o.podmanGVisorSocket, "podman-gvisor", os.Getenv("ARIZUKO_TEST_PODMAN4_GVISOR"), "a Podman 4 API service whose own runtime is runsc (unix://PATH); empty skips its gVisor rows")
	fs.StringVar(&o.podman5Chroot, "podman5-chroot", os.Getenv("ARIZUKO_TEST_PODMAN5_CHROOT"), "the chroot of -podman5, where its local CLI runs; empty skips that CLI's row")
	fs.StringVar(&o.rootless, "podman-rootless", os.Getenv("ARIZUKO_TEST_PODMAN_ROOTLESS"), "a rootless Podman API service (unix://PATH); empty skips its latency rows")
	fs.IntVar(&o.rootlessUID, "rootless-uid", envInt("ARIZUKO_TEST_ROOTLESS_UID"), "the user of -podman-rootless, whom its daemon runs as")
	fs.IntVar(&o.rootlessGID, "rootless-gid", envInt("ARIZUKO_TEST_ROOTLESS_GID"), "the group of -podman-rootless")
	fs.StringVar(&o.dockerSocket, "docker", os.Getenv("ARIZUKO_TEST_DOCKER"), "the Docker API (unix://PATH); empty skips docker")
	fs.StringVar(&o.testhostDir, "testhost", envOr("ARIZUKO_TESTHOST_DIR", "/var/tmp/arizuko-testhost"), "the test host's directory, for the local podman CLI's storage and configuration")
	fs.StringVar(&o.dockerCLI, "docker-cli", "", "the docker command line (default: Debian's /usr/bin/docker, else docker on PATH with DOCKER_API_VERSION=1.41)")
	fs.StringVar(&o.arizukod, "arizukod", "bin/arizukod", "the arizukod binary")
	fs.StringVar(&o.depsFloor, "depsfloor", "bin/depsfloor", "bench/depsfloor, built: the memory floor of the required modules (\"\" skips it)")
	fs.StringVar(&o.depsFloorAPI, "depsfloor-bindings-api", "bin/depsfloor-bindings-api", "bench/depsfloor built with the tag bindingsapi: the floor with the Podman bindings' API packages (\"\" skips it)")
	fs.StringVar(&o.agent, "agent", "bin/agent", "the example agent binary, imported as -image")
	fs.StringVar(&o.image, "image", "localhost/arizuko-bench:latest", "the image every measurement runs (imported from -agent into each engine)")
	fs.StringVar(&o.skillsDir, "skills", "container/skills", "the bundled skills the daemon mounts at /skills")
	fs.StringVar(&o.repo, "repo", ".", "the repository, for the go test benchmarks")
	fs.StringVar(&o.work, "work", "", "work directory (default: a new one under /var/tmp)")
	fs.StringVar(&o.out, "out", "BENCHMARKS.md", "where to write the report (mode all)")
	fs.IntVar(&o.warm, "warm", 5, "warm-up turns per method, not counted")
	fs.IntVar(&o.turns, "turns", 50, "measured turns per latency method")
	fs.IntVar(&o.phaseTurns, "phase-turns", 25, "measured turns per variant of the phase measurement")
	fs.IntVar(&o.tpTurns, "throughput-turns", 200, "turns of the throughput measurement")
	fs.IntVar(&o.tpFolders, "throughput-folders", 20, "folders of the throughput measurement")
	fs.IntVar(&o.dlMessages, "delivery-messages", 500, "chat messages of the delivery measurement")
	fs.IntVar(&o.dlChats, "delivery-chats", 20, "chats (one folder each) of the delivery measurement")
	o.sweep = intsFlag{1, 20, 200}
	fs.Var(&o.sweep, "throughput-sweep", "comma-separated numbers of folders to repeat the daemon's throughput run over, besides -throughput-folders (\"\" for none)")
	fs.IntVar(&o.coldRuns, "cold", 10, "socket-activated cold starts")
	fs.BoolVar(&o.skipGoBench, "skip-go-bench", false, "skip the go test benchmarks of memory and ipc")
	fs.BoolVar(&o.keepWork, "keep", false, "keep the work directory")
	fs.Var(&o.candidates, "candidate", "NAME=BINARY: another arizukod build to measure on podman in the latency table and in the cold start, next to -arizukod (repeatable)")
	fs.StringVar(&o.daemonEngines, "daemon-engines", "podman,docker", "engines to run arizukod on in the latency table")
	fs.StringVar(&o.claudeRunner, "claude-runner", "bin/arizuko-claude", "the arizuko-claude runner (static) to build the bench's Claude Code image with (\"\" skips the claude and density measurements in mode all)")
	fs.StringVar(&o.cacheDir, "cache-dir", cacheDirDefault(), "agentimage's cache of the Debian rootfs and Claude Code's npm package ($ARIZUKO_CACHE_DIR)")
	fs.IntVar(&o.claudeWarm, "claude-warm", 2, "warm-up rounds of the Claude Code latency, not counted")
	fs.IntVar(&o.claudeTurns, "claude-turns", 15, "measured Claude Code turns per method and kind (plain, tool_use)")
	fs.IntVar(&o.warmAgents, "warm-agents", 2, "warm_agents of the daemon of the \"warm agents on\" row (0 skips it; a daemon that does not know the key is reported, not fatal)")
	o.densityLevels = intsFlag{1, 2, 4, 8, 12, 16, 24}
	fs.Var(&o.densityLevels, "density-levels", "comma-separated numbers of concurrent Claude Code turns, rising")
	fs.IntVar(&o.densityCap, "density-cap", 16, "max_running of the density daemon")
	fs.DurationVar(&o.densityHold, "density-hold", 10*time.Second, "how long the upstream holds each model request of the density measurement")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.podmanSocket == "" {
		return fmt.Errorf("-podman: no Podman 4 API socket (source the test host's env file or pass -podman unix://PATH)")
	}
	for _, p := range []*string{&o.arizukod, &o.agent, &o.skillsDir, &o.repo, &o.out, &o.claudeRunner} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	if o.work == "" {
		d, err := os.MkdirTemp("/var/tmp", "arizuko-bench-")
		if err != nil {
			return err
		}
		o.work = d
	}
	if !o.keepWork {
		defer os.RemoveAll(o.work)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b := &bench{o: o, log: log, instance: fmt.Sprintf("bench%d", os.Getpid()), began: time.Now()}
	defer b.cleanup()
	switch o.mode {
	case "all", "phases", "latency", "throughput", "delivery", "cold", "gvisor", "tracing", "claude", "density":
	default:
		return fmt.Errorf("-mode %q: must be all, phases, latency, throughput, delivery, cold, gvisor, tracing, claude or density", o.mode)
	}
	return b.run(ctx)
}

// cacheDirDefault is agentimage's cache as the tests find it: $ARIZUKO_CACHE_DIR, else the
// user's cache.
func cacheDirDefault() string {
	if d := os.Getenv("ARIZUKO_CACHE_DIR"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "arizuko")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// say prints progress on stderr.
func (b *bench) say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench [%5.1fs] %s\n", time.Since(b.began).Seconds(), strings.TrimSpace(fmt.Sprintf(format, args...)))
}
