package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/arizuko/arizukod/assembly"
	"github.com/arizuko/arizukod/groupfolder"
)

// cmdPrompt prints exactly the memory part of the system prompt a turn of a group would
// get, built by the turn.Builder the daemon assembles from the same configuration (its
// data_dir, timezone and [memory]) (memory/README.md describes it); the
// daemon adds the <grants> section from its store. Nothing else goes to stdout. On a terminal the control characters of the agent's memory files show as
// escapes (safeText) instead of acting on it.
func cmdPrompt(ctx context.Context, args []string) error {
	return runPrompt(ctx, args, os.Stdout, os.Stderr)
}

func runPrompt(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("prompt", "--folder F [--sender JID] [--now YYYY-MM-DD] [--tz ZONE] [--config FILE] [--data-dir D]")
	fs.SetOutput(stderr)
	var (
		folder  = fs.String("folder", "", "group folder, e.g. main or main/research (required)")
		sender  = fs.String("sender", "", "sender JID of the message: selects the user layer")
		now     = fs.String("now", "", "the turn's date, YYYY-MM-DD (default: today)")
		tz      = fs.String("tz", "", "time zone that decides which day it is, e.g. Europe/Berlin (default: timezone of the configuration)")
		verbose = fs.Bool("verbose", false, "log every skipped file to stderr")
		lf      localFlags
	)
	fs.StringVar(&lf.config, "config", "", "the daemon's configuration file, whose data_dir, timezone and [memory] apply (default: as arizukod serve)")
	fs.StringVar(&lf.dataDir, "data-dir", "", "data directory (default: data_dir of the configuration, $DATA_DIR)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := groupfolder.Parse(*folder)
	if err != nil {
		return fmt.Errorf("--folder: %w", err)
	}
	cfg, err := lf.load()
	if err != nil {
		return err
	}
	loc := cfg.Location
	if *tz != "" {
		if loc, err = time.LoadLocation(*tz); err != nil {
			return fmt.Errorf("--tz: %w", err)
		}
	}
	at := time.Now().In(loc)
	if *now != "" {
		d, err := time.ParseInLocation("2006-01-02", *now, loc)
		if err != nil {
			return fmt.Errorf("--now %q: want a date as YYYY-MM-DD", *now)
		}
		at = time.Date(d.Year(), d.Month(), d.Day(), 12, 0, 0, 0, loc)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	sys, err := assembly.New(ctx, cfg, assembly.Options{Mode: assembly.Offline,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))})
	if err != nil {
		return err
	}
	defer sys.Close()
	b := *sys.Builder
	b.Location, b.Now = loc, func() time.Time { return at }
	p, err := b.Prompt(ctx, f, *sender)
	if err != nil {
		return err
	}
	if isTerminal(stdout) {
		p = safeText(p, "")
	}
	_, err = io.WriteString(stdout, p)
	return err
}
