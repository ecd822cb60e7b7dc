package main

import (
	"context"
	"fmt"
	"os"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/daemon"
	"github.com/arizuko/arizukod/logging"
	"golang.org/x/term"
)

// serviceMode is the system service for root and system users without a home, a user
// service otherwise; ARIZUKO_MODE=system|user decides explicitly.
func serviceMode() config.Mode {
	switch os.Getenv("ARIZUKO_MODE") {
	case "system":
		return config.ModeSystem
	case "user":
		return config.ModeUser
	}
	if os.Geteuid() == 0 || os.Getenv("INVOCATION_ID") != "" && os.Getenv("XDG_RUNTIME_DIR") == "" {
		return config.ModeSystem
	}
	return config.ModeUser
}

func cmdServe(ctx context.Context, args []string) error {
	fs := newFlags("serve", "[--config FILE]")
	path := fs.String("config", "", "configuration file (default /etc/arizuko/arizukod.toml for the system service, $XDG_CONFIG_HOME/arizuko/arizukod.toml for a user service)")
	debug := fs.Bool("debug", false, "log debug messages")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(serviceMode(), *path, os.Getenv)
	if err != nil {
		return err
	}
	opts := logging.Options{Identifier: "arizukod", Stderr: os.Stderr, Terminal: term.IsTerminal(int(os.Stderr.Fd()))}
	if *debug {
		opts.Level = levelDebug
	}
	if opts.Terminal {
		fmt.Fprintln(os.Stderr, foregroundLogs(logging.Journald(), opts.Identifier))
	}
	reload := daemon.WithReload(func() (*config.Config, error) { return config.Load(serviceMode(), *path, os.Getenv) })
	return daemon.Run(ctx, cfg, version, logging.New(opts), reload)
}

// foregroundLogs is what `serve` in the foreground on a terminal says first: its log lines
// print here, and where else they go, with the journalctl line that finds them (a daemon
// not started by systemd has no unit for `journalctl -u`).
func foregroundLogs(journald bool, ident string) string {
	if !journald {
		return "arizukod serve: logging here only (journald does not answer)"
	}
	return fmt.Sprintf("arizukod serve: logging here and to the journal, where `journalctl -t %s` finds it (one group's turns: journalctl -t %s ARIZUKO_FOLDER=main)", ident, ident)
}
