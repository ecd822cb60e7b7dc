package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/agentimage"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
	"github.com/arizuko/arizukod/runtime/engine"
)

// readmeBlock is one ```sh block of README.md: the heading it is under, its text, and,
// when a readme-test marker comes right before it, the files that run its commands in its
// place and why.
type readmeBlock struct {
	section, text string
	runBy         []string
	why           string
}

// readmeMarkerRE is the marker of a block the test does not paste:
// <!-- readme-test: FILE[, FILE...]: why -->, on the line right before the block.
var readmeMarkerRE = regexp.MustCompile(`^<!-- readme-test: ([^:]+): (.+) -->$`)

// readmeBlocks are the ```sh blocks of readme, in order. A fence without a language or
// with another shell's name is an error: it would be neither pasted nor mapped.
func readmeBlocks(readme string) ([]readmeBlock, error) {
	var (
		blocks            []readmeBlock
		section, previous string
		cur               *readmeBlock
		other             bool
		text              strings.Builder
	)
	sc := bufio.NewScanner(strings.NewReader(readme))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fence := strings.TrimSpace(line)
		switch {
		case cur != nil && fence == "```":
			cur.text = text.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			text.WriteString(line + "\n")
		case other:
			other = fence != "```"
		case fence == "```sh":
			cur = &readmeBlock{section: section}
			text.Reset()
			if m := readmeMarkerRE.FindStringSubmatch(previous); m != nil {
				for _, f := range strings.Split(m[1], ",") {
					cur.runBy = append(cur.runBy, strings.TrimSpace(f))
				}
				cur.why = m[2]
			}
		case slices.Contains([]string{"```", "```bash", "```shell", "```console", "```shell-session"}, fence):
			return nil, fmt.Errorf("README.md:%d: %q: write ```sh for commands, which this test pastes, or name the block's language", n, fence)
		case strings.HasPrefix(fence, "```"):
			other = true // a block of another language (toml, json, ...)
		case strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
		if strings.TrimSpace(line) != "" {
			previous = line
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("README.md: the ```sh block under %q is not closed", cur.section)
	}
	return blocks, nil
}

// readmeEdit is what the test runs in place of a README text, and why: every one must
// still be found in its section's block.
type readmeEdit struct {
	section, old, new, why string
}

// readmeStep is what the prose before a section tells the reader to do, which the test does
// there: the README must still say it.
type readmeStep struct {
	before, says, script string
}

// TestREADMESections pastes every ```sh block of README.md, in order, into one bash on a
// fresh directory laid out as a clone after `make build` (bin/arizukod and bin/agent, this
// test's build of them), with the engine the test host's Podman 4 (CONTAINER_HOST, as after
// hack/demo.sh) and the user service's directories in the test's own: every command must
// succeed. A block the test cannot paste carries a readme-test marker naming the scripts
// that run its commands (which must exist and hold each of them) and why; any other block
// is pasted. What differs from a paste is in the edits and steps below, each checked
// against the README's text. The Claude Code turn runs the real Claude Code image against
// the scripted model upstream.
func TestREADMESections(t *testing.T) {
	e := daemontest.Podman4(t)
	eng, _ := e.Open(t)
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readmeBlocks(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{"arizukod": daemontest.Binary(t), "agent": enginetest.AgentBinary(t)} {
		if err := os.Symlink(src, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	image := "localhost/arizuko-readme-test:" + daemontest.RandHex(6)
	t.Cleanup(func() { eng.(engine.ImageRemover).RemoveImage(context.Background(), image) })
	if claude := enginetest.EnsureClaudeImage(t, e, eng); claude != agentimage.ClaudeRef || !bytes.Contains(readme, []byte(claude)) {
		t.Fatalf("the Claude Code image is %s, README.md's should be %s", claude, agentimage.ClaudeRef)
	}
	fake := fakemodel.Start()
	defer fake.Close()
	key := "sk-ant-test-" + daemontest.RandHex(16)

	// The daemon's arizukod.toml: the model upstream is the scripted one, and the packaged
	// file's commented api_key_file line is there for the README's sed to uncomment.
	packaged, err := os.ReadFile(filepath.Join("..", "..", "packaging", "arizukod.toml"))
	if err != nil {
		t.Fatal(err)
	}
	keyLine := regexp.MustCompile(`(?m)^#api_key_file = .*$`).Find(packaged)
	if keyLine == nil {
		t.Fatal("packaging/arizukod.toml has no #api_key_file line for the README's sed")
	}
	confDir := filepath.Join(dir, "config", "arizuko")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "arizukod.toml"), fmt.Appendf(nil, "[model]\nupstream = %q\n%s\n", fake.URL, keyLine), 0o644); err != nil {
		t.Fatal(err)
	}

	userSocket := filepath.Join(dir, "run", "arizuko", "arizukod.sock")
	edits := []readmeEdit{
		{"*", "localhost/arizuko-agent:latest", image, "a tag of this test's, which leaves the engine's own alone"},
		{"Running one turn by hand", "make build\n", "", "bin/ holds this test's build already"},
		{"Delivery: how a gateway gets what the agents say", "/run/arizuko/arizukod.sock", userSocket,
			"the daemon is a user's (ARIZUKO_MODE=user), whose socket the README names beside root's"},
		{"A real Claude Code turn", "make claude-image ", "true ",
			"the image is enginetest.EnsureClaudeImage's, made by agentimage.BuildClaude as `arizukod image build claude` makes it"},
		{"A real Claude Code turn", "sk-ant-...", key, "a key the scripted upstream checks instead of a real one"},
		{"The model and the web, with network none", "/etc/arizuko", confDir, "the user daemon's configuration directory"},
		{"The model and the web, with network none", "-g arizuko", "-g root", "the package's group, which this host need not have"},
		{"A project the agent commits to", "~/code/app", "$PWD/code/app", "a repository of the test's directory, not of the user's home"},
		{"Watching it and keeping it small", "/run/arizuko/arizukod.sock", userSocket, "the user daemon's socket"},
		{"Watching it and keeping it small", "systemctl reload arizukod", "kill -HUP %1",
			"the daemon is the one started by hand; SIGHUP is what the unit's ExecReload sends"},
		{"Watching it and keeping it small", "/var/backups/arizukod.db", "arizukod.db", "the test's directory"},
	}
	steps := []readmeStep{
		{before: "A project the agent commits to", says: "put a root such as `~/code` in the allowlist",
			script: `mkdir -p code/app "$XDG_CONFIG_HOME/pub/arizuko" && git -C code/app init -q && git -C code/app -c user.name=op -c user.email=op@example.com commit -q --allow-empty -m first` +
				` && echo '{"allowedRoots": [{"path": "'$PWD/code'"}]}' > "$XDG_CONFIG_HOME/pub/arizuko/mount-allowlist.json" && kill -HUP %1 && sleep 2`},
		{before: "A real Claude Code turn", says: "`export PATH=$PWD/bin:$PATH` lets you type `arizukod`", script: "export PATH=$PWD/bin:$PATH"},
		{before: "A real Claude Code turn", says: "stop a daemon started above first: `kill %1`", script: "kill %1; wait"},
	}
	for _, s := range steps {
		if !bytes.Contains(readme, []byte(s.says)) {
			t.Errorf("README.md no longer says %q, which the test does before %q: %s", s.says, s.before, s.script)
		}
	}

	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	used := make([]bool, len(edits))
	pasted := map[string]bool{}
	for _, b := range blocks {
		for _, s := range steps {
			if s.before == b.section && !pasted[b.section] {
				script.WriteString(s.script + "\n")
			}
		}
		if b.runBy != nil {
			checkRunBy(t, b)
			continue
		}
		text := b.text
		for i, ed := range edits {
			if (ed.section == "*" || ed.section == b.section) && strings.Contains(text, ed.old) {
				text, used[i] = strings.ReplaceAll(text, ed.old, ed.new), true
			}
		}
		script.WriteString(text)
		pasted[b.section] = true
	}
	for i, ed := range edits {
		if !used[i] {
			t.Errorf("README.md's %q has no %q any more, which the test replaced with %q (%s)", ed.section, ed.old, ed.new, ed.why)
		}
	}
	for _, s := range steps {
		if !pasted[s.before] {
			t.Errorf("README.md has no pasted section %q for the step %q", s.before, s.script)
		}
	}
	// What the test does after the paste: let the turns end, then stop the daemon.
	script.WriteString(`while bin/arizukod runs --json | grep -q '"state": "\(queued\|running\)"'; do sleep 0.2; done` + "\nkill %1\nwait\n")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = append(daemontestEnv(), "ARIZUKO_MODE=user", "XDG_RUNTIME_DIR="+filepath.Join(dir, "run"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_DATA_HOME="+filepath.Join(dir, "data"),
		"CONTAINER_HOST="+e.URI, "CONTAINER_IMAGE="+image, "USER=operator")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's sections, pasted in order: %v\n--- script\n%s--- output\n%s", err, script.String(), out.String())
	}
	t.Logf("the README's sections, pasted in order, in %s", time.Since(start).Round(time.Second))
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`"result": "hi"`),                            // run --local, and run through the daemon
		regexp.MustCompile(`"folder": "main"`),                          // groups add, inbox route
		regexp.MustCompile(`(?m)^hi$`),                                  // the echo into chat
		regexp.MustCompile(`"acked": 1\b`),                              // the gateway's lease and ack
		regexp.MustCompile(`"result": "echo: What is in /workspace\?"`), // the Claude Code turn
		regexp.MustCompile(`(?m)^api_key_file = ".*/anthropic-api-key"$`),
		regexp.MustCompile(`(?m)^arizukod_turns_total\{`),
		regexp.MustCompile(`(?m)^group main works on .*/code/app, on a new branch at HEAD, arizuko/main`), // groups project set
		regexp.MustCompile(`(?m)^group main no longer works on .*/code/app`),                              // groups project clear
		regexp.MustCompile(`(?m)^model usage of every group, in US dollars`),                              // the cost command
		regexp.MustCompile(`"usd_per_day": 5`),                                                            // the budget, in the group's JSON
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("the output lacks %s:\n%s", want, out.String())
		}
	}
	// The reload (SIGHUP) took the changed [model]: a second [model] table, say, would
	// have been refused with the old configuration kept, and the paste gone on.
	if !journalSays(filepath.Join(confDir, "arizukod.toml"), "configuration reloaded") {
		t.Errorf("no \"configuration reloaded\" in journalctl -t arizukod CONFIG=%s", filepath.Join(confDir, "arizukod.toml"))
	}
	if fi, err := os.Stat(filepath.Join(dir, "arizukod.db")); err != nil || fi.Size() == 0 {
		t.Errorf("arizukod backup wrote no copy of the store: %v", err)
	}
	if reqs := fake.Requests(); len(reqs) == 0 || reqs[len(reqs)-1].Header.Get("X-Api-Key") != key {
		t.Errorf("the Claude Code turn did not reach the model upstream with the daemon's key (%d requests)", len(reqs))
	}
}

// journalSays says whether the daemon of config logged message to the journal, waiting a
// little for the journal to have it.
func journalSays(config, message string) bool {
	for range 50 {
		out, _ := exec.Command("journalctl", "--no-pager", "-t", "arizukod", "CONFIG="+config, "-o", "cat").Output()
		if bytes.Contains(out, []byte(message)) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// checkRunBy checks a block the test does not paste: each of its commands is run by one
// of the files its marker names (the command's name and its subcommand words, in order,
// on one line of the file).
func checkRunBy(t *testing.T, b readmeBlock) {
	t.Helper()
	var files []string
	for _, name := range b.runBy {
		data, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Errorf("README.md's block under %q is run by %s, it says (%s): %v", b.section, name, b.why, err)
			continue
		}
		files = append(files, strings.ReplaceAll(string(data), "\\\n", " "))
	}
	for _, c := range blockCommands(b.text) {
		found := false
		for _, f := range files {
			for _, line := range strings.Split(f, "\n") {
				if hasInOrder(readmeWordRE.FindAllString(line, -1), c) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("README.md's block under %q says %s runs it (%s), but none runs %q", b.section, strings.Join(b.runBy, ", "), b.why, strings.Join(c, " "))
		}
	}
}

var (
	readmeWordRE = regexp.MustCompile(`[A-Za-z0-9_./:%-]+`)
	subcommandRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	separatorRE  = regexp.MustCompile(`&&|\|\||;|\|`)
	assignmentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// blockCommands are the commands of a shell block, each as its program and the subcommand
// words after it (up to its first flag or argument of another shape), comments and
// leading variable assignments left out.
func blockCommands(text string) [][]string {
	text = strings.ReplaceAll(text, "\\\n", " ")
	var cmds [][]string
	for _, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, "#"); i >= 0 && (i == 0 || line[i-1] == ' ') {
			line = line[:i]
		}
		for _, part := range separatorRE.Split(line, -1) {
			words := strings.Fields(part)
			for len(words) > 0 && assignmentRE.MatchString(words[0]) {
				words = words[1:]
			}
			if len(words) == 0 {
				continue
			}
			c := words[:1]
			for _, w := range words[1:] {
				if !subcommandRE.MatchString(w) {
					break
				}
				c = append(c, w)
			}
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// hasInOrder says whether want's words are among words, in order.
func hasInOrder(words, want []string) bool {
	i := 0
	for _, w := range words {
		if i < len(want) && w == want[i] {
			i++
		}
	}
	return i == len(want)
}

// daemontestEnv is this process's environment without what would point the commands at
// another daemon, engine, image or data directory than the test's.
func daemontestEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "LISTEN_"), strings.HasPrefix(name, "XDG_"), name == "NOTIFY_SOCKET", name == "INVOCATION_ID",
			name == "DATA_DIR", name == "CONTAINER_IMAGE", name == "CONTAINER_HOST", name == "DOCKER_HOST", name == "ARIZUKO_MODE",
			name == "ARIZUKO_ENGINE", name == "ARIZUKO_ENGINE_SOCKET", name == "RUNED_RUN_TIMEOUT", name == "USER",
			name == "ANTHROPIC_API_KEY", name == "CLAUDE_CODE_OAUTH_TOKEN":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// TestReadmeBlocks: how the README test reads blocks and markers, and what it refuses.
func TestReadmeBlocks(t *testing.T) {
	for _, tc := range []struct {
		name, readme string
		want         []readmeBlock
		err          string
	}{
		{name: "pasted and mapped",
			readme: "# A\n\n```sh\na && b\n```\n## B\n<!-- readme-test: x.sh, y: why: because -->\n\n```sh\nc\n```\n```toml\nk = 1\n```\n",
			want:   []readmeBlock{{section: "A", text: "a && b\n"}, {section: "B", text: "c\n", runBy: []string{"x.sh", "y"}, why: "why: because"}}},
		{name: "indented", readme: "## A\n  ```sh\n  a\n  ```\n", want: []readmeBlock{{section: "A", text: "  a\n"}}},
		{name: "bash fence", readme: "## A\n```bash\na\n```\n", err: `README.md:2: "` + "```bash" + `"`},
		{name: "bare fence", readme: "## A\n```\na\n```\n", err: `README.md:2: "` + "```" + `"`},
		{name: "unclosed", readme: "## A\n```sh\na\n", err: `under "A" is not closed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readmeBlocks(tc.readme)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestBlockCommands: the commands of a mapped block that its scripts must run.
func TestBlockCommands(t *testing.T) {
	got := blockCommands("make deb && apt-get install ./x.deb   # or: make rpm\nA=1 B=2 arizukod image import-static --tag t \\\n  f\nsystemctl enable --now x; journalctl -u arizukod | less\n")
	want := [][]string{{"make", "deb"}, {"apt-get", "install"}, {"arizukod", "image", "import-static"}, {"systemctl", "enable"}, {"journalctl"}, {"less"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("blockCommands: %q, want %q", got, want)
	}
	line := readmeWordRE.FindAllString(`out=$(CT_TIMEOUT=1 ct systemctl --user enable --now a.socket) && bash -c '. env.sh && make deb'`, -1)
	for _, c := range [][]string{{"systemctl", "enable"}, {"make", "deb"}} {
		if !hasInOrder(line, c) {
			t.Errorf("%q is not found in %q", c, line)
		}
	}
	if hasInOrder(line, []string{"enable", "systemctl"}) {
		t.Error("words out of order were found")
	}
}
