package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/store"
)

// configHome makes the commands of this test read no configuration but the one they are
// given, as a user.
func configHome(t *testing.T) {
	t.Helper()
	for k, v := range map[string]string{"ARIZUKO_MODE": "user", "XDG_CONFIG_HOME": t.TempDir(), "DATA_DIR": "",
		"CONTAINER_IMAGE": "", "RUNED_RUN_TIMEOUT": "", "LISTEN_ADDR": ""} {
		t.Setenv(k, v)
	}
}

// TestPromptHonoursConfig: `arizukod prompt --config FILE` prints the prompt a turn of
// the daemon of FILE gets: as many diary entries as its [memory] diary_max, and "today"
// in its timezone (of two zones 26 hours apart, the one whose date is not this machine's).
func TestPromptHonoursConfig(t *testing.T) {
	configHome(t)
	data := t.TempDir()
	now := time.Now()
	zone := "Etc/GMT-14" // UTC+14
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	if now.In(loc).Format(time.DateOnly) == now.Format(time.DateOnly) {
		zone = "Etc/GMT+12" // UTC-12
		if loc, err = time.LoadLocation(zone); err != nil {
			t.Fatal(err)
		}
	}
	today := now.In(loc)
	for i := range 4 {
		day := today.AddDate(0, 0, -i).Format(time.DateOnly)
		writeFile(t, filepath.Join(data, "groups", "main", "diary", day+".md"), "---\nsummary: day "+day+"\n---\n")
	}
	cfg := filepath.Join(t.TempDir(), "arizukod.toml")
	writeFile(t, cfg, fmt.Sprintf("data_dir = %q\ntimezone = %q\n[memory]\ndiary_max = 2\n", data, zone))
	var out, errOut bytes.Buffer
	if err := runPrompt(context.Background(), []string{"--config", cfg, "--folder", "main"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if n := strings.Count(out.String(), "<entry "); n != 2 {
		t.Errorf("%d diary entries, want diary_max = 2:\n%s", n, out.String())
	}
	want := fmt.Sprintf(`<entry age="today" date="%s">`, today.Format(time.DateOnly))
	if !strings.Contains(out.String(), want) {
		t.Errorf("no %s (today in %s):\n%s", want, zone, out.String())
	}
}

// mountFixture is a configuration whose allowlist (not at the default path) allows a
// directory that group main mounts.
type mountFixture struct {
	config, data, extra string
}

func newMountFixture(t *testing.T) mountFixture {
	t.Helper()
	configHome(t)
	fx := mountFixture{config: filepath.Join(t.TempDir(), "arizukod.toml"), data: t.TempDir(), extra: t.TempDir()}
	allow := filepath.Join(t.TempDir(), "allow.json")
	writeFile(t, allow, fmt.Sprintf(`{"allowedRoots":[{"path":%q,"allowReadWrite":false}]}`, fx.extra))
	if err := os.Chmod(allow, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(fx.extra, "note.txt"), "mounted by the file's allowlist\n")
	writeFile(t, fx.config, fmt.Sprintf("data_dir = %q\nallowlist = %q\nimage = %q\n", fx.data, allow, "localhost/arizuko-agent:assembly"))
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(fx.data, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cc, _ := json.Marshal(map[string]any{"additional_mounts": []map[string]any{{"host_path": fx.extra, "container_path": "notes", "readonly": true}}})
	if _, err := st.UpsertGroup(ctx, store.Group{Folder: "main", ContainerConfig: cc}); err != nil {
		t.Fatal(err)
	}
	return fx
}

// TestMountsHonoursFileAllowlist: `arizukod mounts --config FILE` judges the group's
// mounts by the allowlist FILE names, as the daemon of FILE does.
func TestMountsHonoursFileAllowlist(t *testing.T) {
	fx := newMountFixture(t)
	var stdout bytes.Buffer
	if err := runMounts(context.Background(), []string{"--config", fx.config, "--folder", "main"}, &stdout); err != nil {
		t.Errorf("mounts: %v", err)
	}
	if out := stdout.String(); !strings.Contains(out, fx.extra) || !strings.Contains(out, "/workspace/extra/notes") || strings.Contains(out, "REJECTED") {
		t.Errorf("the mount the file's allowlist allows is not in the table:\n%s", out)
	}
}

// TestQuadletHonoursFileAllowlist: `arizukod quadlet --config FILE` writes the units of
// the turn the daemon of FILE would run, with the mount its allowlist allows.
func TestQuadletHonoursFileAllowlist(t *testing.T) {
	fx := newMountFixture(t)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := runQuadlet(context.Background(), []string{"--config", fx.config, "--folder", "main", "-o", out}, &stdout, &stderr); err != nil {
		t.Fatalf("quadlet: %v\n%s", err, stderr.String())
	}
	unit, err := os.ReadFile(filepath.Join(out, "arizuko-main-quadlet.container"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Mount=type=bind,source=" + fx.extra + ",destination=/workspace/extra/notes,ro"; !strings.Contains(string(unit), want) {
		t.Errorf("no %s in the agent's unit:\n%s", want, unit)
	}
}
