package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/store"
)

// upkeepEnv is a data dir with a store, a configuration naming it, and a socket path where
// no daemon listens.
func upkeepEnv(t *testing.T, withStore bool) (cfg, socket, dir string) {
	t.Helper()
	t.Setenv("ARIZUKO_MODE", "system")
	dir = t.TempDir()
	data := filepath.Join(dir, "data")
	if withStore {
		os.MkdirAll(data, 0o700)
		st, err := store.Open(context.Background(), filepath.Join(data, "arizukod.db"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AppendOutbox(context.Background(), store.OutboxItem{Folder: "main", Kind: store.OutboxMessage, Content: "kept"}); err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	cfg = filepath.Join(dir, "arizukod.toml")
	toml := "data_dir = \"" + data + "\"\nenv_file = \"\"\n[retention]\noutbox_max_count = 5\n"
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, filepath.Join(dir, "none.sock"), dir
}

func TestUpkeepUsage(t *testing.T) {
	for _, tc := range []struct {
		run  func(context.Context, []string, *bytes.Buffer) error
		args []string
	}{
		{func(ctx context.Context, a []string, w *bytes.Buffer) error { return runBackup(ctx, a, w) }, nil},
		{func(ctx context.Context, a []string, w *bytes.Buffer) error { return runBackup(ctx, a, w) }, []string{"--json"}},
		{func(ctx context.Context, a []string, w *bytes.Buffer) error { return runBackup(ctx, a, w) }, []string{"a.db", "b.db"}},
		{func(ctx context.Context, a []string, w *bytes.Buffer) error { return runBackup(ctx, a, w) }, []string{"--bogus", "a.db"}},
		{func(ctx context.Context, a []string, w *bytes.Buffer) error { return runPrune(ctx, a, w) }, []string{"now"}},
		{func(ctx context.Context, a []string, w *bytes.Buffer) error { return runPrune(ctx, a, w) }, []string{"--older-than", "1d"}},
	} {
		var out bytes.Buffer
		if err := tc.run(context.Background(), tc.args, &out); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", tc.args, err)
		}
	}
}

// Without a daemon, prune and backup work on the configuration's store directly, and never
// create one where there is none.
func TestUpkeepDirect(t *testing.T) {
	ctx := context.Background()
	cfg, socket, dir := upkeepEnv(t, true)
	var out bytes.Buffer
	if err := runPrune(ctx, []string{"--json", "--dry-run", "--socket", socket, "--config", cfg}, &out); err != nil {
		t.Fatal(err)
	}
	var rep apiwire.PruneReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || !rep.DryRun {
		t.Fatalf("prune --json: %q %v", out.String(), err)
	}
	out.Reset()
	if err := runPrune(ctx, []string{"--socket", socket, "--config", cfg}, &out); err != nil || !strings.HasPrefix(out.String(), "pruned 0 runs, 0 inbox messages, 0 outbox items, 0 run logs") {
		t.Fatalf("prune: %q %v", out.String(), err)
	}

	file := filepath.Join(dir, "copy.db")
	out.Reset()
	if err := runBackup(ctx, []string{file, "--json", "--socket", socket, "--config", cfg}, &out); err != nil {
		t.Fatal(err)
	}
	var res backupResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || !res.Direct || res.File != file || res.Bytes == 0 {
		t.Fatalf("backup --json: %q %v", out.String(), err)
	}
	st, err := store.Open(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	items, err := st.ListOutbox(ctx, "main", 0, 0)
	st.Close()
	if err != nil || len(items) != 1 || items[0].Content != "kept" {
		t.Errorf("the copy's outbox: %+v %v", items, err)
	}
	// Again over the same file: replaced whole, nothing left beside it.
	if err := runBackup(ctx, []string{"--socket", socket, "--config", cfg, file}, &out); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".copy.db.tmp-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if err := runBackup(ctx, []string{"--socket", socket, "--config", cfg, dir}, &out); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a backup to a directory: %v", err)
	}
}

func TestUpkeepNoStore(t *testing.T) {
	cfg, socket, dir := upkeepEnv(t, false)
	var out bytes.Buffer
	err := runPrune(context.Background(), []string{"--socket", socket, "--config", cfg}, &out)
	if err == nil || !strings.Contains(err.Error(), "no store at "+filepath.Join(dir, "data", "arizukod.db")) || !strings.Contains(err.Error(), "--config") {
		t.Errorf("prune without a store: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("a data dir was created: %v", err)
	}
}
