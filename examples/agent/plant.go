package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/arizuko/arizukod/contract"
)

// plant is the hostile agent of the project's tests: it plants symlinks to a path of the
// host where arizukod writes on its behalf, in the IPC directory it shares with the daemon,
// and keeps them there (or keeps swapping them) for a while, ignoring _close. arizukod must
// never follow them. What it plants:
//
//	plant close TARGET DUR   input/_close is a link to TARGET (the soft deadline's sentinel)
//	plant input TARGET DUR   input/ is a link to TARGET (steering and the sentinel go there)
//	plant race TARGET DUR    input/, the sockets and sidecars/ are swapped for links to
//	                         TARGET and back, over and over, while the daemon works
//	plant child NAME:TARGET DUR
//	                         the same with /workspace/NAME, a child group's folder (which
//	                         an ancestor's agent can write), while the daemon runs the child
//
// It says "plant: planted" on stderr once the links are in place, then answers after DUR.
func plant(_ contract.Input, arg string) contract.Output {
	f := strings.Fields(arg)
	if len(f) != 3 {
		return fail("plant: want MODE TARGET DURATION, got %q", arg)
	}
	mode, target := f[0], f[1]
	d, err := time.ParseDuration(f[2])
	if err != nil {
		return fail("plant: %v", err)
	}
	input := filepath.Join(ipcDir, contract.InputDir)
	switch mode {
	case "close":
		os.Remove(filepath.Join(input, "_close"))
		if err := os.Symlink(target, filepath.Join(input, "_close")); err != nil {
			return fail("plant: %v", err)
		}
	case "input":
		if err := swapForLink(input, target); err != nil {
			return fail("plant: %v", err)
		}
	case "race":
		var paths []string
		for _, name := range []string{contract.InputDir, contract.ModelSocket, contract.EgressSocket, contract.RouterSocket, contract.SidecarDir} {
			paths = append(paths, filepath.Join(ipcDir, name))
		}
		return race(paths, target, d)
	case "child":
		name, t, found := strings.Cut(target, ":")
		if !found {
			return fail("plant child: want NAME:TARGET, got %q", target)
		}
		return race([]string{filepath.Join("/workspace", filepath.Clean("/"+name))}, t, d)
	default:
		return fail("plant: unknown mode %q (close, input, race, child)", mode)
	}
	fmt.Fprintln(os.Stderr, "plant: planted")
	time.Sleep(d)
	return ok("planted " + mode)
}

// race swaps each of paths for a link to target and back, over and over, for d.
func race(paths []string, target string, d time.Duration) contract.Output {
	done := time.Now().Add(d)
	fmt.Fprintln(os.Stderr, "plant: planted")
	swaps := 0
	for time.Now().Before(done) {
		for _, p := range paths {
			if swapForLink(p, target) == nil {
				swaps++
				time.Sleep(time.Millisecond)
				os.Remove(p)
				os.Rename(p+".away", p)
			}
		}
	}
	return ok(fmt.Sprintf("swapped %d times", swaps))
}

// swapForLink moves p aside (to p.away) and puts a link to target in its place.
func swapForLink(p, target string) error {
	if err := os.Rename(p, p+".away"); err != nil {
		return err
	}
	return os.Symlink(target, p)
}
