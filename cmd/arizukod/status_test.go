package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/store"
)

// fixedHealth reports what it holds.
type fixedHealth apiwire.HealthReport

func (h fixedHealth) Health(context.Context) apiwire.HealthReport { return apiwire.HealthReport(h) }

// serveHealth serves the API with health h on a new socket (after delay, when not zero)
// and returns the socket's path at once.
func serveHealth(t *testing.T, h apiwire.HealthReport, delay time.Duration) string {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), filepath.Join(dir, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	socket := filepath.Join(dir, "api.sock")
	srv := &http.Server{Handler: api.New(st, stillQueue{}, fixedHealth(h), slog.New(slog.NewTextHandler(io.Discard, nil)))}
	listen := func() {
		ln, err := net.Listen("unix", socket)
		if err != nil {
			t.Error(err)
			return
		}
		go srv.Serve(ln)
	}
	if delay == 0 {
		listen()
		t.Cleanup(func() { srv.Close() })
		return socket
	}
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		time.Sleep(delay)
		listen()
	}()
	t.Cleanup(func() { <-listening; srv.Close() })
	return socket
}

// TestStatus: `status` prints what the daemon runs with and exits 1 when it cannot start
// turns; --wait waits for a daemon that starts late, and only as long as asked.
func TestStatus(t *testing.T) {
	up := apiwire.HealthReport{Status: "ok", Version: "v1", Image: "localhost/arizuko-agent:v1",
		Engine:  apiwire.EngineHealth{Up: true, Name: "podman", Version: "4.3.1", Socket: "unix:///run/podman.sock", Limits: "applied"},
		Model:   apiwire.ModelHealth{Upstream: "https://api.anthropic.com", Credential: "api_key_file /etc/arizuko/key"},
		Running: 1, Queued: 2}
	down := apiwire.HealthReport{Status: "degraded", Version: "v1", Engine: apiwire.EngineHealth{Error: "no engine answered"}}
	for _, c := range []struct {
		name      string
		health    apiwire.HealthReport
		delay     time.Duration
		args      []string
		code      int
		out, diag string
	}{
		{"up", up, 0, nil, 0, "engine:  podman 4.3.1 at unix:///run/podman.sock\nlimits:  applied\nimage:   localhost/arizuko-agent:v1\nmodel:   https://api.anthropic.com, credential from api_key_file /etc/arizuko/key\nturns:   1 running, 2 queued", ""},
		{"degraded", down, 0, nil, 1, "engine:  not answering: no engine answered", "no engine answered"},
		{"started late, waited for", up, 300 * time.Millisecond, []string{"--wait", "10s"}, 0, "daemon:  ok, version v1", ""},
		{"started late, not waited for", up, 300 * time.Millisecond, nil, 1, "", "no arizukod answers there"},
		{"started too late", up, 3 * time.Second, []string{"--wait", "200ms"}, 1, "", "no daemon answered within 200ms"},
		{"bare number", up, 0, []string{"--wait", "5"}, 2, "", "use 5s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			socket := serveHealth(t, c.health, c.delay)
			fx := cliFixture{socket: socket}
			code, stdout, stderr := fx.run(t, append([]string{"status", "--socket", socket}, c.args...)...)
			if code != c.code || !strings.Contains(stdout, c.out) || !strings.Contains(stderr, c.diag) {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nwant it to hold %q\nstderr:\n%s\nwant it to hold %q", code, c.code, stdout, c.out, stderr, c.diag)
			}
		})
	}

	socket := serveHealth(t, up, 0)
	fx := cliFixture{socket: socket}
	code, stdout, stderr := fx.run(t, "status", "--json", "--socket", socket)
	var got apiwire.HealthReport
	if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || got.Engine.Version != "4.3.1" || got.Queued != 2 {
		t.Errorf("status --json: exit %d, %v, %+v\n%s", code, err, got, stderr)
	}
}
