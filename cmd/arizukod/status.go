package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
)

// errNotReady is `status` on a daemon that answers but cannot start turns: exit status 1,
// the report already printed.
var errNotReady = errors.New("the daemon cannot start turns")

// cmdStatus is `arizukod status`: what the daemon on the socket runs with, and whether it
// can start turns. With --wait it first waits for a daemon that is still starting, so a
// script can start `serve` in the background and go on once it answers.
func cmdStatus(ctx context.Context, args []string) error {
	fs := newFlags("status", "[--wait DURATION] [--json]")
	socket := socketFlag(fs)
	wait := durationFlag(fs, "wait", "wait this long for the daemon to answer (e.g. 10s): for a daemon just started")
	asJSON := fs.Bool("json", false, "print the daemon's health report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c := apiwire.NewClient(*socket)
	h, err := healthWhenUp(ctx, c, *wait)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := indentedJSON(os.Stdout).Encode(h); err != nil {
			return err
		}
	} else {
		printStatus(os.Stdout, *socket, h)
	}
	if problem := healthProblem(h); problem != nil {
		if !*asJSON {
			fmt.Fprintln(os.Stderr, safeText(problem.Error(), ""))
		}
		return errNotReady
	}
	return nil
}

// healthWhenUp asks the daemon for its health, trying again for up to wait while nothing
// listens on the socket yet (no socket file, or the connection refused).
func healthWhenUp(ctx context.Context, c *apiwire.Client, wait time.Duration) (apiwire.HealthReport, error) {
	deadline := time.Now().Add(wait)
	for {
		h, err := daemonHealth(ctx, c)
		if err == nil || !notListening(err) || !time.Now().Before(deadline) {
			if err != nil && wait > 0 && notListening(err) {
				return h, fmt.Errorf("no daemon answered within %s: %w", wait, err)
			}
			return h, err
		}
		select {
		case <-ctx.Done():
			return h, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// notListening reports whether err is a dial that found no daemon behind the socket.
func notListening(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && (errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED))
}

// printStatus writes h as the lines an operator reads.
func printStatus(w io.Writer, socket string, h apiwire.HealthReport) {
	fmt.Fprintf(w, "daemon:  %s, version %s, on %s\n", h.Status, safeText(h.Version, ""), socket)
	eng := "not answering"
	if h.Engine.Up {
		eng = fmt.Sprintf("%s %s", h.Engine.Name, h.Engine.Version)
	} else if h.Engine.Error != "" {
		eng += ": " + h.Engine.Error
	}
	if h.Engine.Socket != "" {
		eng += " at " + h.Engine.Socket
	}
	fmt.Fprintf(w, "engine:  %s\n", safeText(eng, ""))
	if h.Engine.Limits != "" {
		fmt.Fprintf(w, "limits:  %s\n", safeText(h.Engine.Limits, ""))
	}
	if h.Image != "" {
		fmt.Fprintf(w, "image:   %s\n", safeText(h.Image, ""))
	}
	model := h.Model.Upstream
	if h.Model.Credential != "" {
		model += ", credential from " + h.Model.Credential
	}
	if h.Model.Error != "" {
		model += "; " + h.Model.Error
	}
	if model != "" {
		fmt.Fprintf(w, "model:   %s\n", safeText(model, ""))
	}
	fmt.Fprintf(w, "turns:   %d running, %d queued\n", h.Running, h.Queued)
}
