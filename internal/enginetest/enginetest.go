// Package enginetest gives tests the real container engines of the test host that
// hack/testhost/up.sh starts, and the example agent image inside each of them. It owns no
// engine: it only reads the addresses up.sh exported. It also reads back the hardening a
// Quadlet unit or an engine command line gives its container (QuadletHardening,
// ArgvHardening), for the tests of what renders them. On the test host's Kubernetes cluster
// (kube.go) it imports images into the real node and runs kubectl with the manifests of
// contrib/kubernetes as the tests fill them in; it never changes the cluster's own setup.
//
// The tests that use it live in files named *_e2e_test.go (internal/archtest checks the
// names). They run when the real-part suite is asked for (Asked): hack/test.sh and CI set
// ARIZUKO_REQUIRE_ENGINES=1, and sourcing the test host's env file sets
// ARIZUKO_TESTHOST_DIR and the ARIZUKO_TEST_* addresses. When ARIZUKO_REQUIRE_ENGINES=1, an
// engine that is missing or does not answer fails the test; otherwise the test is skipped
// with the reason, so that a plain `go test ./...` is the unit suite alone and starts no
// service, whatever is installed on the machine.
package enginetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/agentimage"
	"github.com/arizuko/arizukod/runtime/detect"
	"github.com/arizuko/arizukod/runtime/engine"
)

// AgentImage is the repository the example agent is imported into, tagged with a digest of
// the binary: test processes of other checkouts on the same engine import their own agent
// without replacing this one's.
const AgentImage = "localhost/arizuko-agent"

// Engine is one engine of the test host.
type Engine struct {
	Name string // podman4, podman5, docker, podman-rootless
	Kind string // podman or docker
	URI  string
	// User is the unprivileged user a rootless engine belongs to; a daemon using it must
	// run as that user.
	User string
}

var all = []struct{ name, kind, env string }{
	{"podman4", "podman", "ARIZUKO_TEST_PODMAN4"},
	{"podman5", "podman", "ARIZUKO_TEST_PODMAN5"},
	{"docker", "docker", "ARIZUKO_TEST_DOCKER"},
	{"podman-rootless", "podman", "ARIZUKO_TEST_PODMAN_ROOTLESS"},
}

// Required reports whether a missing engine must fail the test.
func Required() bool { return os.Getenv("ARIZUKO_REQUIRE_ENGINES") == "1" }

// Asked reports whether the real-part suite was asked for: ARIZUKO_REQUIRE_ENGINES=1, or
// the test host's env file sourced (ARIZUKO_TESTHOST_DIR set).
func Asked() bool { return Required() || os.Getenv("ARIZUKO_TESTHOST_DIR") != "" }

// Services skips a test that starts services of its own (a private Podman or dockerd, a
// program installed from a registry) unless the real-part suite was asked for: a plain
// `go test ./...` starts none, even on a machine where podman is on PATH.
func Services(t testing.TB, what string) {
	t.Helper()
	if !Asked() {
		t.Skipf("%s: a real-part test, run when ARIZUKO_REQUIRE_ENGINES=1 or the test host's env file is sourced (make test)", what)
	}
}

// Long skips a long test under -short, except where engines are required (CI and make
// test): there -short would turn the test into a silent pass, so it fails instead.
func Long(t testing.TB, why string) {
	t.Helper()
	if !testing.Short() {
		return
	}
	if Required() {
		t.Fatalf("-short skips %s, but ARIZUKO_REQUIRE_ENGINES=1 requires it: run without -short", why)
	}
	t.Skip(why + "; -short skips it")
}

// Missing fails the test when engines are required and skips it otherwise.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (ARIZUKO_REQUIRE_ENGINES=1: run hack/testhost/up.sh and source its env file)", msg)
	}
	t.Skipf("%s; run `make test` for the real test host", msg)
}

// Rootful returns the engines a root test process can drive in-process.
func Rootful(t testing.TB) []Engine {
	var out []Engine
	for _, e := range all[:3] {
		out = append(out, get(t, e.name, e.kind, e.env))
	}
	return out
}

// GVisor returns the engines of the test host that run containers under gVisor: Docker,
// with runsc registered per container, and podman4-gvisor, a Podman 4.3 service whose own
// runtime is runsc (Podman's API has no runtime per container).
func GVisor(t testing.TB) []Engine {
	return []Engine{get(t, "podman4-gvisor", "podman", "ARIZUKO_TEST_PODMAN4_GVISOR"), get(t, "docker", "docker", "ARIZUKO_TEST_DOCKER")}
}

// Rootless returns the rootless Podman engine and its user.
func Rootless(t testing.TB) Engine {
	e := get(t, "podman-rootless", "podman", "ARIZUKO_TEST_PODMAN_ROOTLESS")
	e.User = os.Getenv("ARIZUKO_TEST_ROOTLESS_USER")
	if e.User == "" {
		Missing(t, "ARIZUKO_TEST_ROOTLESS_USER is not set")
	}
	return e
}

func get(t testing.TB, name, kind, env string) Engine {
	t.Helper()
	uri := os.Getenv(env)
	if uri == "" {
		Missing(t, "engine %s: %s is not set", name, env)
	}
	return Engine{Name: name, Kind: kind, URI: uri}
}

// Open connects to e and checks that it answers.
func (e Engine) Open(t testing.TB) (engine.Engine, engine.Info) {
	t.Helper()
	eng, err := detect.Open(e.Kind, e.URI)
	if err != nil {
		t.Fatalf("open %s: %v", e.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	info, err := eng.Info(ctx)
	if err != nil {
		Missing(t, "engine %s at %s does not answer: %v", e.Name, e.URI, err)
	}
	return eng, info
}

var (
	buildOnce sync.Once
	agentBin  string
	buildErr  error
	imported  sync.Map // engine URI -> *sync.Once-guarded error
)

type importResult struct {
	once sync.Once
	ref  string
	err  error
}

// AgentBinary builds the example agent, statically, once per test process.
func AgentBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		agentBin, buildErr = StaticBinary("github.com/arizuko/arizukod/examples/agent", "agent")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return agentBin
}

// StaticBinary builds the Go package pkg statically into the user's cache directory
// (arizuko-test/<checkout>/<name>, one directory per checkout of the module) and returns its
// path. The tests' binaries live there rather than in $TMPDIR so that a test run leaves
// nothing behind; Go's build cache makes a rebuild cheap, and the binary is renamed into place so
// that concurrent test processes never see half of it.
func StaticBinary(pkg, name string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	dir := filepath.Join(cache, "arizuko-test", checkoutID(wd))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	bin := filepath.Join(dir, name)
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build %s: %v\n%s", pkg, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	return bin, nil
}

// checkoutID names the checkout of the module that dir is in: a digest of the directory
// holding go.mod (of dir itself when there is none).
func checkoutID(dir string) string {
	sum := sha256.Sum256([]byte(moduleRoot(dir)))
	return hex.EncodeToString(sum[:6])
}

// moduleRoot is the directory holding go.mod at or above dir (dir itself when there is
// none).
func moduleRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

// EnsureAgentImage imports the example agent into eng as AgentImage:<digest of the binary>,
// once per process, and returns that reference.
func EnsureAgentImage(t testing.TB, e Engine, eng engine.Engine) string {
	t.Helper()
	bin := AgentBinary(t)
	v, _ := imported.LoadOrStore(e.URI, &importResult{})
	r := v.(*importResult)
	r.once.Do(func() {
		b, err := os.ReadFile(bin)
		if err != nil {
			r.err = err
			return
		}
		sum := sha256.Sum256(b)
		r.ref = AgentImage + ":" + hex.EncodeToString(sum[:6])
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r.err = engine.ImportStatic(ctx, eng, r.ref, bin)
	})
	if r.err != nil {
		t.Fatalf("import agent image into %s: %v", e.Name, r.err)
	}
	return r.ref
}

// DataDir returns a fresh data directory that the engine can bind-mount: in the temporary
// directory ($TMPDIR, else /tmp), which the test host shares with the Podman 5 chroot at the
// same path (hack/test.sh gives the tests a TMPDIR of their own there).
func DataDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "arizuko-data-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

var claudeImported sync.Map // engine URI -> *importResult

// EnsureClaudeImage builds localhost/arizuko-claude on eng, once per process, with this
// tree's runner: the Debian rootfs and Claude Code's package come from the cache directory
// ($ARIZUKO_CACHE_DIR, else the user's cache), downloaded on the first build. It fails
// (never skips) when the image cannot be built.
func EnsureClaudeImage(t testing.TB, e Engine, eng engine.Engine) string {
	t.Helper()
	v, _ := claudeImported.LoadOrStore(e.URI, &importResult{})
	r := v.(*importResult)
	r.once.Do(func() {
		runner, err := StaticBinary("github.com/arizuko/arizukod/cmd/arizuko-claude", "arizuko-claude")
		if err != nil {
			r.err = err
			return
		}
		cache := os.Getenv("ARIZUKO_CACHE_DIR")
		if cache == "" {
			dir, err := os.UserCacheDir()
			if err != nil {
				r.err = err
				return
			}
			cache = filepath.Join(dir, "arizuko")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		b, err := agentimage.BuildClaude(ctx, eng, agentimage.Options{CacheDir: cache, Runner: runner})
		if err == nil {
			t.Logf("built %s on %s: %d MB in %s", b.Ref, e.Name, b.Bytes>>20, b.Duration.Round(time.Second))
		}
		r.err = err
	})
	if r.err != nil {
		t.Fatalf("build the Claude image on %s: %v", e.Name, r.err)
	}
	return agentimage.ClaudeRef
}
