package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/arizuko/arizukod/agentimage"
	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
)

// claudeImage is the bench's own tag of the arizuko-claude image: building it must not
// replace the localhost/arizuko-claude the tests of other checkouts run.
var claudeImage = "localhost/arizuko-bench-claude:" + agentimage.ClaudeVersion

const (
	claudeFolder = "claude"
	claudeChat   = "bench:chat"
	benchAPIKey  = "sk-ant-bench-0123456789abcdef"
)

// claudeKit is what the Claude Code measurements share: the image on Podman 4, Claude
// Code's binary on the host and the scripted upstream.
type claudeKit struct {
	dir    string // <work>/claude
	binary string // the native claude, the very file the image has
	ipcDir string // router.sock and model.sock, mounted at contract.IPCDir by podman run
	up     *upstream
	key    string // the model API key file of the daemons
}

// claudeKit makes (once) the image, the host's binary and the upstream.
func (b *bench) claudeKit(ctx context.Context) (*claudeKit, error) {
	if b.kit != nil {
		return b.kit, nil
	}
	if b.o.claudeRunner == "" {
		return nil, errors.New("-claude-runner: no arizuko-claude binary (hack/bench.sh builds bin/arizuko-claude)")
	}
	k := &claudeKit{dir: filepath.Join(b.o.work, "claude")}
	k.binary = filepath.Join(k.dir, "bin", "claude")
	k.ipcDir = filepath.Join(k.dir, "ipc")
	for _, d := range []string{filepath.Dir(k.binary), k.ipcDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	opts := agentimage.Options{CacheDir: b.o.cacheDir, Runner: b.o.claudeRunner, Ref: claudeImage, Logger: b.log}
	t0 := time.Now()
	built, err := agentimage.BuildClaude(ctx, b.podman, opts)
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", claudeImage, err)
	}
	b.say("built %s on podman: %d MB in %s", built.Ref, built.Bytes>>20, time.Since(t0).Round(time.Second))
	if err := agentimage.ExtractClaude(ctx, opts, k.binary); err != nil {
		return nil, err
	}
	if k.up, err = startUpstream(filepath.Join(k.ipcDir, contract.ModelSocket), b.o.densityHold); err != nil {
		return nil, err
	}
	b.closers = append(b.closers, k.up.close)
	k.key = filepath.Join(k.dir, "model-key")
	if err := os.WriteFile(k.key, []byte(benchAPIKey+"\n"), 0o600); err != nil {
		return nil, err
	}
	b.kit = k
	return k, nil
}

// claudeDaemon starts a daemon on Podman 4 that runs the bench's Claude image with the
// upstream behind its model gateway; extra is more configuration. A daemon that did not
// become healthy comes with the error (see startDaemonIn).
func (b *bench) claudeDaemon(ctx context.Context, k *claudeKit, name, extra string, folders ...string) (*daemonProc, error) {
	cfg := extra + fmt.Sprintf("[model]\nupstream = %q\napi_key_file = %q\n", k.up.url, k.key)
	d, err := b.startDaemonIn(ctx, filepath.Join(b.o.work, name), b.o.skillsDir, name, "podman", b.o.podmanSocket, b.o.arizukod, claudeImage, cfg, nil)
	if err != nil {
		return d, err
	}
	return d, d.addGroups(ctx, folders...)
}

// claudeJSON is ~/.claude.json with arizuko's MCP server bridged by socat to socket, as
// arizukod seeds it (session.MergeClaudeJSON) for a container.
func claudeJSON(socket string) []byte {
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"arizuko": map[string]any{
		"command": "socat", "args": []string{"STDIO", "UNIX-CONNECT:" + socket}}}})
	return append(b, '\n')
}

// claudeMethod is one way to run a Claude Code turn.
type claudeMethod struct {
	name  string
	about string
	// run runs one turn with message and returns when it started (the message's
	// arrival) and when the whole turn was over.
	run    func(ctx context.Context, message string) (start, end time.Time, err error)
	daemon *daemonProc
	// skipped says why the method was not measured.
	skipped string
	// first and whole are per kind (msgPlain, msgTool): message arrival -> the
	// upstream's first /v1/messages, and -> the turn's end.
	first, whole map[string]sample
	requests     map[string]int // model requests of the measured turns, per kind
}

// bareMethod runs the native claude on the host, as the runner runs it in the container:
// stream-json in and out, the message as its first user line, stdin closed at the
// result, the session of the previous turn resumed, arizuko's MCP server in ~/.claude.json.
func (k *claudeKit) bareMethod() (*claudeMethod, error) {
	home, work := filepath.Join(k.dir, "bare-home"), filepath.Join(k.dir, "bare-workspace")
	for _, d := range []string{home, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), claudeJSON(filepath.Join(k.ipcDir, contract.RouterSocket)), 0o600); err != nil {
		return nil, err
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "ANTHROPIC_BASE_URL=" + k.up.url, "ANTHROPIC_API_KEY=" + benchAPIKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "ENABLE_TOOL_SEARCH=false", "NO_PROXY=127.0.0.1,localhost"}
	if os.Getuid() == 0 {
		env = append(env, "IS_SANDBOX=1")
	}
	m := &claudeMethod{name: "bare Claude Code on the host",
		about: fmt.Sprintf("`claude -p --input-format stream-json --output-format stream-json --verbose --dangerously-skip-permissions [--resume ID]` "+
			"(the binary of the image, Claude Code %s, extracted from the cached npm package by agentimage.ExtractClaude) on the host, HOME and cwd its own directories, ANTHROPIC_BASE_URL the upstream's loopback port, "+
			"an MCP server of the bench with arizukod's tools through `socat STDIO UNIX-CONNECT:%s` in ~/.claude.json; "+
			"the same environment the runner gives it (ENABLE_TOOL_SEARCH=false, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, IS_SANDBOX=1 as root), no system prompt",
			agentimage.ClaudeVersion, contract.RouterSocket)}
	var session string
	m.run = func(ctx context.Context, message string) (time.Time, time.Time, error) {
		args := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"}
		if session != "" {
			args = append(args, "--resume", session)
		}
		cmd := exec.CommandContext(ctx, k.binary, args...)
		cmd.Dir, cmd.Env = work, env
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return time.Time{}, time.Time{}, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return time.Time{}, time.Time{}, err
		}
		start := time.Now()
		if err := cmd.Start(); err != nil {
			return start, start, err
		}
		stdin.Write(userLine(message))
		res, rerr := readResult(stdout, stdin)
		werr := cmd.Wait()
		end := time.Now()
		if err := errors.Join(rerr, werr); err != nil {
			return start, end, fmt.Errorf("%w: %s", err, tail(errOut.String()))
		}
		if res.IsError || res.SessionID == "" {
			return start, end, fmt.Errorf("result is_error=%v session %q: %s", res.IsError, res.SessionID, res.Result)
		}
		session = res.SessionID
		return start, end, nil
	}
	return m, nil
}

// streamEvent is the part of a stream-json line read here.
type streamEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	IsError   bool   `json:"is_error"`
	Result    string `json:"result"`
}

// readResult reads Claude Code's stream-json output until its result, closes its input
// then (as the runner does once every message is answered) and drains the rest.
func readResult(stdout io.Reader, stdin io.Closer) (streamEvent, error) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var res streamEvent
	found := false
	for sc.Scan() {
		var ev streamEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "result" && !found {
			res, found = ev, true
			stdin.Close()
		}
	}
	stdin.Close()
	if !found {
		return res, errors.New("no result event")
	}
	return res, sc.Err()
}

func userLine(text string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}})
	return append(b, '\n')
}

// podmanRunMethod runs the image with the local podman CLI, hardened like every command
// line of the bench, with what the runner needs mounted: the upstream's model.sock and
// arizuko's router.sock at contract.IPCDir, a home (kept across turns, so the session
// resumes) at /root and a workspace at /workspace.
func (k *claudeKit) podmanRunMethod(testhost string) (*claudeMethod, error) {
	home, work := filepath.Join(k.dir, "podman-home"), filepath.Join(k.dir, "podman-workspace")
	for _, d := range []string{home, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), claudeJSON(contract.IPCDir+"/"+contract.RouterSocket), 0o600); err != nil {
		return nil, err
	}
	cli := podmanLocal(testhost)
	mounts := []string{"-v", k.ipcDir + ":" + contract.IPCDir, "-v", home + ":/root", "-v", work + ":/workspace", "-e", "ANTHROPIC_API_KEY=" + benchAPIKey}
	args := append(append(append(append([]string{}, cli.argv[1:]...), "run", "--rm", "-i"), hardening...), mounts...)
	args = append(args, claudeImage)
	m := &claudeMethod{name: "podman run of the image",
		about: fmt.Sprintf("`podman run --rm -i %s -v IPC:%s -v HOME:/root -v WORKSPACE:/workspace -e ANTHROPIC_API_KEY=… %s` (the local podman CLI on Podman 4's storage), "+
			"the runner's JSON line on stdin (the message, chat %s, the previous turn's session): the runner relays the upstream's unix socket %s "+
			"(the bench serves the scripted upstream on it too) to a loopback port for ANTHROPIC_BASE_URL, and the MCP server is the bench's on %s; no system prompt",
			strings.Join(hardening, " "), contract.IPCDir, claudeImage, claudeChat, contract.ModelSocket, contract.RouterSocket)}
	var session string
	m.run = func(ctx context.Context, message string) (time.Time, time.Time, error) {
		stdin, err := contract.EncodeInput(contract.Input{SessionID: session, Folder: claudeFolder, ChatJID: claudeChat,
			Messages: []contract.Message{{Role: "user", Content: message, ChatJID: claudeChat}}})
		if err != nil {
			return time.Time{}, time.Time{}, err
		}
		cmd := exec.CommandContext(ctx, cli.argv[0], args...)
		cmd.Env = append(os.Environ(), cli.env...)
		cmd.Stdin = bytes.NewReader(stdin)
		var capture contract.Capture
		var errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &capture, &errOut
		start := time.Now()
		err = cmd.Run()
		end := time.Now()
		if err != nil {
			return start, end, fmt.Errorf("%w: %s", err, tail(errOut.String()))
		}
		out, err := capture.Result()
		if err != nil {
			return start, end, fmt.Errorf("%w: %s", err, tail(errOut.String()))
		}
		if out.Status != contract.StatusOK || out.NewSessionID == "" {
			return start, end, fmt.Errorf("answer %s (session %q): %s %s", out.Status, out.NewSessionID, out.Error, tail(errOut.String()))
		}
		session = out.NewSessionID
		return start, end, nil
	}
	return m, nil
}

// daemonMethod is a turn through d's API: CreateRun for the folder (whose stored session
// it continues) with the message of chat claudeChat, then WaitRun.
func daemonMethod(name, about string, d *daemonProc) *claudeMethod {
	m := &claudeMethod{name: name, about: about, daemon: d}
	m.run = func(ctx context.Context, message string) (time.Time, time.Time, error) {
		start := time.Now()
		run, err := d.client.CreateRun(ctx, apiwire.CreateRunRequest{Folder: claudeFolder, ChatJID: claudeChat,
			Messages: []contract.Message{{Role: "user", Content: message, ChatJID: claudeChat}}})
		if err != nil {
			return start, time.Now(), err
		}
		r, err := d.client.WaitRun(ctx, run.ID)
		end := time.Now()
		if err == nil {
			err = runOK(r)
		}
		return start, end, err
	}
	return m
}

// claudeLatencyResult is the Claude Code turn latency table.
type claudeLatencyResult struct {
	methods []*claudeMethod
	warm    int
	turns   int
}

// claudeLatency runs o.claudeTurns turns of each kind per method, interleaved: each round
// runs a plain and a tool turn of every method, in an order that rotates by one per round.
func (b *bench) claudeLatency(ctx context.Context) error {
	k, err := b.claudeKit(ctx)
	if err != nil {
		return err
	}
	bare, err := k.bareMethod()
	if err != nil {
		return err
	}
	prun, err := k.podmanRunMethod(b.o.testhostDir)
	if err != nil {
		return err
	}
	methods := []*claudeMethod{bare, prun}
	cold, err := b.claudeDaemon(ctx, k, "claude-warm-off", "warm_agents = 0\n", claudeFolder)
	if err != nil {
		return err
	}
	coldM := daemonMethod("arizukod, warm agents off",
		"CreateRun + WaitRun against `arizukod serve` on Podman 4 (max_running 5, prepared 5: the defaults; warm_agents = 0: containers prepared ahead, Claude Code not started), image "+claudeImage+
			", [model] upstream the scripted upstream's loopback port behind the model gateway, arizuko's MCP server, the folder's session resumed, the assembled system prompt", cold)
	methods = append(methods, coldM)
	// One turn of the daemon first, not counted: its model request tells the tools of
	// arizuko's MCP server, which the stand-in of the turns without a daemon then offers.
	if _, _, err := coldM.run(ctx, msgPlain+" (tools)"); err != nil {
		return fmt.Errorf("claude, the daemon's first turn: %w", err)
	}
	stub, err := startMCPStub(filepath.Join(k.ipcDir, contract.RouterSocket), k.up.arizukoTools())
	if err != nil {
		return err
	}
	b.closers = append(b.closers, stub.close)
	warm := &claudeMethod{name: "arizukod, warm agents on", skipped: "not measured: -warm-agents=0"}
	if b.o.warmAgents > 0 {
		extra := fmt.Sprintf("warm_agents = %d\n", b.o.warmAgents)
		d, err := b.claudeDaemon(ctx, k, "claude-warm-on", extra, claudeFolder)
		switch {
		case err != nil && d != nil && d.hasExited():
			// The daemon refused its configuration: this arizukod has no warm agents.
			warm.skipped = fmt.Sprintf("not measured: this arizukod refused `%s`: %s", strings.TrimSpace(extra), refusal(d.logText()))
			b.say("%s", warm.skipped)
		case err != nil:
			return err
		default:
			warm = daemonMethod("arizukod, warm agents on", fmt.Sprintf("as above with `warm_agents = %d`", b.o.warmAgents), d)
		}
	}
	methods = append(methods, warm)
	var active []*claudeMethod
	for _, m := range methods {
		m.first, m.whole, m.requests = map[string]sample{}, map[string]sample{}, map[string]int{}
		if m.skipped == "" {
			active = append(active, m)
		}
	}
	b.say("claude: %d methods x 2 kinds x (%d warm + %d measured) turns, interleaved", len(active), b.o.claudeWarm, b.o.claudeTurns)
	for round := -b.o.claudeWarm; round < b.o.claudeTurns; round++ {
		for _, kind := range []string{msgPlain, msgTool} {
			for i := range active {
				m := active[(i+max(round, 0))%len(active)]
				k.up.reset()
				start, end, err := m.run(ctx, fmt.Sprintf("%s %d", kind, round))
				if err != nil {
					return fmt.Errorf("claude, %s, %s: %w", m.name, kind, err)
				}
				acc := k.up.account()
				if err := acc.check(kind); err != nil {
					return fmt.Errorf("claude, %s, %s: %w", m.name, kind, err)
				}
				if round < 0 {
					continue
				}
				m.first[kind] = append(m.first[kind], acc.first.Sub(start))
				m.whole[kind] = append(m.whole[kind], end.Sub(start))
				m.requests[kind] += acc.requests
			}
		}
		if round >= 0 && (round+1)%5 == 0 {
			b.say("claude: %d/%d rounds", round+1, b.o.claudeTurns)
		}
	}
	b.report.claude = &claudeLatencyResult{methods: methods, warm: b.o.claudeWarm, turns: b.o.claudeTurns}
	return nil
}

// refusal is the reason in the last line of a daemon's log that refused its configuration,
// without the file's path ("FILE:LINE: key: reason" -> "key: reason").
func refusal(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	last := lines[len(lines)-1]
	if _, after, ok := strings.Cut(last, ".toml:"); ok {
		if _, reason, ok := strings.Cut(after, ": "); ok {
			return reason
		}
	}
	return tail(last)
}

// tail is the end of a process's output, for an error.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}

// bareP50 is the p50 of bare Claude Code of kind, of whole turns or of first requests.
func (c *claudeLatencyResult) bareP50(kind string, whole bool) time.Duration {
	for _, m := range c.methods {
		if m.daemon == nil && strings.HasPrefix(m.name, "bare") {
			if whole {
				return m.whole[kind].p50()
			}
			return m.first[kind].p50()
		}
	}
	return 0
}

func (r *report) claudeSection(p printer) {
	c := r.claude
	p("## Claude Code turns: bare, podman run, arizukod (warm agents off and on)")
	p("")
	p("The real Claude Code %s against the scripted Messages API (internal/fakemodel, answering at once), %d measured", agentimage.ClaudeVersion, c.turns)
	p("turns per method and kind after %d warm-up rounds, interleaved: each round runs a plain turn of every method, then a", c.warm)
	p("tool turn of every method, in an order that rotates by one each round; every method resumes its own session.")
	p("**plain**: the message is answered with a text (one model request). **tool**: the upstream answers with a `tool_use`")
	p("of `mcp__arizuko__send_reply`, Claude Code calls the MCP server over `socat STDIO UNIX-CONNECT:%s` (arizukod's,", contract.RouterSocket)
	p("whose reply lands in the outbox; for bare and podman run a stand-in of the bench offering the same tools, copied from")
	p("the daemon's model request, that answers send_reply with an outbox id), and the request carrying the `tool_result` is")
	p("answered with a text (two model requests). Every turn's tool result is checked. **first request**: the message's arrival (the")
	p("process started, or CreateRun called) to the upstream receiving the turn's first `POST /v1/messages`. **turn**: to the")
	p("end (the process exited, or WaitRun returned the result). p50 / p90 in ms; ratios are p50 ÷ bare Claude Code's p50.")
	p("")
	p("| method | plain: first request | plain: turn | tool: first request | tool: turn | plain turn ÷ bare | tool turn ÷ bare | first request ÷ bare (plain) | model requests per turn (plain, tool) |")
	p("|---|---|---|---|---|---:|---:|---:|---|")
	pp := func(s sample) string { return ms(s.p50()) + " / " + ms(s.pct(90)) }
	for _, m := range c.methods {
		if m.skipped != "" {
			p("| %s | %s | | | | | | | |", m.name, m.skipped)
			continue
		}
		per := func(kind string) string {
			if len(m.whole[kind]) == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f", float64(m.requests[kind])/float64(len(m.whole[kind])))
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s, %s |", m.name, pp(m.first[msgPlain]), pp(m.whole[msgPlain]), pp(m.first[msgTool]), pp(m.whole[msgTool]),
			ratio(m.whole[msgPlain].p50(), c.bareP50(msgPlain, true)), ratio(m.whole[msgTool].p50(), c.bareP50(msgTool, true)),
			ratio(m.first[msgPlain].p50(), c.bareP50(msgPlain, false)), per(msgPlain), per(msgTool))
	}
	p("")
	for _, m := range c.methods {
		if m.skipped == "" {
			p("- **%s**: %s.", m.name, m.about)
		}
	}
	p("")
	p("Goals (issue 28): with warm agents on, the first model request within 150 ms of the message and a whole plain turn at")
	p("most 0.5 × bare Claude Code; with them off, at most 1.0 × bare.")
	for _, m := range c.methods {
		if m.daemon == nil || m.skipped != "" {
			continue
		}
		first, whole := m.first[msgPlain].p50(), ratio(m.whole[msgPlain].p50(), c.bareP50(msgPlain, true))
		p("%s: first model request %s ms after the message (p50), a plain turn %s × bare.", m.name, ms(first), whole)
	}
	p("")
}
