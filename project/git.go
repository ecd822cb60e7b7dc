package project

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// safeFlags go before every git command the daemon runs: no hook, no fsmonitor, whatever
// a config says.
var safeFlags = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}

// gitEnv is the environment of the daemon's git: no system config, no prompt, no
// repository named by the daemon's own environment.
func gitEnv(extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"LC_ALL=C",
	}
	if h, ok := os.LookupEnv("HOME"); ok {
		env = append(env, "HOME="+h)
	}
	return append(env, extra...)
}

// gitError is a git command that failed, with what it said.
type gitError struct {
	args   []string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.args, " "), msg)
}

func (e *gitError) Unwrap() error { return e.err }

// git runs git with args in dir (or none) and returns its standard output, trimmed.
func git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, safeFlags...), args...)...)
	cmd.Dir = dir
	cmd.Env = gitEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("git is not installed on the host: %w", err)
		}
		return stdout.String(), &gitError{args: args, stderr: stderr.String(), err: err}
	}
	return strings.TrimSpace(stdout.String()), nil
}
