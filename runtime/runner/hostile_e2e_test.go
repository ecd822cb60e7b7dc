package runner_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/runtime/runner"
)

// hostTree is what a hostile agent aims at: a file and a directory of the host, outside
// every directory the agent can write, which the daemon can write.
type hostTree struct {
	dir, file, subdir string
}

func newHostTree(t *testing.T) hostTree {
	t.Helper()
	h := hostTree{dir: t.TempDir()}
	h.file = filepath.Join(h.dir, "model-token.key")
	h.subdir = filepath.Join(h.dir, "etc")
	if err := os.WriteFile(h.file, []byte("the host's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(h.subdir, 0o700); err != nil {
		t.Fatal(err)
	}
	return h
}

// snapshot is every entry of the tree with its type, mode, owner, size, content and
// modification time.
func (h hostTree) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(h.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%v %d:%d size=%d mtime=%d", fi.Mode(), st.Uid, st.Gid, fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" sha256=%x", sha256.Sum256(b))
		}
		out[p] = line
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (h hostTree) unchanged(t *testing.T, before map[string]string) {
	t.Helper()
	after := h.snapshot(t)
	for p, b := range before {
		if a, ok := after[p]; !ok {
			t.Errorf("host path %s is gone", p)
		} else if a != b {
			t.Errorf("host path %s changed:\n  before %s\n  after  %s", p, b, a)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("host path %s was created", p)
		}
	}
}

// TestHostileLinks runs the hostile example agent on every rootful engine: it plants links
// to host paths where the daemon writes on its behalf (the soft deadline's _close, the
// steering messages, the input directory the next turn clears) or keeps swapping its IPC
// directory's entries for such links while the daemon steers it. No byte, mode or entry of
// the host tree may change, and the turns after it must not be led elsewhere either.
func TestHostileLinks(t *testing.T) {
	enginetest.Long(t, "hostile agents run until their soft and hard deadlines")
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			h := newHarness(t, e, nil)
			for _, tc := range []struct {
				mode, target string
			}{
				{"close", "file"},
				{"input", "dir"},
				{"race", "dir"},
				{"race", "file"},
			} {
				t.Run(tc.mode+"-"+tc.target, func(t *testing.T) {
					t.Parallel()
					host := newHostTree(t)
					target := host.file
					if tc.target == "dir" {
						target = host.subdir
					}
					before := host.snapshot(t)
					folder := "hostile_" + tc.mode + "_" + tc.target
					steers := h.hostileTurn(t, folder, fmt.Sprintf("plant %s %s 20s", tc.mode, target))
					t.Logf("%s: %d steering attempts while the links stood", folder, steers)
					host.unchanged(t, before)
					// The folder's next turn clears what the agent left, never through a link,
					// and runs: an agent cannot lock its own folder out.
					f, _ := groupfolder.Parse(folder)
					res, err := h.runner.Run(context.Background(), runner.Turn{RunID: "after-" + folder, Folder: f,
						Input: contract.Input{Messages: []contract.Message{{Role: "user", Content: "reply after"}}}})
					if err != nil || res.Output.Result != "after" {
						t.Errorf("the next turn: %v %+v", err, res)
					}
					host.unchanged(t, before)
				})
			}
		})
	}
}

// hostileTurn runs message as a turn of folder that reaches its soft deadline while the
// agent's links stand, steering it all the while; it returns how many steers were tried.
func (h *harness) hostileTurn(t *testing.T, folder, message string) int {
	t.Helper()
	f, err := groupfolder.Parse(folder)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		id      string
		planted = make(chan struct{})
		once    sync.Once
	)
	turn := runner.Turn{RunID: "r-" + folder, Folder: f, Timeout: 8 * time.Second,
		Input: contract.Input{Messages: []contract.Message{{Role: "user", Content: message}}},
		OnCreated: func(_, cid string) {
			mu.Lock()
			id = cid
			mu.Unlock()
		},
		OnStderr: func(line string) {
			if strings.Contains(line, "plant: planted") {
				once.Do(func() { close(planted) })
			}
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan runner.Result, 1)
	go func() {
		res, err := h.runner.Run(ctx, turn)
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- res
	}()
	steers := 0
	select {
	case <-planted:
	case res := <-done:
		t.Fatalf("the agent ended before planting: %+v", res)
	}
	for {
		select {
		case res := <-done:
			if res.Failure != runner.FailTimeout {
				t.Errorf("the turn ended %q, want timeout (it ignores _close): %+v", res.Failure, res.Output)
			}
			if b, err := os.ReadFile(res.LogFile); err != nil || !strings.Contains(string(b), "soft deadline") {
				t.Errorf("run log %s: no soft deadline: %v\n%s", res.LogFile, err, b)
			}
			return steers
		case <-time.After(20 * time.Millisecond):
			mu.Lock()
			cid := id
			mu.Unlock()
			h.runner.Steer(ctx, f, cid, []contract.Message{{Role: "user", Content: fmt.Sprintf("steer %d", steers)}})
			steers++
		}
	}
}
