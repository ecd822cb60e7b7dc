package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/agentimage"
	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/internal/fakeengine"
	"github.com/arizuko/arizukod/sidecar"
)

// daemonHealthOf is a daemon whose /health says h.
type daemonHealthOf apiwire.HealthReport

func (h daemonHealthOf) Health(context.Context) apiwire.HealthReport { return apiwire.HealthReport(h) }

// TestDoctorAsksTheDaemon: with a daemon on the socket, doctor's model check judges what
// the daemon runs with, not doctor's own environment, and says so; without one it judges
// its environment.
func TestDoctorAsksTheDaemon(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "arizukod.toml")
	writeFile(t, empty, "")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-in-doctors-env")
	noCred := daemonHealthOf{Status: "ok", Version: "v-test", Model: apiwire.ModelHealth{Upstream: "https://model.example", Error: "no model credential: set [model] api_key_file"}}
	withCred := daemonHealthOf{Status: "ok", Version: "v-test", Model: apiwire.ModelHealth{Upstream: "https://model.example", Credential: "API key from $ANTHROPIC_API_KEY"}}
	for _, tc := range []struct {
		name   string
		health api.Health
		code   int
		want   []string
	}{
		{"daemon without a credential", noCred, 1, []string{"arizukod v-test answers on ", "FAIL  model     (daemon) the daemon cannot reach a model (upstream https://model.example): no model credential"}},
		{"daemon with a credential", withCred, 0, []string{"ok    model     (daemon) API key from $ANTHROPIC_API_KEY, upstream https://model.example"}},
		{"no daemon", nil, 0, []string{"ok    model     API key from $ANTHROPIC_API_KEY, upstream https://api.anthropic.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socket := filepath.Join(t.TempDir(), "none.sock")
			if tc.health != nil {
				socket, _ = cliDaemon(t, t.TempDir(), tc.health)
			}
			stdout, stderr, code := runCLI(t, []string{"doctor", "--check", "model", "--config", empty, "--socket", socket})
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("doctor printed\n%s\nwant %q", stdout, w)
				}
			}
			if tc.health == nil && strings.Contains(stdout, "(daemon)") {
				t.Errorf("without a daemon doctor marks checks as the daemon's:\n%s", stdout)
			}
		})
	}
}

// TestDoctorSidecarNames: the sidecars line names the units and containers of the daemon
// of this configuration and data directory, whose instance they carry: derived from
// --data-dir, or the configuration's instance.
func TestDoctorSidecarNames(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	empty := filepath.Join(dir, "empty.toml")
	writeFile(t, empty, "")
	named := filepath.Join(dir, "named.toml")
	writeFile(t, named, "instance = \"prod-1\"\n")
	cfg, err := config.Load(serviceMode(), empty, func(k string) string {
		if k == "DATA_DIR" {
			return data
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		config, instance string
	}{{empty, cfg.Instance}, {named, "prod-1"}} {
		stdout, stderr, _ := runCLI(t, []string{"doctor", "--check", "sidecars", "--config", tc.config, "--data-dir", data, "--socket", filepath.Join(dir, "none.sock")})
		if want := "This daemon's sidecars are named " + sidecar.NamePrefix(tc.instance) + "FOLDER-NAME"; !strings.Contains(stdout, want) {
			t.Errorf("%s: doctor printed\n%s%s\nwant %q", tc.instance, stdout, stderr, want)
		}
	}
}

// TestDoctorImage: the image line names each image once, and its fix names the Claude Code
// image when that is on the engine rather than telling to build it.
func TestDoctorImage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		image   string
		images  []string
		want    string // the detail, or the error with "error: " before it
		wantFix string
	}{
		{"claude configured and there", agentimage.ClaudeRef, []string{agentimage.ClaudeRef},
			agentimage.ClaudeRef + " (Claude Code) is on the engine", "arizukod image build claude"},
		{"claude configured, not built", agentimage.ClaudeRef, nil,
			"error: the agent image " + agentimage.ClaudeRef + " (Claude Code) is not on the engine (runs never pull)", "arizukod image build claude"},
		{"another there, claude too", "localhost/agent:1", []string{"localhost/agent:1", agentimage.ClaudeRef},
			"localhost/agent:1 is on the engine; " + agentimage.ClaudeRef + " (Claude Code) is there", `image = "` + agentimage.ClaudeRef + `" in arizukod.toml (it is on the engine)`},
		{"another missing, claude there", "localhost/agent:1", []string{agentimage.ClaudeRef},
			"error: the agent image localhost/agent:1 is not on the engine (runs never pull); " + agentimage.ClaudeRef + " (Claude Code) is there", `image = "` + agentimage.ClaudeRef + `" in arizukod.toml (it is on the engine)`},
		{"nothing there", "localhost/agent:1", nil,
			"error: the agent image localhost/agent:1 is not on the engine (runs never pull); " + agentimage.ClaudeRef + " (Claude Code) is not built", "arizukod image build claude   (Claude Code; then image = \"" + agentimage.ClaudeRef + "\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "arizukod.toml")
			writeFile(t, path, "image = \""+tc.image+"\"\n")
			eng := fakeengine.New(fakeengine.Script{})
			eng.SetImages(tc.images...)
			o := &doctorOpts{opened: true, eng: eng, configPath: path, host: host{mode: config.ModeSystem}}
			detail, err := checkImage(context.Background(), o)
			got := detail
			if err != nil {
				got = "error: " + err.Error()
			}
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if fix := imageFix(o); !strings.Contains(fix, tc.wantFix) {
				t.Errorf("fix %q, want it to say %q", fix, tc.wantFix)
			}
		})
	}
}
