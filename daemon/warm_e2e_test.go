package daemon_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/agentimage"
	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
)

// firstRequests records when each model request arrived, for the time to first request.
type firstRequests struct {
	mu    sync.Mutex
	times []time.Time
}

func (f *firstRequests) note() {
	f.mu.Lock()
	f.times = append(f.times, time.Now())
	f.mu.Unlock()
}

// after is the first request at or after t.
func (f *firstRequests) after(t time.Time) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, at := range f.times {
		if !at.Before(t) {
			return at
		}
	}
	return time.Time{}
}

// warmDaemon is a daemon on Podman 4.3 running Claude Code (its own tag of the image, which
// a test may replace) with warm agents, against a scripted model.
func warmDaemon(t *testing.T) (*daemontest.Daemon, *fakemodel.Server, *firstRequests, string) {
	e := daemontest.Podman4(t)
	eng, _ := e.Open(t)
	claude := enginetest.EnsureClaudeImage(t, e, eng)
	image := "localhost/arizuko-claude:warm-" + daemontest.RandHex(6)
	podmanCLI(t, e, "tag", claude, image)
	t.Cleanup(func() { podmanCLIQuiet(e, "rmi", "-f", image) })
	fake := fakemodel.Start()
	t.Cleanup(fake.Close)
	reqs := &firstRequests{}
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		reqs.note()
		if res, ok := r.ToolResult(); ok {
			return fakemodel.Reply{Text: "tool said: " + res}
		}
		switch text := r.LastUserText(); {
		case strings.HasSuffix(text, "please use send_reply"):
			return fakemodel.Reply{ToolUse: &fakemodel.ToolUse{Name: "mcp__arizuko__send_reply",
				Input: map[string]any{"text": "hello from a warm agent", "chat_jid": "tg:42"}}}
		default:
			return fakemodel.Reply{Text: "echo: " + text}
		}
	}
	d := daemontest.New(t, daemontest.Config{Engine: e, Claude: true, Image: image, RunTimeout: "3m",
		EnvFile: "ANTHROPIC_API_KEY=sk-ant-test-" + daemontest.RandHex(16) + "\n",
		TOML:    fmt.Sprintf("warm_agents = 2\nwarm_min_available = \"0\"\n[model]\nupstream = %q\n", fake.URL)})
	return d, fake, reqs, image
}

// podmanCLI runs the podman command line against the test host's engine e.
func podmanCLI(t *testing.T, e enginetest.Engine, args ...string) string {
	t.Helper()
	out, err := exec.Command("podman", append([]string{"--url", e.URI}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func podmanCLIQuiet(e enginetest.Engine, args ...string) {
	exec.Command("podman", append([]string{"--url", e.URI}, args...)...).Run()
}

// waitWarm waits for folder's warm agent other than not, and returns its container.
func waitWarm(t *testing.T, d *daemontest.Daemon, folder, not string) apiwire.WarmAgent {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var out apiwire.WarmAgents
		if err := d.Client.Do(context.Background(), http.MethodGet, "/v1/warm", nil, &out); err != nil {
			t.Fatal(err)
		}
		for _, w := range out.Agents {
			if w.Folder == folder && w.Container != not {
				return w
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no warm agent for %s after 2 minutes (not %q); the daemon said:\n%s", folder, not, d.Output())
	return apiwire.WarmAgent{}
}

// warmProbe is run in a warm agent's container before its turn: what it reaches.
const warmProbe = `
use IO::Socket::UNIX;
my $d = "/var/run/pub/arizuko";
sub conn { IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => "$d/$_[0]") }
my $m = conn("model.sock");
if ($m) {
  print $m "POST /v1/messages HTTP/1.0\r\nx-api-key: $ENV{ARIZUKO_MODEL_TOKEN}\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
  my $l = <$m>; $l =~ s/\s+$//; print "model: $l\n";
} else { print "model: unreachable\n"; }
print "egress: ", (conn("egress.sock") ? "reachable" : "unreachable"), "\n";
opendir(my $sd, "$d/sidecars"); my @s = grep { !/^\./ } readdir($sd); print "sidecars: ", scalar(@s), "\n";
my $r = conn("router.sock") or do { print "router: unreachable\n"; exit };
print $r '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}' . "\n";
my $l = <$r>; print "initialize: ", ($l =~ /"result"/ ? "answered" : "not answered"), "\n";
print $r '{"jsonrpc":"2.0","method":"notifications/initialized"}' . "\n";
print $r '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' . "\n";
$l = <$r>; print "tools/list: ", ($l =~ /send_reply/ ? "listed" : "empty"), "\n";
print $r '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"send_reply","arguments":{"text":"sneaky","chat_jid":"tg:1"}}}' . "\n";
$l = <$r>; print "tools/call: ", ($l =~ /"isError":true/ && $l =~ /refused/ ? "refused" : "ANSWERED $l"), "\n";
`

// TestWarmClaudeAgent follows a folder's warm agent through the daemon on Podman 4.3 with
// the real Claude Code: made after a turn (its container running, Claude Code waiting with
// the folder's session, prompt and MCP servers), reaching nothing before its turn (probed
// from inside its container: the model gateway is not there to take its token, no egress
// proxy, no sidecar, the MCP server answers initialize and tools/list and refuses
// tools/call), then taken by the folder's next turn, which resumes the session, calls
// arizuko's MCP tool through the connection made before the turn, and is faster than the
// cold first turn; its memory is reported by `GET /v1/warm` and the metrics. A folder with
// sidecars gets a prepared container that is not started, not a warm agent.
func TestWarmClaudeAgent(t *testing.T) {
	d, fake, reqs, _ := warmDaemon(t)
	d.Start(t)
	d.AddGroup(t, "main")
	turn := func(msg string) (apiwire.Run, time.Duration, time.Duration) {
		t.Helper()
		start := time.Now()
		r := d.Wait(t, d.Submit(t, "main", msg).ID, 3*time.Minute)
		return r, time.Since(start), reqs.after(start).Sub(start)
	}

	cold, coldTook, coldFirst := turn("hello there")
	if cold.Status != "ok" || cold.Result != "echo: hello there" || cold.NewSessionID == "" {
		t.Fatalf("cold turn: %s %s %q %q", cold.State, cold.Status, cold.Result, cold.Error)
	}
	w := waitWarm(t, d, "main", "")
	st, err := d.Eng.Inspect(context.Background(), w.Container)
	if err != nil || !st.Running {
		t.Fatalf("the warm agent %s: %+v, %v; want running", w.Container, st, err)
	}
	if w.PSSBytes <= 0 {
		t.Errorf("the warm agent's memory was not measured: %+v", w)
	}
	t.Logf("warm agent %s: PSS %.1f MB", w.Container, float64(w.PSSBytes)/(1<<20))

	// From inside the warm agent's container, before its turn.
	probe := podmanCLI(t, d.Engine, "exec", w.Container, "perl", "-e", warmProbe)
	for _, want := range []string{"model: unreachable", "egress: unreachable", "sidecars: 0",
		"initialize: answered", "tools/list: listed", "tools/call: refused"} {
		if !strings.Contains(probe, want+"\n") {
			t.Errorf("the warm agent before its turn: want %q, the probe said:\n%s", want, probe)
		}
	}

	warm, warmTook, warmFirst := turn("and again")
	if warm.Container != w.Container {
		t.Fatalf("the next turn ran in %s, not in the warm agent %s", warm.Container, w.Container)
	}
	if warm.Status != "ok" || warm.Result != "echo: and again" {
		t.Fatalf("warm turn: %s %s %q %q", warm.State, warm.Status, warm.Result, warm.Error)
	}
	t.Logf("cold turn %s (first model request after %s), warm turn %s (first model request after %s)",
		coldTook.Round(time.Millisecond), coldFirst.Round(time.Millisecond), warmTook.Round(time.Millisecond), warmFirst.Round(time.Millisecond))
	for _, r := range []apiwire.Run{cold, warm} {
		if got := d.GetRun(t, r.ID); got.Phases != nil {
			p := got.Phases
			ms := func(v *int64) int64 {
				if v == nil {
					return -1
				}
				return *v
			}
			t.Logf("%s phases (ms): queue %d, prepare %d, create %d, start %d, run %d", r.Container, p.QueueWaitMs, ms(p.PrepareMs), ms(p.CreateMs), ms(p.StartMs), ms(p.RunMs))
		}
	}
	if warmTook >= coldTook {
		t.Errorf("the warm turn took %s, the cold one %s", warmTook, coldTook)
	}

	// The MCP connection Claude Code made before the turn serves the turn.
	w2 := waitWarm(t, d, "main", w.Container)
	tool, _, _ := turn("please use send_reply")
	if tool.Container != w2.Container || tool.Status != "ok" || !strings.Contains(tool.Result, "tool said:") {
		t.Fatalf("send_reply in the warm agent %s: ran in %s, %s %q %q", w2.Container, tool.Container, tool.Status, tool.Result, tool.Error)
	}
	items, err := d.OpenStore(t).ListOutbox(context.Background(), "main", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, it := range items {
		texts = append(texts, it.Content)
	}
	if all := strings.Join(texts, "|"); !strings.Contains(all, "hello from a warm agent") || strings.Contains(all, "sneaky") {
		t.Errorf("the outbox holds %q: want the turn's send_reply and not the probe's", texts)
	}

	waitWarm(t, d, "main", w2.Container)
	cli, err := exec.Command(d.Bin, "runs", "warm", "--json", "--socket", d.Socket).Output()
	if err != nil || !strings.Contains(string(cli), `"folder": "main"`) || !strings.Contains(string(cli), `"pssBytes"`) {
		t.Errorf("arizukod runs warm --json: %v\n%s", err, cli)
	}
	code, metrics, err := d.Do(http.MethodGet, "/metrics", "", nil)
	if err != nil || code != http.StatusOK || !strings.Contains(string(metrics), "arizukod_warm_agents 1") ||
		!strings.Contains(string(metrics), `arizukod_warm_agent_pss_bytes{folder="main"}`) {
		t.Errorf("metrics (%d, %v) lack the warm agent:\n%s", code, err, metrics)
	}

	// The figures: five warm turns interleaved with five runs of the same Claude Code bare
	// on the host against the same scripted model; the whole turn and the time from the
	// submission (or the command's start) to the first model request.
	// Each is measured alone: after the next warm agent is ready and a second more, as a
	// chat's next message comes seconds after the last answer.
	bare := bareClaude(t, fake.URL)
	var tooks, firsts, bareTooks, bareFirsts []time.Duration
	prev := waitWarm(t, d, "main", "").Container
	for i := range 5 {
		time.Sleep(time.Second)
		r, took, first := turn(fmt.Sprintf("warm %d", i))
		if r.Container != prev || r.Status != "ok" {
			t.Fatalf("warm turn %d ran in %s (warm agent %s): %s %q", i, r.Container, prev, r.Status, r.Error)
		}
		tooks, firsts = append(tooks, took), append(firsts, first)
		prev = waitWarm(t, d, "main", prev).Container
		time.Sleep(time.Second)
		start := time.Now()
		if out, err := bare(fmt.Sprintf("bare %d", i)); err != nil || !strings.Contains(out, "echo: bare") {
			t.Fatalf("bare Claude Code: %v\n%s", err, out)
		}
		bareTooks, bareFirsts = append(bareTooks, time.Since(start)), append(bareFirsts, reqs.after(start).Sub(start))
	}
	for _, l := range [][]time.Duration{tooks, firsts, bareTooks, bareFirsts} {
		slices.Sort(l)
	}
	t.Logf("warm turns: whole %v (median %s), first model request %v (median %s)", tooks, tooks[2], firsts, firsts[2])
	t.Logf("bare Claude Code on the host: whole %v (median %s), first model request %v (median %s)", bareTooks, bareTooks[2], bareFirsts, bareFirsts[2])
	t.Logf("warm turn / bare Claude Code: %.2f (medians)", float64(tooks[2])/float64(bareTooks[2]))

	// A folder with sidecars: its next container is prepared, not started.
	ensureSidecarImage(t, d.Engine, d.Eng)
	d.PutGroup(t, "side", `{"sidecars": [{"name": "echo", "image": "`+sidecarImage+`"}]}`)
	if r := d.Turn(t, "side", "hi"); r.Status != "ok" {
		t.Fatalf("turn of side: %+v", r)
	}
	waitPrepared(t, d, "side", "")
	var out apiwire.WarmAgents
	if err := d.Client.Do(context.Background(), http.MethodGet, "/v1/warm", nil, &out); err != nil {
		t.Fatal(err)
	}
	for _, a := range out.Agents {
		if a.Folder == "side" {
			t.Errorf("a folder with sidecars got a warm agent: %+v", a)
		}
	}
}

// TestWarmAgentDiscarded changes, in turn, each thing a warm agent was prepared with and
// proves that the next turn does not use it but runs a fresh container that sees the
// change; with nothing changed it is used.
func TestWarmAgentDiscarded(t *testing.T) {
	d, _, _, image := warmDaemon(t)
	d.Start(t)
	d.AddGroup(t, "main")
	st := d.OpenStore(t)
	write := func(rel, content string) func(t *testing.T) {
		return func(t *testing.T) {
			p := filepath.Join(d.DataDir, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name   string
		change func(t *testing.T)
		used   bool
	}{
		{"nothing", func(*testing.T) {}, true},
		{"memory file", write("groups/main/facts/warm.md", "The sky is green here.\n"), false},
		{"grants", func(t *testing.T) {
			code, body, err := d.Do(http.MethodPut, "/v1/groups/main/grants", "application/json", []byte(`{"rules":["send_reply"]}`))
			if err != nil || code != http.StatusOK {
				t.Fatalf("put grants: %d %s %v", code, body, err)
			}
		}, false},
		{"container config", func(t *testing.T) { d.PutGroup(t, "main", `{"memory": "900m"}`) }, false},
		{"session cleared", func(t *testing.T) {
			if err := st.ClearSession(context.Background(), "main"); err != nil {
				t.Fatal(err)
			}
		}, false},
		// A command of the operator's copy, edited in place: the same file, other content.
		{"agent's own files", write("claude/main/home/.claude/commands/hello.md", "Say hello twice.\n"), false},
		{"image", func(t *testing.T) {
			// Another image under the daemon's reference, the same agent with one label more.
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "Containerfile"), []byte("FROM "+image+"\nLABEL io.arizuko.warm-test="+daemontest.RandHex(4)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			podmanCLI(t, d.Engine, "build", "--pull=never", "-t", image, dir)
		}, false},
	}
	write("claude/main/home/.claude/commands/hello.md", "Say hello.\n")(t)
	if r := d.Turn(t, "main", "first"); r.Status != "ok" {
		t.Fatalf("first turn: %+v", r)
	}
	for _, c := range cases {
		w := waitWarm(t, d, "main", "")
		c.change(t)
		r := d.Turn(t, "main", c.name)
		if r.Status != "ok" || r.Result != "echo: "+c.name {
			t.Fatalf("%s: the turn %s %q %q", c.name, r.Status, r.Result, r.Error)
		}
		if used := r.Container == w.Container; used != c.used {
			t.Errorf("%s: the turn ran in %s, the warm agent was %s: used %v, want %v", c.name, r.Container, w.Container, used, c.used)
		}
		if !c.used {
			if _, err := d.Eng.Inspect(context.Background(), w.Container); err == nil {
				t.Errorf("%s: the discarded warm agent %s is still there", c.name, w.Container)
			}
		}
	}
}

// bareClaude extracts the Claude Code binary the image was built with from the cache and
// returns a function that runs it bare on the host, `claude -p TEXT`, against upstream.
func bareClaude(t *testing.T, upstream string) func(text string) (string, error) {
	t.Helper()
	cache := os.Getenv("ARIZUKO_CACHE_DIR")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(dir, "arizuko")
	}
	f, err := os.Open(filepath.Join(cache, "claude-code-linux-x64-"+agentimage.ClaudeVersion+".tgz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "claude")
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no package/claude in the cached package: %v", err)
		}
		if h.Name != "package/claude" {
			continue
		}
		out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		break
	}
	home, work := filepath.Join(dir, "home"), filepath.Join(dir, "work")
	for _, d := range []string{home, work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return func(text string) (string, error) {
		cmd := exec.Command(bin, "-p", text, "--output-format", "json")
		cmd.Dir = work
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "ANTHROPIC_BASE_URL=" + upstream, "ANTHROPIC_API_KEY=sk-ant-bare",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}
