package sidecar_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/sidecar"
)

// sidecarImage is the image the example sidecar is imported as.
const sidecarImage = "localhost/arizuko-sidecar:test"

var (
	buildOnce  sync.Once
	sidecarBin string
	buildErr   error
	imported   sync.Map // engine URI -> *importOnce
)

type importOnce struct {
	once sync.Once
	err  error
}

// ensureSidecarImage builds the example sidecar statically, once, and imports it into eng.
func ensureSidecarImage(t *testing.T, e enginetest.Engine, eng engine.Engine) {
	t.Helper()
	buildOnce.Do(func() {
		sidecarBin, buildErr = enginetest.StaticBinary("github.com/arizuko/arizukod/examples/sidecar", "sidecar")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	v, _ := imported.LoadOrStore(e.URI, &importOnce{})
	r := v.(*importOnce)
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r.err = engine.ImportStatic(ctx, eng, sidecarImage, sidecarBin)
	})
	if r.err != nil {
		t.Fatalf("import sidecar image into %s: %v", e.Name, r.err)
	}
}

// systemdUser points the test at the test host's user manager, or skips (fails when
// engines are required) without one.
func systemdUser(t *testing.T) {
	t.Helper()
	if os.Getenv("ARIZUKO_TEST_SYSTEMD_USER") != "1" {
		enginetest.Missing(t, "no systemd user manager: ARIZUKO_TEST_SYSTEMD_USER is not 1")
	}
	rt := os.Getenv("ARIZUKO_TEST_SYSTEMD_RUNTIME_DIR")
	if rt == "" {
		rt = "/run/user/0"
	}
	t.Setenv("XDG_RUNTIME_DIR", rt)
}

// fixture is a Manager over one engine and a fresh data directory.
type fixture struct {
	t        *testing.T
	e        enginetest.Engine
	eng      engine.Engine
	info     engine.Info
	layout   groupfolder.Layout
	instance string
	m        *sidecar.Manager
}

func newFixture(t *testing.T, e enginetest.Engine, mode sidecar.Mode, mod func(*sidecar.Options)) *fixture {
	t.Helper()
	eng, info := e.Open(t)
	ensureSidecarImage(t, e, eng)
	dataDir := enginetest.DataDir(t)
	layout, err := groupfolder.NewLayout(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{t: t, e: e, eng: eng, info: info, layout: layout, instance: "test-" + filepath.Base(dataDir)}
	fx.m = fx.manager(mode, fx.instance, mod)
	t.Cleanup(fx.assertNothingLeft)
	return fx
}

func (fx *fixture) manager(mode sidecar.Mode, instance string, mod func(*sidecar.Options)) *sidecar.Manager {
	fx.t.Helper()
	o := sidecar.Options{Engine: fx.eng, Info: fx.info, Layout: fx.layout, Instance: instance, Mode: mode, StopGrace: 2 * time.Second}
	if mod != nil {
		mod(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := sidecar.New(ctx, o)
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.t.Cleanup(m.Close)
	if mode != "" && m.Mode() != mode {
		fx.t.Fatalf("mode %s, want %s", m.Mode(), mode)
	}
	return m
}

func (fx *fixture) assertNothingLeft() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if left, err := fx.m.Cleanup(ctx); err != nil || len(left) > 0 {
		fx.t.Errorf("%s: left behind: %v (cleanup error: %v)", fx.e.Name, left, err)
	}
}

func (fx *fixture) start(folder string, cs ...sidecar.Config) (*sidecar.Handle, error) {
	fx.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := groupfolder.Folder(folder)
	dirs, err := fx.layout.Ensure(f, os.Getuid(), os.Getgid())
	if err != nil {
		return nil, err
	}
	return fx.m.Start(ctx, f, dirs.SidecarSockets, "run-"+fx.e.Name, "", cs)
}

func (fx *fixture) stop(h *sidecar.Handle) {
	fx.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Stop(ctx); err != nil {
		fx.t.Errorf("stop: %v", err)
	}
}

func (fx *fixture) socket(folder, name string) string {
	dir, err := fx.layout.SidecarSocketDir(groupfolder.Folder(folder))
	if err != nil {
		fx.t.Fatal(err)
	}
	return filepath.Join(dir, name+".sock")
}

// name is the container of a sidecar of this fixture's instance; name+".service" its unit.
func (fx *fixture) name(folder, sidecarName string) string {
	return sidecar.ContainerName(fx.instance, groupfolder.Folder(folder), sidecarName)
}

func (fx *fixture) containers() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	list, err := fx.eng.List(ctx, map[string]string{engine.LabelInstance: fx.instance, engine.LabelRole: sidecar.RoleSidecar})
	if err != nil {
		fx.t.Fatal(err)
	}
	var names []string
	for _, c := range list {
		names = append(names, c.Name)
	}
	return names
}

// echo calls the echo tool on a sidecar's socket the way the agent's MCP client does.
func echo(t *testing.T, socket, text string) string {
	t.Helper()
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	call := func(id int, method string, params any) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := c.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var resp struct {
			Result json.RawMessage `json:"result"`
			Error  any             `json:"error"`
		}
		if err := json.Unmarshal(line, &resp); err != nil || resp.Error != nil {
			t.Fatalf("%s: %s (%v)", method, line, err)
		}
		return resp.Result
	}
	call(1, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "test"}})
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	json.Unmarshal(call(2, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": text}}), &res)
	if len(res.Content) != 1 {
		t.Fatalf("echo: %+v", res)
	}
	return res.Content[0].Text
}

// systemctl asks the user manager for properties of a unit.
func systemctl(t *testing.T, unit string, props ...string) map[string]string {
	t.Helper()
	args := []string{"--user", "show", unit}
	for _, p := range props {
		args = append(args, "-p", p)
	}
	out, err := exec.Command("systemctl", args...).Output()
	if err != nil {
		t.Fatalf("systemctl %v: %v", args, err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	return m
}

func journal(t *testing.T, unit string) string {
	t.Helper()
	out, err := exec.Command("journalctl", "--no-pager", "-q", "-o", "cat", "--user-unit", unit).Output()
	if err != nil {
		t.Fatalf("journalctl: %v", err)
	}
	return string(out)
}

// TestTransientUnit runs a sidecar as a transient unit of the real user manager, on each
// rootful engine through its CLI: the unit has its limits, serves MCP on its socket, logs
// to the journal under its name, keeps the config's env off its command line, and is
// gone after Stop, with its container, socket and env file.
func TestTransientUnit(t *testing.T) {
	systemdUser(t)
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			fx := newFixture(t, e, sidecar.ModeSystemdUser, nil)
			h, err := fx.start("main/research", sidecar.Config{Name: "echo", Image: sidecarImage, Env: map[string]string{"API_KEY": "s3cr3t-value"}, Memory: "128m", CPUs: 0.5})
			if err != nil {
				t.Fatal(err)
			}
			unit := fx.name("main/research", "echo") + ".service"
			if got := h.Names(); len(got) != 1 || got[0] != "echo" {
				t.Fatalf("names %v", got)
			}
			p := systemctl(t, unit, "MemoryMax", "CPUQuotaPerSecUSec", "ActiveState", "ExecStart", "Description", "CollectMode", "KillMode")
			if p["ActiveState"] != "active" || p["MemoryMax"] != fmt.Sprint(128<<20+sidecar.ClientMemory) || p["CPUQuotaPerSecUSec"] != "500ms" || p["CollectMode"] != "inactive-or-failed" || p["KillMode"] != "mixed" {
				t.Errorf("unit properties %v", p)
			}
			if strings.Contains(p["ExecStart"], "s3cr3t") || !strings.Contains(p["ExecStart"], "--cap-drop") || !strings.Contains(p["ExecStart"], "--read-only") {
				t.Errorf("ExecStart %s", p["ExecStart"])
			}
			if got := echo(t, fx.socket("main/research", "echo"), "hi from "+e.Name); got != "hi from "+e.Name {
				t.Errorf("echo answered %q", got)
			}
			if c := fx.containers(); len(c) != 1 || c[0] != fx.name("main/research", "echo") {
				t.Errorf("containers %v", c)
			}
			var log string
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if log = journal(t, unit); strings.Contains(log, "a session made 1 tool calls") {
					break
				}
			}
			if !strings.Contains(log, "listening on /var/run/pub/arizuko/sidecars/echo.sock") || !strings.Contains(log, "a session made 1 tool calls") {
				t.Errorf("journal of %s:\n%s", unit, log)
			}
			envDir := filepath.Join(fx.layout.DataDir, "sidecar-env")
			if entries, _ := os.ReadDir(envDir); len(entries) != 2 { // the env file and the container id file
				t.Errorf("env files %v", entries)
			}
			fx.stop(h)
			if p := systemctl(t, unit, "LoadState"); p["LoadState"] != "not-found" {
				t.Errorf("after stop: %v", p)
			}
			if c := fx.containers(); len(c) > 0 {
				t.Errorf("after stop: containers %v", c)
			}
			if _, err := os.Stat(fx.socket("main/research", "echo")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after stop: socket: %v", err)
			}
			if entries, _ := os.ReadDir(envDir); len(entries) != 0 {
				t.Errorf("after stop: env files %v", entries)
			}
		})
	}
}

// TestStartFailure: a sidecar whose unit fails, and one whose socket never appears, fail
// the start with the lines they logged; nothing is left.
func TestStartFailure(t *testing.T) {
	systemdUser(t)
	e := enginetest.Rootful(t)[0]
	fx := newFixture(t, e, sidecar.ModeSystemdUser, func(o *sidecar.Options) { o.StartTimeout = 3 * time.Second })
	_, err := fx.start("main", sidecar.Config{Name: "good", Image: sidecarImage}, sidecar.Config{Name: "bad", Image: sidecarImage, Command: []string{"-fail", "boom: the API key is missing"}})
	if !errors.Is(err, sidecar.ErrStart) || !strings.Contains(err.Error(), "boom: the API key is missing") || !strings.Contains(err.Error(), fx.name("main", "bad")+".service") {
		t.Fatalf("error %v", err)
	}
	t.Log(err)
	if p := systemctl(t, fx.name("main", "good")+".service", "LoadState"); p["LoadState"] != "not-found" {
		t.Errorf("the good sidecar still runs: %v", p)
	}
	_, err = fx.start("main", sidecar.Config{Name: "mute", Image: sidecarImage, Command: []string{"-socket", "/tmp/elsewhere.sock"}})
	if !errors.Is(err, sidecar.ErrStart) || !strings.Contains(err.Error(), "did not answer within 3s") || !strings.Contains(err.Error(), "listening on /tmp/elsewhere.sock") {
		t.Fatalf("error %v", err)
	}
	_, err = fx.start("main", sidecar.Config{Name: "missing", Image: "localhost/arizuko-no-such-image:1"})
	if !errors.Is(err, sidecar.ErrStart) || !strings.Contains(err.Error(), "localhost/arizuko-no-such-image:1") {
		t.Fatalf("error %v", err)
	}
	t.Log(err)
	if c := fx.containers(); len(c) > 0 {
		t.Errorf("containers %v", c)
	}
}

// TestCleanupAfterKill: a daemon killed during a turn leaves its sidecar unit running;
// the next start's Cleanup stops it, and leaves another instance's alone.
func TestCleanupAfterKill(t *testing.T) {
	systemdUser(t)
	e := enginetest.Rootful(t)[0]
	fx := newFixture(t, e, sidecar.ModeSystemdUser, nil)
	if _, err := fx.start("main", sidecar.Config{Name: "echo", Image: sidecarImage}); err != nil {
		t.Fatal(err)
	}
	fx.m.Close() // the daemon dies: nobody stops the unit
	unit := fx.name("main", "echo") + ".service"
	if p := systemctl(t, unit, "ActiveState"); p["ActiveState"] != "active" {
		t.Fatalf("unit %v", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	other := fx.manager(sidecar.ModeSystemdUser, "another-instance", nil)
	if done, err := other.Cleanup(ctx); err != nil || len(done) > 0 {
		t.Fatalf("another instance's cleanup stopped %v (%v)", done, err)
	}
	fx.m = fx.manager(sidecar.ModeSystemdUser, fx.instance, nil)
	done, err := fx.m.Cleanup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(done, " ") != unit && strings.Join(done, " ") != unit+" "+fx.name("main", "echo") {
		t.Errorf("cleanup stopped %v", done)
	}
	if p := systemctl(t, unit, "LoadState"); p["LoadState"] != "not-found" {
		t.Errorf("after cleanup: %v", p)
	}
	if c := fx.containers(); len(c) > 0 {
		t.Errorf("after cleanup: containers %v", c)
	}
}

// lockedBuffer is a log destination the test reads while the manager writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDetectedUserManager: a detected mode whose user manager is not there yet (a daemon
// started at boot before user@UID.service) runs its sidecars on the engine, says so once
// with the reason, and uses transient units of that manager as soon as it answers, saying
// that once too.
func TestDetectedUserManager(t *testing.T) {
	systemdUser(t)
	manager := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "systemd")
	rt := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", rt)
	t.Setenv("INVOCATION_ID", "")
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	e := enginetest.Rootful(t)[0]
	var logs lockedBuffer
	fx := newFixture(t, e, "", func(o *sidecar.Options) {
		o.StartTimeout = 5 * time.Second
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	if fx.m.Mode() != sidecar.ModeEngine {
		t.Fatalf("mode %s without a manager", fx.m.Mode())
	}
	for i := range 2 {
		h, err := fx.start("main", sidecar.Config{Name: "echo", Image: sidecarImage})
		if err != nil {
			t.Fatal(err)
		}
		if got := echo(t, fx.socket("main", "echo"), "hi"); got != "hi" {
			t.Errorf("echo answered %q", got)
		}
		if c := fx.containers(); len(c) != 1 {
			t.Errorf("turn %d: containers %v", i, c)
		}
		fx.stop(h)
	}
	if n := strings.Count(logs.String(), "sidecars run on the engine"); n != 1 || !strings.Contains(logs.String(), rt+"/systemd/private") {
		t.Fatalf("logged %d times, want once with the socket tried:\n%s", n, logs.String())
	}
	if err := os.Symlink(manager, filepath.Join(rt, "systemd")); err != nil {
		t.Fatal(err)
	}
	h, err := fx.start("main", sidecar.Config{Name: "echo", Image: sidecarImage})
	if err != nil {
		t.Fatal(err)
	}
	if fx.m.Mode() != sidecar.ModeSystemdUser {
		t.Errorf("mode %s once the manager answers", fx.m.Mode())
	}
	if p := systemctl(t, fx.name("main", "echo")+".service", "ActiveState"); p["ActiveState"] != "active" {
		t.Errorf("unit %v", p)
	}
	if got := echo(t, fx.socket("main", "echo"), "hi"); got != "hi" {
		t.Errorf("echo answered %q", got)
	}
	fx.stop(h)
	if n := strings.Count(logs.String(), "sidecars run as transient units again"); n != 1 {
		t.Errorf("logged the return %d times:\n%s", n, logs.String())
	}
}

// TestEngineMode runs sidecars directly on each rootful engine, as without systemd.
func TestEngineMode(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			fx := newFixture(t, e, sidecar.ModeEngine, func(o *sidecar.Options) { o.StartTimeout = 5 * time.Second })
			h, err := fx.start("main", sidecar.Config{Name: "echo", Image: sidecarImage, Env: map[string]string{"API_KEY": "k"}, Memory: "64m"})
			if err != nil {
				t.Fatal(err)
			}
			if got := echo(t, fx.socket("main", "echo"), "hi"); got != "hi" {
				t.Errorf("echo answered %q", got)
			}
			fx.stop(h)
			if c := fx.containers(); len(c) > 0 {
				t.Errorf("after stop: containers %v", c)
			}
			_, err = fx.start("main", sidecar.Config{Name: "bad", Image: sidecarImage, Env: map[string]string{"SIDECAR_FAIL": "boom: no API key"}})
			if !errors.Is(err, sidecar.ErrStart) || !strings.Contains(err.Error(), "boom: no API key") {
				t.Errorf("a failing sidecar: %v", err)
			}
			_, err = fx.start("main", sidecar.Config{Name: "cmd", Quadlet: "[Container]\nImage=" + sidecarImage + "\nExec=-socket /tmp/x.sock\n"})
			if !errors.Is(err, sidecar.ErrUnsupported) {
				t.Errorf("a command on the engine: %v", err)
			}
			if c := fx.containers(); len(c) > 0 {
				t.Errorf("after failures: containers %v", c)
			}
		})
	}
}
