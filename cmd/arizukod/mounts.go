package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/runtime/runner"
)

// errRejected makes the exit status 1 after the table has been printed.
var errRejected = errors.New("mounts rejected")

func cmdMounts(ctx context.Context, args []string) error { return runMounts(ctx, args, os.Stdout) }

// runMounts is `arizukod mounts`; the table goes to stdout.
func runMounts(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("mounts", "--folder F [--data-dir D] [--allowlist FILE]")
	var lf localFlags
	lf.register(fs)
	folder := fs.String("folder", "", "group folder (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := groupfolder.Parse(*folder)
	if err != nil {
		return fmt.Errorf("--folder: %w", err)
	}
	sys, err := lf.offline(ctx)
	if err != nil {
		return err
	}
	defer sys.Close()
	b := sys.Builder
	plan, err := b.Plan(ctx, f)
	if err != nil {
		return err
	}
	dirs, err := b.Layout.Paths(f)
	if err != nil {
		return err
	}
	var project []engine.Mount
	if b.Projects != nil {
		if project, err = b.Projects.Mounts(ctx, f); err != nil {
			return err
		}
	}
	table := runner.MountTable(f, dirs, runner.NewMountOptions(b.Layout, sys.SkillsDir, sys.WebDir), project, runner.ExtraMounts(plan.Mounts))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST PATH\tCONTAINER PATH\tMODE\tORIGIN")
	for _, m := range table {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", safeLine(m.Source), safeLine(m.Target), mode, safeLine(m.Origin))
	}
	tw.Flush()
	if errors.Is(b.AllowlistErr, mountsec.ErrNoAllowlist) && len(plan.Config.AdditionalMounts) > 0 {
		fmt.Fprintf(stdout, "\nno allowlist at %s: no additional mounts are allowed\n", sys.Config.Allowlist)
	}
	if len(plan.Rejected) == 0 {
		return nil
	}
	fmt.Fprintln(stdout, "\nREJECTED")
	for _, r := range plan.Rejected {
		fmt.Fprintf(stdout, "  %s -> %s: %s\n", safeLine(r.Request.HostPath), safeLine(r.Request.ContainerPath), safeLine(r.Err.Error()))
	}
	return errRejected
}
