package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/retention"
	"github.com/arizuko/arizukod/store"
)

func cmdPrune(ctx context.Context, args []string) error { return runPrune(ctx, args, os.Stdout) }

// runPrune is `arizukod prune`: POST /v1/prune, or, with no daemon listening, the same on
// the store of the configuration directly.
func runPrune(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("prune", "[--dry-run] [--json] [--socket S] [--config FILE]")
	socket := socketFlag(fs)
	cfgPath := fs.String("config", "", "the configuration whose [retention] rules and data_dir apply when no daemon listens (default: the daemon's)")
	dry := fs.Bool("dry-run", false, "count what would be pruned, remove nothing")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rep, err := apiwire.NewClient(*socket).Prune(ctx, *dry)
	if daemonAbsent(err) {
		fmt.Fprintf(os.Stderr, "arizukod prune: no daemon at %s: pruning its store directly\n", *socket)
		rep, err = pruneDirect(ctx, *cfgPath, *dry)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return upkeepJSON(stdout, rep)
	}
	verb := "pruned"
	if rep.DryRun {
		verb = "would prune"
	}
	fmt.Fprintf(stdout, "%s %d runs, %d inbox messages, %d outbox items, %d run logs (%s)\n",
		verb, rep.Runs, rep.Inbox, rep.Outbox, rep.Logs, upkeepSize(rep.LogBytes))
	if !rep.DryRun {
		how := "no vacuum needed"
		if rep.Vacuumed {
			how = "vacuumed"
		}
		fmt.Fprintf(stdout, "database: %s -> %s (%s)\n", upkeepSize(rep.DBBytesBefore), upkeepSize(rep.DBBytesAfter), how)
	}
	for _, e := range rep.LogErrors {
		fmt.Fprintf(stdout, "run logs not pruned: %s\n", safeLine(e))
	}
	return nil
}

// pruneDirect prunes the store directly and reports it as the API would.
func pruneDirect(ctx context.Context, cfgPath string, dry bool) (apiwire.PruneReport, error) {
	cfg, layout, st, err := openStoreDirect(ctx, cfgPath)
	if err != nil {
		return apiwire.PruneReport{}, err
	}
	defer st.Close()
	rep, err := retention.Prune(ctx, st, layout, cfg.Retention, time.Now(), dry)
	return apiwire.PruneReport(rep), err
}

func cmdBackup(ctx context.Context, args []string) error { return runBackup(ctx, args, os.Stdout) }

// backupResult is what `arizukod backup --json` prints.
type backupResult struct {
	File   string `json:"file"`
	Bytes  int64  `json:"bytes"`
	Direct bool   `json:"direct"` // copied from the store file, no daemon listening
}

// runBackup is `arizukod backup FILE`: a consistent copy of the store (POST /v1/backup, or
// the store file directly when no daemon listens), written beside FILE, checked and renamed
// over it: FILE is the old copy or the new one, never half of one.
func runBackup(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("backup", "FILE [--json] [--socket S] [--config FILE]")
	socket := socketFlag(fs)
	cfgPath := fs.String("config", "", "the configuration whose data_dir is copied when no daemon listens (default: the daemon's)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(fs.Output(), "arizukod backup: FILE is required: where to write the copy")
		fs.Usage()
		return errUsage
	}
	file := fs.Arg(0)
	if err := parseFlags(fs, fs.Args()[1:]); err != nil {
		return err
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory: give the backup's file name, like %s", abs, filepath.Join(abs, "arizukod.db"))
	}
	tmp, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".tmp-*")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(tmp.Name())
	res := backupResult{File: abs}
	res.Bytes, err = apiwire.NewClient(*socket).Backup(ctx, tmp)
	tmp.Close()
	if daemonAbsent(err) {
		fmt.Fprintf(os.Stderr, "arizukod backup: no daemon at %s: copying its store directly\n", *socket)
		res.Direct = true
		os.Remove(tmp.Name())
		res.Bytes, err = backupDirect(ctx, *cfgPath, tmp.Name())
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := store.Verify(ctx, tmp.Name()); err != nil {
		return fmt.Errorf("backup: the copy is not a sound database, %s is left as it was: %w", abs, err)
	}
	if err := syncFile(tmp.Name()); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(tmp.Name(), abs); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if *asJSON {
		return upkeepJSON(stdout, res)
	}
	fmt.Fprintf(stdout, "wrote %s (%s)\n", abs, upkeepSize(res.Bytes))
	return nil
}

func backupDirect(ctx context.Context, cfgPath, path string) (int64, error) {
	_, _, st, err := openStoreDirect(ctx, cfgPath)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	if err := st.Backup(ctx, path); err != nil {
		return 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// openStoreDirect opens the store of the configuration at cfgPath (the daemon's default
// when ""), which must exist: a mistaken data_dir must not get a new, empty store.
func openStoreDirect(ctx context.Context, cfgPath string) (*config.Config, groupfolder.Layout, *store.Store, error) {
	cfg, err := config.Load(serviceMode(), cfgPath, os.Getenv)
	if err != nil {
		return nil, groupfolder.Layout{}, nil, err
	}
	layout, err := groupfolder.NewLayout(cfg.DataDir)
	if err != nil {
		return nil, layout, nil, fmt.Errorf("data_dir: %w", err)
	}
	path, err := layout.StorePath()
	if err != nil {
		return nil, layout, nil, err
	}
	if _, err := os.Stat(path); err != nil {
		return nil, layout, nil, fmt.Errorf("no store at %s (data_dir of %s): start the daemon, or name its configuration with --config", path, cfg.Source)
	}
	st, err := store.Open(ctx, path)
	return cfg, layout, st, err
}

// daemonAbsent reports whether err says nothing listens on the socket: no socket file, or
// nobody accepting on it.
func daemonAbsent(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func upkeepJSON(w io.Writer, v any) error {
	enc := indentedJSON(w)
	return enc.Encode(v)
}

// upkeepSize prints n bytes for a person.
func upkeepSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
