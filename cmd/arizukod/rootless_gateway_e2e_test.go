package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
	"github.com/arizuko/arizukod/runtime/engine"
)

// rootlessDaemon is arizukod built into a directory of the rootless test user's home and
// served as that user on its rootless Podman: the system service's deployment.
type rootlessDaemon struct {
	t     *testing.T
	e     enginetest.Engine
	info  engine.Info
	eng   engine.Engine
	image string
	u     *user.User
	uid   int
	gid   int
	base  string
	bin   string
	sock  string
	conf  string   // the configuration serve writes, before the caller's changes
	env   []string // more of the daemon's environment
	c     *apiwire.Client
	ctx   context.Context
}

func newRootlessDaemon(t *testing.T, upstream string) *rootlessDaemon {
	t.Helper()
	e := enginetest.Rootless(t)
	eng, info := e.Open(t)
	r := &rootlessDaemon{t: t, e: e, eng: eng, info: info, image: enginetest.EnsureAgentImage(t, e, eng)}
	u, err := user.Lookup(e.User)
	if err != nil {
		t.Fatalf("user %s: %v", e.User, err)
	}
	r.u = u
	r.uid, _ = strconv.Atoi(u.Uid)
	r.gid, _ = strconv.Atoi(u.Gid)
	if r.base, err = os.MkdirTemp(u.HomeDir, "arizuko-rootless-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(r.base) })
	r.bin = filepath.Join(r.base, "arizukod")
	build := exec.Command("go", "build", "-o", r.bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build arizukod: %v\n%s", err, out)
	}
	r.sock = filepath.Join(r.base, "api.sock")
	r.conf = strings.Join([]string{
		fmt.Sprintf("data_dir = %q", filepath.Join(r.base, "data")),
		fmt.Sprintf("listen = %q", r.sock),
		`engine = "podman"`,
		fmt.Sprintf("engine_socket = %q", e.URI),
		fmt.Sprintf("image = %q", r.image),
		fmt.Sprintf("env_file = %q", filepath.Join(r.base, "env")),
		fmt.Sprintf("allowlist = %q", filepath.Join(r.base, "none.json")),
		fmt.Sprintf("skills_dir = %q", filepath.Join(r.base, "skills")),
		fmt.Sprintf("instance = %q", "test-rl-"+strconv.Itoa(os.Getpid())),
		fmt.Sprintf("[model]\nupstream = %q", upstream),
	}, "\n") + "\n"
	os.Chown(r.base, r.uid, r.gid)
	r.c = apiwire.NewClient(r.sock)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	return r
}

// write writes a file of the daemon's directory, the test user's.
func (r *rootlessDaemon) write(name, text string) {
	p := filepath.Join(r.base, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		r.t.Fatal(err)
	}
	os.Chown(p, r.uid, r.gid)
}

// serve starts the daemon as the test user with toml, waits until its engine answers and
// registers main; the returned func stops it.
func (r *rootlessDaemon) serve(toml string) (apiwire.HealthReport, func()) {
	t := r.t
	t.Helper()
	r.write("arizukod.toml", toml)
	cmd := exec.Command("runuser", "-u", r.e.User, "--", r.bin, "serve", "--config", filepath.Join(r.base, "arizukod.toml"))
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + r.u.HomeDir, "XDG_RUNTIME_DIR=/run/user/" + r.u.Uid}, r.env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("arizukod's stderr:\n%s", stderr.String())
		}
	})
	for {
		var h apiwire.HealthReport
		code, body, err := daemontest.Do(r.sock, http.MethodGet, "/health", "", nil)
		if err == nil && json.Unmarshal(body, &h) == nil && h.Engine.Up && h.Engine.Limits != apiwire.LimitsPending {
			if (code == http.StatusOK) != (h.Status == "ok") {
				t.Errorf("health: HTTP %d with status %q", code, h.Status)
			}
			var g apiwire.Group
			if err := r.c.Do(r.ctx, http.MethodPost, "/v1/groups", apiwire.PutGroupRequest{Folder: "main"}, &g); err != nil {
				stop()
				t.Fatal(err)
			}
			return h, stop
		}
		if r.ctx.Err() != nil {
			stop()
			t.Fatalf("the rootless daemon's engine never answered")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unlimited is the configuration with the opt-out this host's rootless Podman needs.
func (r *rootlessDaemon) unlimited(conf string) string {
	return strings.Replace(conf, "[model]", "[limits]\nallow_unlimited = true\n[model]", 1)
}

// TestRootlessGateway runs `arizukod serve` as the unprivileged test user on that user's
// rootless Podman, the system service's deployment, and sends a turn whose agent asks a
// scripted Messages API through the model gateway: the container's root, mapped to the
// user, reaches model.sock, and the key from the env file reaches the upstream only. This
// host's rootless Podman cannot apply the limits: the daemon first refuses turns with the
// reason, and runs them once the configuration says allow_unlimited = true. Then the same
// with Claude Code in the image built on that Podman.
func TestRootlessGateway(t *testing.T) {
	fake := fakemodel.Start()
	defer fake.Close()
	d := newRootlessDaemon(t, fake.URL)
	info, image, eng, e, c, ctx, conf, serve := d.info, d.image, d.eng, d.e, d.c, d.ctx, d.conf, d.serve
	key := "sk-ant-test-rootless-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	d.write("env", "ANTHROPIC_API_KEY="+key+"\n")

	// Where rootless Podman cannot apply the memory, CPU and pids limits (this host's
	// cgroups v1), the daemon without the operator's opt-out says why and runs no turn.
	if info.NoLimits != "" {
		h, stop := serve(conf)
		if h.Status != "degraded" || !strings.Contains(h.Engine.Limits, info.NoLimits) || !strings.Contains(h.Engine.Limits, "allow_unlimited = true") {
			stop()
			t.Fatalf("health without allow_unlimited: %+v, want degraded with the reason and the fix", h)
		}
		refused, err := c.CreateRun(ctx, apiwire.CreateRunRequest{Folder: "main", Messages: []contract.Message{{Content: "reply unlimited"}}})
		if err == nil {
			refused, err = c.WaitRun(ctx, refused.ID)
		}
		stop()
		if err != nil {
			t.Fatal(err)
		}
		if refused.Failure != "misconfig" || !refused.Terminal || !strings.Contains(refused.Error, info.NoLimits) || !strings.Contains(refused.Error, "allow_unlimited = true") {
			t.Fatalf("a turn without allow_unlimited: %+v, want a terminal misconfig with the reason", refused)
		}
		t.Logf("refused: %s", refused.Error)
	}

	h, stop := serve(d.unlimited(conf))
	defer stop()
	wantLimits := "applied"
	if info.NoLimits != "" {
		wantLimits = "not applied (allow_unlimited = true): " + info.NoLimits
	}
	if h.Status != "ok" || h.Engine.Limits != wantLimits {
		t.Fatalf("health with allow_unlimited: %+v, want ok and limits %q", h, wantLimits)
	}
	r, err := c.CreateRun(ctx, apiwire.CreateRunRequest{Folder: "main", Messages: []contract.Message{{Content: "model hello rootless"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err = c.WaitRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	var a map[string]any
	json.Unmarshal([]byte(r.Result), &a)
	if a["status"] != float64(200) || a["text"] != "echo: hello rootless" {
		t.Fatalf("rootless model turn: %s %s %q %q", r.State, r.Status, r.Result, r.Error)
	}
	if reqs := fake.Requests(); len(reqs) != 1 || reqs[0].Header.Get("X-Api-Key") != key {
		t.Errorf("the upstream saw %d requests, want 1 with the key", len(reqs))
	}
	stop()

	// Claude Code itself, in the image built on this rootless Podman: a real turn through
	// the gateway, with its answer and a session, the key again only upstream.
	claude := enginetest.EnsureClaudeImage(t, e, eng)
	_, stopClaude := serve(d.unlimited(strings.Replace(conf, image, claude, 1)))
	defer stopClaude()
	n := len(fake.Requests())
	if r, err = c.CreateRun(ctx, apiwire.CreateRunRequest{Folder: "main", Messages: []contract.Message{{Content: "hello rootless claude"}}}); err != nil {
		t.Fatal(err)
	}
	if r, err = c.WaitRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if r.Status != "ok" || !strings.HasSuffix(r.Result, "hello rootless claude") || r.NewSessionID == "" {
		t.Fatalf("rootless Claude Code turn: %s %s %q %q (session %q)", r.State, r.Status, r.Result, r.Error, r.NewSessionID)
	}
	for _, req := range fake.Requests()[n:] {
		if req.Header.Get("X-Api-Key") != key {
			t.Errorf("a Claude Code request reached the upstream with x-api-key %q, want the daemon's key", req.Header.Get("X-Api-Key"))
		}
	}
}
