package daemon_test

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/logging"
)

// TestAgentCannotPlantCode: in one turn the example agent tries to leave code for the next
// turn and for the operator's git (`plant config`): hooks in Claude Code's user and project
// settings files, a skill, a command and a subagent at both levels, an .mcp.json, an MCP
// server in ~/.claude.json, a pre-commit hook of the group folder's repository and, in its
// configuration, a hooks path and an fsmonitor; it writes, unlinks and renames each in
// place, then moves the directories holding them aside and writes fresh ones. Writing in
// place fails (EROFS) and so does replacing (EBUSY); what it left elsewhere is gone before
// the next turn, which finds only the operator's copy (`plant show`), with each removal in
// the daemon's log naming its path; the operator's git runs no hook of the agent's. The
// same holds in gVisor's kernel, on the engines that have it.
func TestAgentCannotPlantCode(t *testing.T) {
	daemontest.JournalOn(t)
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			d := daemontest.New(t, daemontest.Config{Engine: e})
			d.Start(t)
			d.AddGroup(t, "main")
			testAgentCannotPlantCode(t, e, d)
		})
	}
	for _, e := range enginetest.GVisor(t) {
		t.Run(e.Name+"-runsc", func(t *testing.T) {
			d := daemontest.New(t, daemontest.Config{Engine: e, TOML: "[limits]\nallowed_runtimes = [\"runsc\"]\n"})
			d.Start(t)
			d.PutGroup(t, "main", `{"runtime": "runsc"}`)
			testAgentCannotPlantCode(t, e, d)
		})
	}
}

func testAgentCannotPlantCode(t *testing.T, e enginetest.Engine, d *daemontest.Daemon) {
	if r := d.Turn(t, "main", "reply ready"); r.Result != "ready" {
		t.Fatalf("a first turn: %+v", r)
	}
	group := filepath.Join(d.DataDir, "groups", "main")
	gitIn(t, group, "init", "-q")

	planted := d.Turn(t, "main", "plant config /workspace/pwned 0s")
	if planted.Status != "ok" {
		t.Fatalf("plant config: %s %q %q", planted.Status, planted.Result, planted.Error)
	}
	t.Logf("%s: what the agent got:\n%s", e.Name, planted.Result)
	for _, line := range strings.Split(planted.Result, "\n") {
		what, got, _ := strings.Cut(line, ": ")
		var want []string
		switch verb, _, _ := strings.Cut(what, " "); verb {
		case "write", "mkdir":
			// A skill's file cannot be written in the directory that could not be made.
			want = []string{"EROFS", "ENOENT"}
		case "unlink", "rename", "rmdir":
			want = []string{"EBUSY"}
		case "add", "move":
			// ~/.claude.json is Claude Code's state, and a directory that holds
			// mountpoints may be moved: the next turn undoes both.
			continue
		}
		if strings.HasPrefix(what, "write a new ") {
			continue
		}
		if !slices.Contains(want, got) {
			t.Errorf("%s: %s, want %v", what, got, want)
		}
	}

	shown := d.Turn(t, "main", "plant show - 0s")
	t.Logf("%s: what the next turn finds:\n%s", e.Name, shown.Result)
	if shown.Status != "ok" || strings.Contains(shown.Result, "touch") || strings.Contains(shown.Result, "planted") {
		t.Errorf("the next turn finds what the agent planted: %s %q", shown.Status, shown.Result)
	}
	for _, want := range []string{
		`/workspace/.claude/settings.json: "{}\n" ok`,
		`/workspace/.mcp.json: "{\"mcpServers\": {}}\n" ok`,
		"/workspace/.claude/skills: [] ok", "/workspace/.git/hooks: [] ok",
		"/root/.claude.json mcpServers: [arizuko] ok",
	} {
		if !strings.Contains(shown.Result, want) {
			t.Errorf("the next turn's view lacks %q", want)
		}
	}
	if _, err := os.Lstat(filepath.Join(group, "pwned")); err == nil {
		t.Errorf("a planted piece of code ran: %s exists", filepath.Join(group, "pwned"))
	}

	// The operator's git in the group folder runs no hook of the agent's.
	gitIn(t, group, "-c", "user.name=op", "-c", "user.email=op@example.org", "commit", "-q", "--allow-empty", "-m", "operator")
	for _, marker := range []string{"pwned-by-git-hook", "pwned-by-fsmonitor"} {
		if _, err := os.Lstat(filepath.Join(group, marker)); err == nil {
			t.Errorf("the operator's git commit ran the agent's code: %s exists", marker)
		}
	}
	// Nothing of the agent's reached the operator's copy.
	filepath.WalkDir(filepath.Join(d.DataDir, "claude"), func(p string, de fs.DirEntry, err error) error {
		if err == nil && !de.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "touch") {
				t.Errorf("the operator's copy %s holds the agent's code: %s", p, b)
			}
		}
		return nil
	})
	// Each refusal is in the daemon's journal with the path.
	entries, err := daemontest.Journal(fmt.Sprintf("_PID=%d", d.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	for _, e := range entries {
		if strings.Contains(e["MESSAGE"], "refused") || strings.Contains(e["MESSAGE"], "bound read-only") || strings.Contains(e["MESSAGE"], "git configuration") {
			logged = append(logged, e["MESSAGE"]+" "+e[logging.FieldName("path")])
		}
	}
	t.Logf("%s: logged:\n%s", e.Name, strings.Join(logged, "\n"))
	for _, want := range []string{
		"session: refused an MCP entry the agent planted in .claude.json: removed " + filepath.Join(d.DataDir, "sessions", "main", ".claude.json"),
		"emptied what the agent wrote where the operator's copy is bound read-only " + filepath.Join(d.DataDir, "sessions", "main", ".claude", "settings.json"),
		"emptied what the agent wrote where the operator's copy is bound read-only " + filepath.Join(group, ".claude", "settings.json"),
		"removed what the agent left where the operator's copy is bound read-only " + filepath.Join(group, ".claude", "skills"),
		"removed git configuration keys that could run a program " + filepath.Join(group, ".git", "config"),
	} {
		if !slices.Contains(logged, want) {
			t.Errorf("the daemon's journal does not say %q", want)
		}
	}
}

// gitIn runs git with args in dir, with no configuration of the user's or the system's.
func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}
