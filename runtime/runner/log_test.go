package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/fakeengine"
	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
)

// lockedBuffer is a log destination the turn's goroutines may write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Split(bytes.TrimSpace(l.b.Bytes()), []byte("\n"))
}

// TestTurnLinesCarryTheRun: every line the runner logs during a turn carries the turn's
// run and folder as the journal fields, so `journalctl ARIZUKO_RUN_ID=...` finds them:
// here the engine goes away once the container is created, which cannot be removed then.
func TestTurnLinesCarryTheRun(t *testing.T) {
	layout, err := groupfolder.NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := layout.Ensure("main", os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	e := fakeengine.New(fakeengine.Script{Stdout: answer(contract.StatusOK, "done")})
	r, err := runner.New(runner.Config{Engine: e, Info: engine.Info{Name: "fake"}, Layout: layout, Image: "img", Instance: "test",
		Timeout: time.Hour, StopGrace: time.Millisecond, Logger: slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tu := turnOf("r-logged")
	tu.OnCreated = func(string, string) { e.SetDown(true) }
	res, err := r.Run(context.Background(), tu)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failure != runner.FailEngine {
		t.Fatalf("failure %q (%s), want the engine's", res.Failure, res.Output.Error)
	}
	lines := out.lines()
	if len(lines) == 0 || len(lines[0]) == 0 {
		t.Fatal("nothing logged, want the failed removal")
	}
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if rec[logging.FieldRunID] != "r-logged" || rec[logging.FieldFolder] != "main" {
			t.Errorf("a line of the turn without its %s and %s: %s", logging.FieldRunID, logging.FieldFolder, line)
		}
	}
	t.Logf("%d lines, each with the run and folder", len(lines))
	e.SetDown(false)
}
