package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/store"
)

// TestLocalTurnTools: a turn of `arizukod run --local` gets the MCP server a turn of the
// daemon gets, on every rootful engine: the example agent lists the tools on router.sock and
// sends a reply through one of them, which lands in the data directory's outbox for the
// chat the turn answers.
func TestLocalTurnTools(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			eng, _ := e.Open(t)
			image := enginetest.EnsureAgentImage(t, e, eng)
			dataDir := t.TempDir()
			// The configuration run --local reads: none, so the defaults.
			t.Setenv("ARIZUKO_MODE", "user")
			t.Setenv("XDG_CONFIG_HOME", t.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			run := func(message string) string {
				t.Helper()
				var out bytes.Buffer
				err := runCommand(ctx, []string{"--local", "--engine", e.Kind, "--engine-socket", e.URI, "--image", image,
					"--data-dir", dataDir, "--folder", "main", "--chat", "chat-local", "--message", message}, &out)
				var res runResult
				if jerr := json.Unmarshal(out.Bytes(), &res); err != nil || jerr != nil || res.Status != "ok" {
					t.Fatalf("run %q: %v %v\n%s", message, err, jerr, out.String())
				}
				return res.Result
			}
			var list struct{ Tools []string }
			if err := json.Unmarshal([]byte(run("mcp list")), &list); err != nil || !strings.Contains(strings.Join(list.Tools, " "), "send_reply") {
				t.Fatalf("tools of a local turn: %v %v, want send_reply among them", list.Tools, err)
			}
			var call struct {
				IsError bool
				Text    string
			}
			if err := json.Unmarshal([]byte(run(`mcp send_reply {"text":"hello from a local turn"}`)), &call); err != nil || call.IsError {
				t.Fatalf("send_reply from a local turn: %+v %v", call, err)
			}
			st, err := store.Open(ctx, filepath.Join(dataDir, "arizukod.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			items, err := st.ListOutbox(ctx, "main", 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != 1 || items[0].Content != "hello from a local turn" || items[0].Target != "chat-local" {
				t.Fatalf("outbox after a local turn's send_reply: %+v, want the reply to chat-local", items)
			}
		})
	}
}

// TestLocalTurnQuiet: a `run --local` turn of the example agent, which neither asks the
// model nor has sidecars, logs no model-credential warning and no notice of where
// sidecars run: those are the daemon's setup, and do not apply to this turn.
func TestLocalTurnQuiet(t *testing.T) {
	e := daemontest.Podman4(t)
	eng, _ := e.Open(t)
	image := enginetest.EnsureAgentImage(t, e, eng)
	t.Setenv("ARIZUKO_MODE", "user")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("CLAUDE_CODE_OAUTH_TOKEN", "")
	var logged bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	defer slog.SetDefault(old)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := runCommand(ctx, []string{"--local", "--engine", e.Kind, "--engine-socket", e.URI, "--image", image,
		"--data-dir", t.TempDir(), "--folder", "main", "--message", "reply hi"}, &out)
	if err != nil {
		t.Fatalf("run --local: %v\n%s%s", err, out.String(), logged.String())
	}
	for _, noise := range []string{"model credential", "sidecars run"} {
		if strings.Contains(logged.String(), noise) {
			t.Errorf("run --local logged %q, which does not apply to its turn:\n%s", noise, logged.String())
		}
	}
}
