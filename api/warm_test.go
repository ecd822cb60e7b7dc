package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/arizuko/arizukod/api/apiwire"
)

// GET /v1/warm: the warm agents the daemon reports, in camelCase; none (an empty list,
// not null) from a daemon that reports none.
func TestWarmAPI(t *testing.T) {
	srv, _ := messagesServer(t)
	if code, body := serve(t, srv, http.MethodGet, "/v1/warm", ""); code != http.StatusOK ||
		body != "{\n  \"max\": 0,\n  \"minAvailable\": 0,\n  \"available\": 0,\n  \"agents\": []\n}\n" {
		t.Errorf("without warm agents: HTTP %d %q", code, body)
	}
	srv.Warm = func(context.Context) apiwire.WarmAgents {
		return apiwire.WarmAgents{Max: 2, MinAvailable: 1 << 30, Available: 8 << 30,
			Agents: []apiwire.WarmAgent{{Folder: "main", Container: "arizuko-main-1", Ready: "2030-01-02T03:04:05Z", PSSBytes: 200 << 20}}}
	}
	code, body := serve(t, srv, http.MethodGet, "/v1/warm", "")
	want := `{
  "max": 2,
  "minAvailable": 1073741824,
  "available": 8589934592,
  "agents": [
    {
      "folder": "main",
      "container": "arizuko-main-1",
      "ready": "2030-01-02T03:04:05Z",
      "pssBytes": 209715200
    }
  ]
}
`
	if code != http.StatusOK || body != want {
		t.Errorf("GET /v1/warm: HTTP %d\n%s\nwant\n%s", code, body, want)
	}
}
