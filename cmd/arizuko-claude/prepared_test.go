package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
)

// fakeClaude speaks the part of Claude Code's stream-json the runner uses: mcp_status
// answers "pending" twice, then "connected"; a user message gets a result naming how many
// status requests came before it and the message's text.
const fakeClaude = `#!/bin/bash
n=0
while IFS= read -r line; do
  case "$line" in
    *'"subtype":"mcp_status"'*)
      id=$(printf '%s' "$line" | sed -n 's/.*"request_id":"\([^"]*\)".*/\1/p')
      n=$((n+1)); st=pending; [ $n -ge 3 ] && st=connected
      printf '{"type":"control_response","response":{"subtype":"success","request_id":"%s","response":{"mcpServers":[{"name":"arizuko","status":"%s"}]}}}\n' "$id" "$st";;
    *'"type":"user"'*)
      text=$(printf '%s' "$line" | sed -n 's/.*"content":"\([^"]*\)".*/\1/p')
      printf '{"type":"result","subtype":"success","is_error":false,"result":"after %s status requests: %s","session_id":"s-1"}\n' "$n" "$text";;
  esac
done
`

// TestRunPrepared: a warm agent starts Claude Code with the prepare line, prints the ready
// marker only once no MCP server is pending (and before it reads the turn's line), and
// answers the turn's line; a turn's line that differs from the prepare line is refused.
func TestRunPrepared(t *testing.T) {
	dir := t.TempDir()
	oldBin, oldWorkspace := claudeBin, workspace
	t.Cleanup(func() { claudeBin, workspace = oldBin, oldWorkspace })
	claudeBin, workspace = filepath.Join(dir, "claude"), dir
	t.Setenv("HOME", dir)
	if err := os.WriteFile(claudeBin, []byte(fakeClaude), 0o755); err != nil {
		t.Fatal(err)
	}
	prep := contract.Input{Prepare: true, SessionID: "", SystemPrompt: "be brief", Grants: []string{"send_reply"}, Folder: "main"}
	for _, tc := range []struct {
		name   string
		turn   contract.Input
		status contract.Status
		want   string
	}{
		{"the turn", contract.Input{RunID: "r1", SystemPrompt: "be brief", Grants: []string{"send_reply"}, Folder: "main",
			Messages: []contract.Message{{Role: "user", Content: "hello"}}}, contract.StatusOK, "after 3 status requests: hello"},
		{"another prompt", contract.Input{RunID: "r1", SystemPrompt: "be long", Grants: []string{"send_reply"}, Folder: "main",
			Messages: []contract.Message{{Role: "user", Content: "hello"}}}, contract.StatusFatal, "differs from the prepare line"},
		{"other grants", contract.Input{RunID: "r1", SystemPrompt: "be brief", Folder: "main",
			Messages: []contract.Message{{Role: "user", Content: "hello"}}}, contract.StatusFatal, "differs from the prepare line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			done := make(chan contract.Output, 1)
			go func() { done <- runPrepared(context.Background(), prep, bufio.NewReader(inR), outW); outW.Close() }()
			ready := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(outR).ReadString('\n')
				ready <- line
				io.Copy(io.Discard, outR)
			}()
			select {
			case line := <-ready:
				if strings.TrimSpace(line) != contract.ReadyMarker {
					t.Fatalf("first stdout line %q, want the ready marker", line)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no ready marker")
			}
			b, err := contract.EncodeInput(tc.turn)
			if err != nil {
				t.Fatal(err)
			}
			go func() { inW.Write(b); inW.Close() }()
			out := <-done
			if out.Status != tc.status || !strings.Contains(out.Result+out.Error, tc.want) {
				t.Errorf("answer %+v, want %s with %q", out, tc.status, tc.want)
			}
		})
	}
}
