package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/arizuko/arizukod/contract"
)

// A command returns the answer to print; an Output with no Status prints nothing.
type command func(in contract.Input, arg string) contract.Output

var commands map[string]command

func init() {
	commands = map[string]command{
		"reply": func(_ contract.Input, arg string) contract.Output { return ok(arg) },
		"noop":  func(contract.Input, string) contract.Output { return ok("") },
		"error": func(_ contract.Input, arg string) contract.Output {
			return contract.Output{Status: contract.StatusError, Error: arg}
		},
		"fatal": func(_ contract.Input, arg string) contract.Output {
			return contract.Output{Status: contract.StatusFatal, Error: arg}
		},
		"sleep":   sleep,
		"hang":    hang,
		"exit":    exit,
		"silent":  func(contract.Input, string) contract.Output { return contract.Output{} },
		"noise":   noise,
		"badjson": badJSON,
		"flood":   flood,
		"oom":     oom,
		"sandbox": func(contract.Input, string) contract.Output { return report(inspectSandbox()) },
		"dial":    dial,
		"threads": threads,
		"write":   write,
		"read":    read,
		"prompt":  func(in contract.Input, _ string) contract.Output { return ok(in.SystemPrompt) },
		"steer":   steer,
		"env":     env,
		"mcp":     mcpCommand,
		"stderr": func(_ contract.Input, arg string) contract.Output {
			fmt.Fprintln(os.Stderr, arg)
			return ok("said on stderr")
		},
		"mcp-socket":  mcpSocketCommand,
		"model":       modelCommand,
		"model-as":    modelAsCommand,
		"model-raw":   modelRawCommand,
		"model-burst": modelBurstCommand,
		"model-seq":   modelSeqCommand,
		"model-retry": modelRetryCommand,
		"fetch":       fetchCommand,
		"fetch-auth":  fetchAuthCommand,
		"token":       tokenCommand,
		"scan":        scanCommand,
		"messages":    messagesCommand,
		"plant":       plant,
		"project":     projectCommand,
		"projectswap": projectSwapCommand,
		"prepared":    preparedCommand,
	}
}

// preparedCommand answers whether the agent was started ahead of its turn (a warm agent).
func preparedCommand(contract.Input, string) contract.Output {
	if warm {
		return contract.Output{Status: contract.StatusOK, Result: "warm"}
	}
	return contract.Output{Status: contract.StatusOK, Result: "fresh"}
}

// messagesCommand answers what the turn knows of its messages: each one's sender, chat and
// time (when known) with its content, and the chat the turn answers, where send_reply
// without a chat_jid goes.
func messagesCommand(in contract.Input, _ string) contract.Output {
	msgs := in.Messages
	if msgs == nil {
		msgs = []contract.Message{}
	}
	return report(map[string]any{"chatJid": in.ChatJID, "senderJid": in.SenderJID, "messages": msgs})
}

func ok(result string) contract.Output {
	return contract.Output{Status: contract.StatusOK, Result: result}
}

func fail(format string, args ...any) contract.Output {
	return contract.Output{Status: contract.StatusError, Error: fmt.Sprintf(format, args...)}
}

func report(v any) contract.Output {
	b, err := json.Marshal(v)
	if err != nil {
		return fail("encode report: %v", err)
	}
	return ok(string(b))
}

// sleep waits for the duration, or until arizukod writes the _close sentinel at the soft
// deadline: an agent's cue to wrap up and answer before the hard kill.
func sleep(_ contract.Input, arg string) contract.Output {
	d, err := time.ParseDuration(arg)
	if err != nil {
		return fail("sleep: %v", err)
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(ipcDir, contract.InputDir, "_close")); err == nil {
			return ok("closed early by _close after " + time.Since(deadline.Add(-d)).Round(time.Millisecond).String())
		}
		time.Sleep(min(50*time.Millisecond, time.Until(deadline)))
	}
	return ok("slept " + d.String())
}

// hang sleeps and ignores the _close sentinel, as a stuck agent would.
func hang(_ contract.Input, arg string) contract.Output {
	d, err := time.ParseDuration(arg)
	if err != nil {
		return fail("hang: %v", err)
	}
	time.Sleep(d)
	return ok("hung " + d.String())
}

func exit(_ contract.Input, arg string) contract.Output {
	code, err := strconv.Atoi(arg)
	if err != nil {
		return fail("exit: %v", err)
	}
	os.Exit(code)
	return contract.Output{}
}

// dial opens a TCP connection to HOST:PORT within 3 s and answers whether it could: what a
// container of network none must not.
func dial(_ contract.Input, addr string) contract.Output {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return report(map[string]any{"connected": false, "error": err.Error()})
	}
	c.Close()
	return report(map[string]any{"connected": true})
}

func noise(contract.Input, string) contract.Output {
	for i := range 100 {
		fmt.Printf("noise line %d %s\n", i, strings.Repeat("~", i))
	}
	fmt.Println("not yet " + contract.StartMarker + " (inline markers do not count)")
	return ok("after noise")
}

func badJSON(contract.Input, string) contract.Output {
	fmt.Print("\n" + contract.StartMarker + "\n{\"status\": \"ok\", \"result\": \n" + contract.EndMarker + "\n")
	return contract.Output{}
}

func flood(_ contract.Input, arg string) contract.Output {
	line := []byte(strings.Repeat("flood ", 20) + "\n")
	if arg == "forever" {
		for {
			os.Stdout.Write(line)
		}
	}
	size, err := parseSize(arg)
	if err != nil {
		return fail("flood: %v", err)
	}
	for n := int64(0); n < size; n += int64(len(line)) {
		os.Stdout.Write(line)
	}
	return ok(fmt.Sprintf("flooded %d bytes", size))
}

func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"B", 1}}
	for _, u := range units {
		if n, found := strings.CutSuffix(strings.ToUpper(s), u.suffix); found {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.mult, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// oom touches memory page by page until the cgroup's limit kills the process.
func oom(contract.Input, string) contract.Output {
	var hoard [][]byte
	for {
		b := make([]byte, 16<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		hoard = append(hoard, b)
	}
}

func write(_ contract.Input, arg string) contract.Output {
	rel, text, _ := strings.Cut(arg, " ")
	path := filepath.Join("/workspace", filepath.Clean("/"+rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fail("write: %v", err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return fail("write: %v", err)
	}
	return ok(path)
}

// read answers the content of a file under /workspace.
func read(_ contract.Input, arg string) contract.Output {
	b, err := os.ReadFile(filepath.Join("/workspace", filepath.Clean("/"+arg)))
	if err != nil {
		return fail("read: %v", err)
	}
	return ok(string(b))
}

// steer waits for SIGUSR1, the signal arizukod sends after dropping steering messages into
// the IPC input directory, and answers what it found there.
func steer(contract.Input, string) contract.Output {
	// Tell the test the handler is in place; it steers only after seeing this.
	fmt.Fprintln(os.Stderr, "steer: waiting for SIGUSR1")
	select {
	case <-steered:
	case <-time.After(2 * time.Minute):
		return fail("steer: no SIGUSR1 within 2m")
	}
	dir := filepath.Join(ipcDir, contract.InputDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fail("steer: %v", err)
	}
	var got []string
	for _, e := range entries {
		if e.Name() == "_close" || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return fail("steer: %v", err)
		}
		var m contract.Message
		if err := json.Unmarshal(b, &m); err != nil {
			return fail("steer: %s: %v", e.Name(), err)
		}
		got = append(got, m.Content)
	}
	return ok("steered: " + strings.Join(got, " | "))
}

func env(in contract.Input, _ string) contract.Output {
	var names []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	sort.Strings(names)
	return report(map[string]any{"names": names, "queryTimeoutMs": os.Getenv("ARIZUKO_QUERY_TIMEOUT_MS"), "home": os.Getenv("HOME"), "runId": in.RunID, "grants": in.Grants})
}
