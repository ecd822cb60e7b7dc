// Command agent is the example arizuko agent: the reference for people who write agent
// images. It reads one turn from stdin (contract.Input), does what the last message says,
// and prints its answer between the contract's markers.
//
// It is also the test fixture of the project, so the message text steers it. The first word
// of the last message is a command; anything else is answered with an echo:
//
//	reply TEXT        answer TEXT
//	noop              answer nothing, at once
//	error TEXT        answer with status error
//	fatal TEXT        answer with status fatal
//	sleep DURATION    sleep, then answer; ends early when the _close sentinel appears
//	hang DURATION     sleep, ignoring the _close sentinel
//	exit CODE         exit with CODE, printing nothing
//	silent            exit 0, printing nothing
//	noise             print lines of noise before the answer
//	badjson           print invalid JSON between the markers
//	flood SIZE        print SIZE bytes of noise (e.g. 8MB), or "forever", then answer
//	oom               allocate memory until the kernel kills it
//	sandbox           answer a JSON report of its own sandbox (see sandbox.go)
//	dial HOST:PORT    answer whether a TCP connection to HOST:PORT opens within 3 s
//	threads           answer how many threads a child could hold before the kernel refused one (the pids limit)
//	write PATH TEXT   write TEXT into PATH (relative to /workspace), answer the path
//	steer             wait for SIGUSR1, then answer the steering messages it finds
//	env               answer the names of its environment variables and the query timeout
//	stderr TEXT       print TEXT on stderr, then answer
//	mcp TOOL [JSON]   call TOOL through the daemon's MCP socket (mcp list: the tools; mcp-socket PATH ...: a sidecar's)
//	model TEXT        ask the model through the gateway (model.sock), streamed; answer its text
//	model-as TOK TEXT the same with another token; model-raw METHOD PATH: a bare request
//	model-burst N TEXT ask the model N times at once; answer the status of each answer
//	model-seq N TEXT  ask the model N times one after another; answer each status
//	fetch URL         get URL through the egress proxy (egress.sock); answer status and body
//	fetch-auth VAR URL  the same, sending "Authorization: Bearer $VAR"
//	token             answer the turn's model token
//	scan PREFIX       answer where PREFIX appears in its environment and readable files
//	messages          answer the turn's messages (sender, chat, time, content) and its chat
//	plant MODE T DUR  plant symlinks to the host path T in the IPC directory (see plant.go)
//	prepared          answer "warm" when it was started ahead of its turn, else "fresh"
//
// It can be a warm agent (contract.PrepareLabel): when its first line is a prepare line, it
// prints contract.ReadyMarker (after DURATION when the system prompt is "ready-after
// DURATION") and reads the turn's line that follows. Its own image does
// not declare the label, so arizukod starts it at its turn; an image that adds the label
// (`LABEL io.arizuko.prepare=1`) has it started ahead.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/arizuko/arizukod/contract"
)

// ipcDir is where arizukod mounts the group's IPC directory.
const ipcDir = contract.IPCDir

// steered receives SIGUSR1, arizukod's signal that steering messages wait in the IPC input
// directory. An agent must catch it from its start: its default action ends the process.
var steered = make(chan os.Signal, 1)

func main() {
	if os.Getenv(threadsChild) != "" {
		holdThreads()
	}
	signal.Notify(steered, syscall.SIGUSR1)
	stdin := bufio.NewReaderSize(os.Stdin, 64<<10)
	in, err := readInput(stdin)
	if err == nil && in.Prepare {
		// A warm agent: whatever the agent sets up from the prepare line (the session, the
		// system prompt) is done here, then it says it is ready and waits for its turn. As
		// the test fixture, a system prompt "ready-after DURATION" makes it slow to get ready.
		warm = true
		if d, ok := strings.CutPrefix(in.SystemPrompt, "ready-after "); ok {
			if wait, err := time.ParseDuration(d); err == nil {
				time.Sleep(wait)
			}
		}
		fmt.Println(contract.ReadyMarker)
		in, err = readInput(stdin)
	}
	if err != nil {
		answer(contract.Output{Status: contract.StatusFatal, Error: err.Error()})
		return
	}
	text := ""
	if n := len(in.Messages); n > 0 {
		text = strings.TrimSpace(in.Messages[n-1].Content)
	}
	cmd, arg, _ := strings.Cut(text, " ")
	run, ok := commands[cmd]
	if !ok {
		answer(contract.Output{Status: contract.StatusOK, Result: "echo: " + text, NewSessionID: sessionOf(in)})
		return
	}
	out := run(in, strings.TrimSpace(arg))
	if out.Status == "" {
		return
	}
	if out.NewSessionID == "" {
		out.NewSessionID = sessionOf(in)
	}
	answer(out)
}

// warm says the agent was started ahead of its turn, with a prepare line.
var warm bool

func readInput(br *bufio.Reader) (contract.Input, error) {
	line, err := br.ReadBytes('\n')
	if err != nil && (err != io.EOF || len(line) == 0) {
		return contract.Input{}, fmt.Errorf("read stdin: %w", err)
	}
	var in contract.Input
	if err := json.Unmarshal(line, &in); err != nil {
		return contract.Input{}, fmt.Errorf("decode stdin: %w", err)
	}
	return in, nil
}

// sessionOf keeps the session the turn came with, or starts one named after the folder.
func sessionOf(in contract.Input) string {
	if in.SessionID != "" {
		return in.SessionID
	}
	return "example-" + strings.ReplaceAll(in.Folder, "/", "-")
}

func answer(out contract.Output) {
	os.Stdout.Write(contract.WriteOutput(out))
}
