// Command arizukod runs AI agent turns in hardened, throw-away containers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"syscall"
	"time"
)

// command is one subcommand: its one-line summary and its entry point.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{
	"serve":   {"run the daemon (socket-activated under systemd, or on its own socket)", cmdServe},
	"run":     {"run one turn and print its result JSON", cmdRun},
	"runs":    {"list, show and kill runs of the daemon", cmdRuns},
	"groups":  {"list, register and remove groups, set their grants and projects", cmdGroups},
	"inbox":   {"list a group's pending messages, put one into its inbox, or hand one to the routes", cmdInbox},
	"tasks":   {"list the tasks agents scheduled; pause, resume or cancel one", cmdTasks},
	"unpark":  {"let a parked group's inbox run again", cmdUnpark},
	"usage":   {"what the groups' model usage cost today, this month and since a date, per group and model", cmdUsage},
	"chat":    {"talk to a group's agent from the terminal: each line is a message, the replies print as they come", cmdChat},
	"outbox":  {"list the outbound messages and their delivery, follow them, ack, fail or retry one", cmdOutbox},
	"routes":  {"list, add and delete the operator's routes of inbound messages", cmdRoutes},
	"doctor":  {"check the engine, directories and journald, with the command that fixes each failure", cmdDoctor},
	"image":   {"make the agent images: Claude Code's (image build claude), or one from a static binary", cmdImage},
	"version": {"print the version", cmdVersion},
	"prompt":  {"print the system prompt a turn of a group would get", cmdPrompt},
	"mounts":  {"print the mount table a turn of a group would get, and every rejected mount", cmdMounts},
	"quadlet": {"write Podman Quadlet units that reproduce a turn of a group and its sidecars", cmdQuadlet},
	"prune":   {"remove old runs, inbox and outbox rows and run logs by the retention rules", cmdPrune},
	"backup":  {"write a consistent copy of the store to a file", cmdBackup},
	"node":    {"serve a Kubernetes node's turn Pods their sockets, relayed to the central arizukod (the DaemonSet)", cmdNode},
	"kube":    {"what the central gives a Kubernetes cluster: kube node-cert, a node's relay certificate", cmdKube},
	"status":  {"say what the daemon runs with and whether it can start turns; --wait for one just started", cmdStatus},
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// errUsage marks a command-line mistake: exit status 2, the usage already printed.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runMain(ctx, os.Args[1:]))
}

func runMain(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "arizukod: unknown command %q\n\n", args[0])
		usage()
		return 2
	}
	err := c.run(ctx, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, errTurnFailed), errors.Is(err, errRejected), errors.Is(err, errNotReady):
		return 1
	case errors.Is(err, errInterrupted):
		return 130
	}
	// An error may quote what an agent wrote (a daemon's answer, a file name).
	fmt.Fprintf(os.Stderr, "arizukod %s: %s\n", args[0], safeText(err.Error(), ""))
	if hint := explain(err); hint != "" {
		fmt.Fprintln(os.Stderr, hint)
	}
	return 1
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: arizukod <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'arizukod <command> --help' for a command's flags.")
}

// newFlags returns a FlagSet whose parse errors and --help print the command's usage.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: arizukod %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, mapping a parse error to errUsage and rejecting stray arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "arizukod %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}

func cmdVersion(ctx context.Context, args []string) error {
	fs := newFlags("version", "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Println("arizukod", version)
	return nil
}

// duration is a flag.Value for a time.Duration whose error says how to write one: a bare
// number is "use 5s", not the flag package's "parse error".
type duration time.Duration

func (d *duration) String() string { return time.Duration(*d).String() }

func (d *duration) Set(v string) error {
	p, err := time.ParseDuration(v)
	if err == nil {
		*d = duration(p)
		return nil
	}
	if _, nerr := strconv.ParseFloat(v, 64); nerr == nil {
		return fmt.Errorf("a duration needs its unit: use %ss (or m, h)", v)
	}
	return errors.New("not a duration: use e.g. 90s, 5m or 1h30m")
}

// durationFlag registers a duration flag (default 0) with duration's errors.
func durationFlag(fs *flag.FlagSet, name, usage string) *time.Duration {
	var d duration
	fs.Var(&d, name, usage)
	return (*time.Duration)(&d)
}
