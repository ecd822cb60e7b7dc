package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/arizuko/arizukod/contract"
)

// The commands of this file let a test choose when an agent acts and what it leaks.
func init() {
	commands["await"] = await
	commands["all"] = all
	commands["leak"] = leak
}

// await waits for SIGUSR1 (a steer), then runs the rest of the message as a command: it
// lets a test make the agent act at a moment it chooses, such as after a daemon restart.
func await(in contract.Input, arg string) contract.Output {
	fmt.Fprintln(os.Stderr, "await: waiting for SIGUSR1")
	select {
	case <-steered:
	case <-time.After(2 * time.Minute):
		return fail("await: no SIGUSR1 within 2m")
	}
	return runCommand(in, arg)
}

// all runs commands separated by " ;; " one after the other and answers a JSON list of
// their answers.
func all(in contract.Input, arg string) contract.Output {
	var outs []contract.Output
	for _, c := range strings.Split(arg, " ;; ") {
		outs = append(outs, runCommand(in, c))
	}
	return report(outs)
}

func runCommand(in contract.Input, text string) contract.Output {
	cmd, arg, _ := strings.Cut(strings.TrimSpace(text), " ")
	run, ok := commands[cmd]
	if !ok {
		return fail("unknown command %q", cmd)
	}
	return run(in, strings.TrimSpace(arg))
}

// leak reads variable NAME from the credentials file the daemon mounts and spreads its
// value wherever an agent's words go: stderr, an outbox message (send_message), the
// answer's result and error and the session id. It is the hostile agent of the redaction
// test, which then looks for the value everywhere the daemon stores or logs text.
func leak(_ contract.Input, name string) contract.Output {
	b, err := os.ReadFile("/workspace/env-dir/env")
	if err != nil {
		return fail("leak: %v", err)
	}
	var value string
	for _, line := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(line, name+"="); found {
			value = strings.Trim(v, "'")
		}
	}
	if value == "" {
		return fail("leak: %s is not in the credentials file", name)
	}
	fmt.Fprintln(os.Stderr, "leak: "+value)
	args, _ := json.Marshal(map[string]string{"chat_jid": "leak@test", "text": "leak: " + value})
	sent := mcpRun(routerSocket, "send_message "+string(args))
	return contract.Output{Status: contract.StatusOK, Result: "leak: " + value + " " + sent.Result + sent.Error,
		Error: "leak: " + value, NewSessionID: "leak-" + value}
}
