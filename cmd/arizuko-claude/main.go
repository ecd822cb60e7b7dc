// Command arizuko-claude is the container side of the turn contract for Claude Code: the
// entrypoint of the arizuko-claude image. It reads the turn's JSON line on stdin, runs
// Claude Code headless in /workspace with the turn's messages, and prints the answer
// between the contract's markers.
//
// The container has no network. The runner relays a loopback port to the model gateway's
// socket (/var/run/pub/arizuko/model.sock) and points ANTHROPIC_BASE_URL at it, and another
// to the egress proxy (egress.sock) for HTTPS_PROXY, so Claude Code needs neither socat nor
// a network for them. The API key it sees is the turn's token; the real key stays on the
// host. The arizuko MCP server and the sidecars are seeded into ~/.claude.json by arizukod.
//
// Claude Code runs with stream-json on both sides: the turn's messages are its first user
// message; on SIGUSR1 the steering files in the IPC input directory become further user
// messages of the same session; the _close sentinel there (the soft deadline) ends it with
// what it has. A result is ok (with its session id), Claude Code's own error is error, and
// nothing usable is fatal.
//
// Its image declares contract.PrepareLabel: arizukod may start it ahead of its turn (a warm
// agent). Its first line is then a prepare line: Claude Code is started with its session
// and system prompt, the runner asks it (stream-json's mcp_status control request) until
// no MCP server is pending, prints contract.ReadyMarker, and reads the turn's line, whose
// messages become Claude Code's first user message.
//
// `arizuko-claude pre-compact` is Claude Code's PreCompact hook (arizukod wires it in
// settings.json): it archives the session's user and assistant text, before Claude Code
// compacts it, as one episode in /workspace/episodes/ that the next turn's prompt lists,
// and adds a section about it to the day's diary, /workspace/diary/YYYY-MM-DD.md.
//
// Every 100th turn of a group (counted in ~/.arizuko/turns, the group's session home) the
// turn's user message starts with a <diary-nudge> asking the agent to write a diary entry
// before it answers (seed 001: "every 100 turns"). It is in the message, not the system
// prompt: Claude Code keeps a resumed session's system prompt from its transcript (a
// prompt_snapshot), so a line added there for one turn would stay in the next.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/mountsec"
)

// Paths inside the container, as arizukod mounts them.
const (
	ipcDir  = contract.IPCDir
	envFile = "/workspace/env-dir/env"
)

// steerSignal receives SIGUSR1: steering messages wait in the IPC input directory.
var steerSignal = make(chan os.Signal, 1)

// claudeBin is Claude Code's native binary in the image, and workspace the directory it
// runs in (variables for the tests).
var (
	claudeBin = "/usr/local/bin/claude"
	workspace = "/workspace"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("arizuko-claude")
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "pre-compact" {
		home, err := os.UserHomeDir()
		if err != nil {
			fmt.Fprintf(os.Stderr, "arizuko-claude: pre-compact: %v (set HOME)\n", err)
			os.Exit(1)
		}
		os.Exit(preCompact(os.Stdin, os.Stderr, home, time.Now()))
	}
	// Steering may come as soon as the turn's line is written: caught from the start, since
	// SIGUSR1's default action would end the runner (a warm agent waits long before it).
	signal.Notify(steerSignal, syscall.SIGUSR1)
	stdin := bufio.NewReaderSize(os.Stdin, 64<<10)
	in, err := readInput(stdin)
	if err != nil {
		answer(contract.Output{Status: contract.StatusFatal, Error: err.Error()})
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if !in.Prepare {
		answer(runTurn(ctx, in))
		return
	}
	answer(runPrepared(ctx, in, stdin, os.Stdout))
}

// readyTimeout bounds how long a prepared Claude Code may take to connect its MCP servers.
const readyTimeout = 2 * time.Minute

// runPrepared is a warm agent (contract.PrepareLabel): Claude Code is started with the
// prepare line's session and system prompt, ReadyMarker is printed once its MCP servers
// are connected, and the turn's line that follows becomes its first user message.
func runPrepared(ctx context.Context, prep contract.Input, stdin *bufio.Reader, stdout io.Writer) contract.Output {
	c, err := startClaude(ctx, prep)
	if err != nil {
		return contract.Output{Status: contract.StatusFatal, Error: err.Error()}
	}
	defer c.cancel()
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	err = c.waitReady(rctx)
	cancel()
	if err != nil {
		return c.abort(fmt.Errorf("Claude Code did not get ready: %w", err))
	}
	fmt.Fprintln(stdout, contract.ReadyMarker)
	in, err := readInput(stdin)
	if err != nil {
		return c.abort(err)
	}
	if in.Prepare || in.SessionID != prep.SessionID || in.SystemPrompt != prep.SystemPrompt || in.Folder != prep.Folder || !slices.Equal(in.Grants, prep.Grants) {
		return c.abort(errors.New("the turn's line differs from the prepare line: the warm agent cannot serve it"))
	}
	return c.drive(ctx, in)
}

func answer(out contract.Output) { os.Stdout.Write(contract.WriteOutput(out)) }

func readInput(r *bufio.Reader) (contract.Input, error) {
	line, err := r.ReadBytes('\n')
	if err != nil && (err != io.EOF || len(line) == 0) {
		return contract.Input{}, fmt.Errorf("read stdin: %w", err)
	}
	var in contract.Input
	if err := json.Unmarshal(line, &in); err != nil {
		return contract.Input{}, fmt.Errorf("decode stdin: %w", err)
	}
	return in, nil
}

// relay listens on a loopback port and connects every connection to the unix socket.
func relay(ctx context.Context, socket string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("relay to %s: %w", socket, err)
	}
	context.AfterFunc(ctx, func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("unix", socket)
				if err != nil {
					fmt.Fprintf(os.Stderr, "arizuko-claude: %s: %v\n", socket, err)
					return
				}
				defer u.Close()
				done := make(chan struct{})
				go func() { io.Copy(u, c); u.(*net.UnixConn).CloseWrite(); close(done) }()
				io.Copy(c, u)
				<-done
			}()
		}
	}()
	return ln.Addr().String(), nil
}

// environment is Claude Code's: the container's, the allowlisted env file's, and what
// sends its traffic through the relays.
func environment(modelAddr, egressAddr string) []string {
	env := os.Environ()
	if b, err := os.ReadFile(envFile); err == nil {
		if vars, err := mountsec.ParseEnvFile(b); err == nil {
			for k, v := range vars {
				env = append(env, k+"="+v)
			}
		}
	}
	env = append(env,
		"ANTHROPIC_BASE_URL=http://"+modelAddr,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		// MCP tools are offered to the model directly instead of behind a tool search.
		"ENABLE_TOOL_SEARCH=false",
		"NO_PROXY=127.0.0.1,localhost",
	)
	if egressAddr != "" {
		env = append(env, "HTTPS_PROXY=http://"+egressAddr, "HTTP_PROXY=http://"+egressAddr)
	}
	// The container's placeholders win over the env file: a secret the egress proxy
	// sends is bound to its hosts there.
	for _, k := range strings.Split(os.Getenv("ARIZUKO_CREDENTIALS"), ",") {
		if v, ok := os.LookupEnv(k); ok && k != "" {
			env = append(env, k+"="+v)
		}
	}
	if bundle, err := caBundle(os.Getenv("ARIZUKO_EGRESS_CA")); err == nil {
		env = append(env, "SSL_CERT_FILE="+bundle, "GIT_SSL_CAINFO="+bundle, "CURL_CA_BUNDLE="+bundle, "REQUESTS_CA_BUNDLE="+bundle)
	} else if os.Getenv("ARIZUKO_EGRESS_CA") != "" {
		fmt.Fprintf(os.Stderr, "arizuko-claude: the egress CA: %v\n", err)
	}
	if os.Getuid() == 0 {
		// Root in a container without capabilities: the container is the sandbox, which
		// is what Claude Code asks to be told before it skips its permission prompts.
		env = append(env, "IS_SANDBOX=1")
	}
	if tok := os.Getenv("ARIZUKO_MODEL_TOKEN"); tok != "" {
		env = append(env, "ANTHROPIC_API_KEY="+tok)
	}
	return env
}

// systemRoots is the image's bundle of trusted roots (Debian's ca-certificates).
const systemRoots = "/etc/ssl/certs/ca-certificates.crt"

// caBundle writes the image's roots and the egress proxy's CA at ca into one file in
// /tmp, for the tools that read one bundle (OpenSSL, curl, git, Python), and returns it.
func caBundle(ca string) (string, error) {
	if ca == "" {
		return "", errors.New("no egress CA")
	}
	extra, err := os.ReadFile(ca)
	if err != nil {
		return "", err
	}
	roots, _ := os.ReadFile(systemRoots)
	f, err := os.CreateTemp("", "arizuko-ca-bundle-*.pem")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(append(append(roots, '\n'), extra...)); err != nil {
		return "", err
	}
	if err := f.Chmod(0o644); err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

// prompt is the turn's messages as one user message: every message, each headed by what
// is known of it (see message).
func prompt(msgs []contract.Message) string {
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(message(m))
	}
	return b.String()
}

// message is one message for the model: its content, headed by its role when it is not
// the user's and by its sender, chat and time where known, so that in a batch of several
// people the model knows who said what:
//
//	[from tg:1 in tg:-100 at 2030-01-02T15:04:05Z] hello
func message(m contract.Message) string {
	var head []string
	if m.Role != "" && m.Role != "user" {
		head = append(head, m.Role)
	}
	if m.SenderJID != "" {
		head = append(head, "from "+m.SenderJID)
	}
	if m.ChatJID != "" {
		head = append(head, "in "+m.ChatJID)
	}
	if m.Time != "" {
		head = append(head, "at "+m.Time)
	}
	if len(head) == 0 {
		return m.Content
	}
	return "[" + strings.Join(head, " ") + "] " + m.Content
}

// userLine is one stream-json user message.
func userLine(text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"type":    "user",
		"message": map[string]any{"role": "user", "content": text},
	})
	return append(b, '\n')
}

// event is the part of Claude Code's stream-json output lines the runner reads.
type event struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	IsError   bool   `json:"is_error"`
	Result    string `json:"result"`
	Response  struct {
		RequestID string `json:"request_id"`
		Response  struct {
			MCPServers []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"mcpServers"`
		} `json:"response"`
	} `json:"response"`
	Message struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"message"`
}

func runTurn(ctx context.Context, in contract.Input) contract.Output {
	if len(in.Messages) == 0 {
		return contract.Output{Status: contract.StatusError, Error: "the turn has no messages", NewSessionID: in.SessionID}
	}
	c, err := startClaude(ctx, in)
	if err != nil {
		return contract.Output{Status: contract.StatusFatal, Error: err.Error()}
	}
	defer c.cancel()
	return c.drive(ctx, in)
}

// claude is one Claude Code process with its relays, reading stream-json on stdin.
type claude struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc // ends the relays
	lines  chan event
	stdin  io.WriteCloser

	mu         sync.Mutex
	inClosed   bool
	unanswered int // user messages sent that no result has answered yet
}

// startClaude starts Claude Code for the session and system prompt of in, with the relays
// to the model gateway and the egress proxy.
func startClaude(ctx context.Context, in contract.Input) (*claude, error) {
	rctx, cancel := context.WithCancel(ctx)
	modelAddr, err := relay(rctx, filepath.Join(ipcDir, contract.ModelSocket))
	if err != nil {
		cancel()
		return nil, err
	}
	egressAddr, err := relay(rctx, filepath.Join(ipcDir, contract.EgressSocket))
	if err != nil {
		egressAddr = ""
	}
	args := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--dangerously-skip-permissions"}
	if in.SystemPrompt != "" {
		args = append(args, "--append-system-prompt", in.SystemPrompt)
	}
	if in.SessionID != "" {
		if resumable(in.SessionID) {
			args = append(args, "--resume", in.SessionID)
		} else {
			// A session Claude Code does not have (another agent's, or its files are gone)
			// cannot be resumed: claude -p would fail every turn of the group until someone
			// cleared it. The turn starts a new conversation and says so.
			fmt.Fprintf(os.Stderr, "arizuko-claude: session %q is not one of Claude Code's sessions; starting a new one\n", in.SessionID)
		}
	}
	cmd := exec.Command(claudeBin, args...)
	cmd.Dir = workspace
	cmd.Env = environment(modelAddr, egressAddr)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start Claude Code: %w", err)
	}
	c := &claude{cmd: cmd, cancel: cancel, lines: make(chan event), stdin: stdin}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				c.lines <- ev
			}
		}
	}()
	return c, nil
}

// writeLine writes one stream-json line to Claude Code, unless its input is closed.
func (c *claude) writeLine(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.inClosed {
		c.stdin.Write(b)
	}
}

// waitReady asks Claude Code for the state of its MCP servers (the control request
// mcp_status of stream-json) until none is pending: it connects them at start, before
// its first user message.
func (c *claude) waitReady(ctx context.Context) error {
	for n := 1; ; n++ {
		id := fmt.Sprintf("arizuko-ready-%d", n)
		b, _ := json.Marshal(map[string]any{"type": "control_request", "request_id": id,
			"request": map[string]any{"subtype": "mcp_status"}})
		c.writeLine(append(b, '\n'))
		pending, err := c.mcpPending(ctx, id)
		if err != nil || !pending {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// mcpPending reads Claude Code's events to the answer of the mcp_status request id and
// says whether a server is still connecting.
func (c *claude) mcpPending(ctx context.Context, id string) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-c.lines:
			if !ok {
				return false, errors.New("it exited")
			}
			if ev.Type != "control_response" || ev.Response.RequestID != id {
				continue
			}
			for _, s := range ev.Response.Response.MCPServers {
				if s.Status == "pending" {
					return true, nil
				}
			}
			return false, nil
		}
	}
}

// abort ends Claude Code before its turn: the answer is fatal, with why.
func (c *claude) abort(why error) contract.Output {
	c.closeInput()
	c.cmd.Process.Signal(syscall.SIGTERM)
	for range c.lines {
	}
	c.cmd.Wait()
	return contract.Output{Status: contract.StatusFatal, Error: why.Error()}
}

func (c *claude) send(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.inClosed {
		c.unanswered++
		c.stdin.Write(b)
	}
}

func (c *claude) closeInput() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.inClosed {
		c.inClosed = true
		c.stdin.Close()
	}
}

// answered counts a result: input closes (and Claude Code ends) once every message,
// steering included, is answered.
func (c *claude) answered() {
	c.mu.Lock()
	c.unanswered--
	done := c.unanswered <= 0
	c.mu.Unlock()
	if done {
		c.closeInput()
	}
}

// drive sends the turn's messages as the first user message, relays steering, and reads
// Claude Code's events to its result.
func (c *claude) drive(ctx context.Context, in contract.Input) contract.Output {
	if len(in.Messages) == 0 {
		return c.abort(errors.New("the turn has no messages"))
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	home, _ := os.UserHomeDir()
	countTurn(home, func(n int) { c.send(userLine(withNudge(prompt(in.Messages), n, time.Now()))) })

	// Steering: SIGUSR1 turns the new message files into user messages of the session.
	// A signal that came before the turn's messages were sent finds the files now.
	closed := make(chan struct{})
	go func() {
		seen := map[string]bool{}
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-steerSignal:
				for _, text := range steering(seen) {
					c.send(userLine(text))
				}
			case <-tick.C:
				if _, err := os.Stat(filepath.Join(ipcDir, contract.InputDir, "_close")); err == nil {
					close(closed)
					return
				}
			}
		}
	}()

	var (
		last    event // the result event, once it came
		text    string
		session = in.SessionID
		gotRes  bool
	)
	interrupted := false
loop:
	for {
		select {
		case ev, ok := <-c.lines:
			if !ok {
				break loop
			}
			if ev.SessionID != "" {
				session = ev.SessionID
			}
			switch ev.Type {
			case "assistant":
				for _, m := range ev.Message.Content {
					if m.Type == "text" && m.Text != "" {
						text = m.Text
					}
				}
			case "result":
				last, gotRes = ev, true
				c.answered()
			}
		case <-closed:
			// The soft deadline: end with what there is.
			interrupted = true
			c.closeInput()
			c.cmd.Process.Signal(syscall.SIGTERM)
			closed = nil
		case <-ctx.Done():
			interrupted = true
			c.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	c.closeInput()
	waitErr := c.cmd.Wait()
	switch {
	case gotRes && !last.IsError:
		return contract.Output{Status: contract.StatusOK, Result: last.Result, NewSessionID: session}
	case gotRes:
		return contract.Output{Status: contract.StatusError, Error: "Claude Code: " + orText(last.Result, last.Subtype), NewSessionID: session}
	case interrupted && (text != "" || session != ""):
		return contract.Output{Status: contract.StatusOK, Result: text, NewSessionID: session}
	}
	return contract.Output{Status: contract.StatusFatal, Error: fmt.Sprintf("Claude Code ended without a result: %v", orErr(waitErr))}
}

// sessionIDPattern is the form of Claude Code's session ids, the only ones it resumes by id.
var sessionIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// resumable says whether Claude Code has the conversation of session id: its transcript
// under ~/.claude/projects/<the working directory, encoded>/<id>.jsonl.
func resumable(id string) bool {
	if !sessionIDPattern.MatchString(id) {
		return false
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return false
	}
	found, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", id+".jsonl"))
	return len(found) > 0
}

func orText(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func orErr(err error) error {
	if err == nil {
		return errors.New("it exited 0")
	}
	return err
}

// steering reads the message files of the IPC input directory not seen before, in name
// order (arizukod names them so that order is arrival order).
func steering(seen map[string]bool) []string {
	dir := filepath.Join(ipcDir, contract.InputDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var out []string
	for _, e := range entries {
		if seen[e.Name()] || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		seen[e.Name()] = true
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var m contract.Message
		if json.Unmarshal(b, &m) == nil && m.Content != "" {
			out = append(out, message(m))
		}
	}
	return out
}
