package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
)

// TestGVisorGroup runs a group under gVisor through the whole daemon on the engines of the
// test host that have it (Docker per container, podman4-gvisor as its service's runtime):
// the operator allows runsc, a group naming another runtime is refused naming the field,
// and the group's turn runs in gVisor's kernel with its sidecar, reaches the model only
// through the gateway's socket, and holds no key.
func TestGVisorGroup(t *testing.T) {
	for _, e := range enginetest.GVisor(t) {
		t.Run(e.Name, func(t *testing.T) { testGVisorGroup(t, e) })
	}
}

func testGVisorGroup(t *testing.T, e enginetest.Engine) {
	fake := fakemodel.Start()
	defer fake.Close()
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Text: "echo: " + r.LastUserText(), InputTokens: 5, OutputTokens: 3}
	}
	key := "sk-ant-test-" + daemontest.RandHex(16)
	d := daemontest.New(t, daemontest.Config{Engine: e, EnvFile: "ANTHROPIC_API_KEY=" + key + "\n",
		TOML: fmt.Sprintf("[model]\nupstream = %q\n[limits]\nallowed_runtimes = [\"runsc\"]\n", fake.URL)})
	ensureSidecarImage(t, e, d.Eng)
	d.Start(t)

	var g apiwire.Group
	err := d.Client.Do(context.Background(), http.MethodPost, "/v1/groups",
		apiwire.PutGroupRequest{Folder: "main", ContainerConfig: json.RawMessage(`{"runtime": "crun"}`)}, &g)
	var refused *apiwire.Error
	if !errors.As(err, &refused) || refused.Code != http.StatusBadRequest || refused.Field != "containerConfig.runtime" || !strings.Contains(refused.Msg, "limits.allowed_runtimes") {
		t.Errorf("a runtime the operator did not allow: %#v, want a 400 naming containerConfig.runtime", err)
	}
	d.PutGroup(t, "main", `{"runtime": "runsc", "sidecars": [{"name": "echo", "image": "`+sidecarImage+`"}]}`)

	var s struct {
		Kernel          string   `json:"kernel"`
		Dmesg           []string `json:"dmesg"`
		NoNewPrivsPrctl int      `json:"noNewPrivsPrctl"`
		Interfaces      []string `json:"interfaces"`
	}
	if err := json.Unmarshal([]byte(d.Turn(t, "main", "sandbox").Result), &s); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Kernel, "Linux version 4.4.0 ") || !strings.Contains(strings.Join(s.Dmesg, "\n"), "gVisor") ||
		s.NoNewPrivsPrctl != 1 || len(s.Interfaces) != 1 || s.Interfaces[0] != "lo" {
		t.Errorf("the group's sandbox: %+v, want gVisor's kernel, no_new_privs, loopback only", s)
	}
	if a := agentAnswer(t, d.Turn(t, "main", "model hello from gVisor")); a["status"] != float64(200) || a["text"] != "echo: hello from gVisor" {
		t.Errorf("the model through the gateway's socket from gVisor: %v", a)
	}
	if r := d.Turn(t, "main", `mcp-socket echo.sock echo {"text":"sidecar under gVisor"}`); !strings.Contains(r.Result, "sidecar under gVisor") {
		t.Errorf("the group's sidecar: %s %q %q", r.Status, r.Result, r.Error)
	}
	if a := agentAnswer(t, d.Turn(t, "main", "scan sk-ant-test-")); a["hits"] != nil {
		t.Errorf("the model key is inside the container: %v", a["hits"])
	}
}
