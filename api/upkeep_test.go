package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/retention"
)

// recordingUpkeep records the dryRun each prune is asked with.
type recordingUpkeep struct{ asked []bool }

func (u *recordingUpkeep) Prune(_ context.Context, dryRun bool) (retention.Report, error) {
	u.asked = append(u.asked, dryRun)
	return retention.Report{DryRun: dryRun, LogBytes: 7}, nil
}

func (u *recordingUpkeep) Backup(context.Context) (io.ReadCloser, int64, error) {
	return io.NopCloser(strings.NewReader("")), 0, nil
}

// POST /v1/prune speaks the API's camelCase both ways: it takes dryRun, refuses the old
// dry_run naming the field and the name to send (pruning nothing), and answers in camelCase.
func TestPruneCamelCase(t *testing.T) {
	srv, _ := messagesServer(t)
	up := &recordingUpkeep{}
	srv.Upkeep = up

	code, body := serve(t, srv, http.MethodPost, "/v1/prune", `{"dry_run":true}`)
	var e struct{ Error, Field string }
	if json.Unmarshal([]byte(body), &e); code != http.StatusBadRequest || e.Field != "dry_run" || !strings.Contains(e.Error, "send dryRun") {
		t.Errorf("dry_run: HTTP %d %s, want 400 naming dry_run and dryRun", code, body)
	}
	if len(up.asked) != 0 {
		t.Fatalf("a refused request pruned: %v", up.asked)
	}

	code, body = serve(t, srv, http.MethodPost, "/v1/prune", `{"dryRun":true}`)
	var rep map[string]any
	if err := json.Unmarshal([]byte(body), &rep); code != http.StatusOK || err != nil {
		t.Fatalf("dryRun: HTTP %d %s %v", code, body, err)
	}
	if len(up.asked) != 1 || !up.asked[0] {
		t.Errorf("dryRun true reached the pruner as %v", up.asked)
	}
	if rep["dryRun"] != true || rep["logBytes"] != float64(7) {
		t.Errorf("answer %s: want camelCase dryRun and logBytes", body)
	}
	for k := range rep {
		if strings.Contains(k, "_") {
			t.Errorf("answer field %q is not camelCase", k)
		}
	}
}
