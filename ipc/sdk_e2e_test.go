package ipc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/store"
)

// sdkVersion is the official MCP SDK release the interoperability test uses.
const sdkVersion = "1.32.2"

// sdkDir is where the SDK is installed once and kept between test runs.
var sdkDir = filepath.Join("/var/tmp", "arizuko-mcp-sdk-"+sdkVersion)

// needTool returns the path of a program the test runs. The test installs the SDK from npm
// and runs node: it runs with the real-part suite (enginetest.Services), and a missing
// program fails it where engines are required (enginetest.Missing).
func needTool(t *testing.T, name string) string {
	t.Helper()
	enginetest.Services(t, "the official MCP SDK from npm")
	p, err := exec.LookPath(name)
	if err != nil {
		enginetest.Missing(t, "%s is not installed", name)
	}
	return p
}

// installSDK installs @modelcontextprotocol/sdk into sdkDir unless it is
// there: into a fresh directory first, renamed into place when complete, so
// that an interrupted or concurrent install never leaves a half one.
func installSDK(t *testing.T) string {
	t.Helper()
	marker := filepath.Join(sdkDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
	if _, err := os.Stat(marker); err == nil {
		return sdkDir
	}
	tmp, err := os.MkdirTemp("/var/tmp", "arizuko-mcp-sdk-install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", tmp, "--no-audit", "--no-fund", "--loglevel=error",
		"--cache", filepath.Join("/var/tmp", "arizuko-npm-cache"), "@modelcontextprotocol/sdk@"+sdkVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install @modelcontextprotocol/sdk@%s: %v\n%s", sdkVersion, err, out)
	}
	if err := os.Rename(tmp, sdkDir); err != nil {
		if _, serr := os.Stat(marker); serr != nil {
			t.Fatalf("install the SDK into %s: %v", sdkDir, err)
		}
	}
	return sdkDir
}

type sdkResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func (r sdkResult) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// TestOfficialSDKClient talks to the server with a client that shares no
// code with it: the official MCP TypeScript SDK from npm, through socat, as
// Claude Code's settings.json entry connects.
func TestOfficialSDKClient(t *testing.T) {
	node := needTool(t, "node")
	needTool(t, "npm")
	needTool(t, "socat")
	dir := installSDK(t)
	script, err := os.ReadFile(filepath.Join("testdata", "sdk_client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// Node resolves the SDK from the script's own directory.
	scriptPath := filepath.Join(dir, fmt.Sprintf("client-%d.mjs", os.Getpid()))
	if err := os.WriteFile(scriptPath, script, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(scriptPath)

	e := newEnv(t)
	if err := e.st.SetGrants(e.ctx, "main/a", []string{"*", "!list_*"}); err != nil {
		t.Fatal(err)
	}
	s := e.start(t, "main/a", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, scriptPath, s.SocketPath())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		errors.As(err, &ee)
		t.Fatalf("node client: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var got struct {
		Server struct {
			Name string `json:"name"`
		} `json:"server"`
		Tools []struct {
			Name     string   `json:"name"`
			Required []string `json:"required"`
		} `json:"tools"`
		Sent    sdkResult `json:"sent"`
		Denied  sdkResult `json:"denied"`
		Bad     sdkResult `json:"bad"`
		Unknown string    `json:"unknown"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	if got.Server.Name != "arizukod" {
		t.Errorf("server name %q", got.Server.Name)
	}
	var names []string
	for _, tool := range got.Tools {
		names = append(names, tool.Name)
		if tool.Name == "send_message" && !slices.Equal(tool.Required, []string{"chat_jid", "text"}) {
			t.Errorf("send_message requires %v", tool.Required)
		}
	}
	slices.Sort(names)
	want := slices.DeleteFunc(slices.Clone(seedTools[1]), func(n string) bool { return strings.HasPrefix(n, "list_") })
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v\nwant    %v", names, want)
	}
	if got.Sent.IsError || !strings.Contains(got.Sent.text(), `"outbox_id"`) {
		t.Errorf("send_message: %+v", got.Sent)
	}
	items := outboxOf(t, e, "main/a", store.OutboxMessage)
	if len(items) != 1 || items[0].Content != "from the official SDK" || items[0].Target != "tg:7" {
		t.Errorf("outbox = %+v", items)
	}
	if !got.Denied.IsError || !strings.Contains(got.Denied.text(), "denied: tier 1 (world) may not call spawn_group") {
		t.Errorf("spawn_group: %+v", got.Denied)
	}
	if !got.Bad.IsError || !strings.Contains(got.Bad.text(), "bad argument text: required") {
		t.Errorf("send_message without text: %+v", got.Bad)
	}
	if !strings.Contains(got.Unknown, "no_such_tool") {
		t.Errorf("unknown tool: %q", got.Unknown)
	}
}
