package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/store"
)

// fileEngine is a configuration file that names the test host's Podman 4 by engine and
// engine_socket, in an environment that names no engine, and the agent image on it.
type fileEngine struct {
	e      enginetest.Engine
	eng    engine.Engine
	image  string
	config string
	data   string
}

func newFileEngine(t *testing.T, more string) fileEngine {
	t.Helper()
	e := daemontest.Podman4(t)
	eng, _ := e.Open(t)
	fx := fileEngine{e: e, eng: eng, image: enginetest.EnsureAgentImage(t, e, eng), data: t.TempDir()}
	configHome(t)
	for _, k := range []string{"ARIZUKO_ENGINE", "ARIZUKO_ENGINE_SOCKET", "CONTAINER_HOST", "DOCKER_HOST", "XDG_RUNTIME_DIR"} {
		t.Setenv(k, "")
	}
	fx.config = filepath.Join(t.TempDir(), "arizukod.toml")
	writeFile(t, fx.config, fmt.Sprintf("engine = %q\nengine_socket = %q\ndata_dir = %q\nimage = %q\n%s",
		e.Kind, e.URI, fx.data, fx.image, more))
	return fx
}

// runLocal runs `arizukod run --local --config FILE` with args and returns its result.
func (fx fileEngine) runLocal(t *testing.T, args ...string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := runCommand(ctx, append([]string{"--local", "--config", fx.config}, args...), &out)
	var res runResult
	if jerr := json.Unmarshal(out.Bytes(), &res); err != nil || jerr != nil {
		t.Fatalf("run --local %q: %v %v\n%s", args, err, jerr, out.String())
	}
	return res
}

// TestEngineSocketFromFile: doctor, run --local and image use the engine that engine and
// engine_socket of arizukod.toml name, as the daemon of that file does, and doctor says
// that the file chose it.
func TestEngineSocketFromFile(t *testing.T) {
	fx := newFileEngine(t, "")
	ctx := context.Background()
	o := &doctorOpts{configPath: fx.config, host: host{mode: config.ModeUser}}
	detail, err := checkEngine(ctx, o)
	if err != nil || !strings.Contains(detail, "at "+fx.e.URI) || !strings.Contains(detail, "from engine_socket in "+fx.config) {
		t.Errorf("doctor's engine check: %q, %v; want the file's engine, said to come from the file", detail, err)
	}
	if res := fx.runLocal(t, "--folder", "main", "--message", "reply from the file's engine"); res.Status != "ok" || res.Result != "from the file's engine" {
		t.Errorf("run --local: %+v", res)
	}
	ref := "localhost/arizuko-assembly-test:" + daemontest.RandHex(4)
	if err := cmdImage(ctx, []string{"import-static", "--config", fx.config, "--tag", ref, enginetest.AgentBinary(t)}); err != nil {
		t.Fatalf("image import-static: %v", err)
	}
	if there, err := fx.eng.ImageExists(ctx, ref); err != nil || !there {
		t.Errorf("image import-static: %s is not on the file's engine: %v", ref, err)
	}
	rm := fx.eng.(engine.ImageRemover)
	if id, err := rm.ImageID(ctx, ref); err != nil || rm.RemoveImage(ctx, id) != nil {
		t.Errorf("remove %s: %v", ref, err)
	}
}

// TestLocalHonoursFileAllowlist: a `run --local` turn gets the additional mount that the
// allowlist of arizukod.toml allows, as the daemon's turn does.
func TestLocalHonoursFileAllowlist(t *testing.T) {
	extra, allowDir := t.TempDir(), t.TempDir()
	allow := filepath.Join(allowDir, "allow.json")
	writeFile(t, allow, fmt.Sprintf(`{"allowedRoots":[{"path":%q}]}`, extra))
	if err := os.Chmod(allow, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(extra, "note.txt"), "mounted by the file's allowlist")
	if err := os.Chmod(extra, 0o755); err != nil {
		t.Fatal(err)
	}
	fx := newFileEngine(t, fmt.Sprintf("allowlist = %q\n", allow))
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(fx.data, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	cc := fmt.Sprintf(`{"additional_mounts":[{"host_path":%q,"container_path":"notes","readonly":true}]}`, extra)
	_, err = st.UpsertGroup(ctx, store.Group{Folder: "main", ContainerConfig: []byte(cc)})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res := fx.runLocal(t, "--folder", "main", "--message", "read extra/notes/note.txt"); res.Status != "ok" || res.Result != "mounted by the file's allowlist" {
		t.Errorf("run --local: %+v; want the note through the mount the file's allowlist allows", res)
	}
}

// TestLocalRedacts: a `run --local` turn redacts the secrets of the configuration (here a
// value of its env file) where the daemon does: its run log, its log of the agent's
// stderr, and what it writes to the store (an outbox row the agent sends).
func TestLocalRedacts(t *testing.T) {
	const secret = "ghp_localTurnSecret0123456789abcdef"
	envFile := filepath.Join(t.TempDir(), "env")
	writeFile(t, envFile, "GH_TOKEN="+secret+"\n")
	fx := newFileEngine(t, fmt.Sprintf("env_file = %q\n", envFile))
	var logged bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(old)
	res := fx.runLocal(t, "--folder", "main", "--message", "stderr the token is "+secret)
	if res.Status != "ok" {
		t.Fatalf("run --local: %+v", res)
	}
	runLog, err := os.ReadFile(res.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(runLog), secret) || !strings.Contains(string(runLog), "the token is [REDACTED:GH_TOKEN]") {
		t.Errorf("run log of a local turn:\n%s", runLog)
	}
	reply := fx.runLocal(t, "--folder", "main", "--chat", "chat-local", "--message", `mcp send_reply {"text":"the token is `+secret+`"}`)
	if reply.Status != "ok" {
		t.Fatalf("run --local send_reply: %+v", reply)
	}
	if strings.Contains(logged.String(), secret) {
		t.Errorf("a local turn logged the secret:\n%s", logged.String())
	}
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(fx.data, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	items, err := st.ListOutbox(ctx, "main", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].Content != "the token is [REDACTED:GH_TOKEN]" {
		t.Errorf("outbox after a local turn's send_reply: %+v, want the secret redacted", items)
	}
}
