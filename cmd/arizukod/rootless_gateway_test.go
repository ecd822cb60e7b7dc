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
	"syscall"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
)

// TestRootlessGateway runs `arizukod serve` as the unprivileged test user on that user's
// rootless Podman, the system service's deployment, and sends a turn whose agent asks a
// scripted Messages API through the model gateway: the container's root, mapped to the
// user, reaches model.sock, and the key from the env file reaches the upstream only.
func TestRootlessGateway(t *testing.T) {
	e := enginetest.Rootless(t)
	eng, _ := e.Open(t)
	image := enginetest.EnsureAgentImage(t, e, eng)
	u, err := user.Lookup(e.User)
	if err != nil {
		t.Fatalf("user %s: %v", e.User, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	base, err := os.MkdirTemp(u.HomeDir, "arizuko-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	bin := filepath.Join(base, "arizukod")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build arizukod: %v\n%s", err, out)
	}
	fake := fakemodel.Start()
	defer fake.Close()
	key := "sk-ant-test-rootless-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sock := filepath.Join(base, "api.sock")
	files := map[string]string{
		"env": "ANTHROPIC_API_KEY=" + key + "\n",
		"arizukod.toml": strings.Join([]string{
			fmt.Sprintf("data_dir = %q", filepath.Join(base, "data")),
			fmt.Sprintf("listen = %q", sock),
			`engine = "podman"`,
			fmt.Sprintf("engine_socket = %q", e.URI),
			fmt.Sprintf("image = %q", image),
			fmt.Sprintf("env_file = %q", filepath.Join(base, "env")),
			fmt.Sprintf("allowlist = %q", filepath.Join(base, "none.json")),
			fmt.Sprintf("skills_dir = %q", filepath.Join(base, "skills")),
			fmt.Sprintf("instance = %q", "test-rl-"+strconv.Itoa(os.Getpid())),
			fmt.Sprintf("[model]\nupstream = %q", fake.URL),
		}, "\n") + "\n",
	}
	for name, text := range files {
		p := filepath.Join(base, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, uid, gid)
	}
	os.Chown(base, uid, gid)
	cmd := exec.Command("runuser", "-u", e.User, "--", bin, "serve", "--config", filepath.Join(base, "arizukod.toml"))
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.HomeDir, "XDG_RUNTIME_DIR=/run/user/" + u.Uid}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("arizukod's stderr:\n%s", stderr.String())
		}
	}()
	c := api.NewClient(sock)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		var h api.HealthReport
		if err := c.Do(ctx, http.MethodGet, "/health", nil, &h); err == nil && h.Status == "ok" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the rootless daemon never became healthy")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var g api.Group
	if err := c.Do(ctx, http.MethodPost, "/v1/groups", api.PutGroupRequest{Folder: "main"}, &g); err != nil {
		t.Fatal(err)
	}
	r, err := c.CreateRun(ctx, api.CreateRunRequest{Folder: "main", Messages: []contract.Message{{Content: "model hello rootless"}}})
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
}
