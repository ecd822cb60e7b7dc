package store

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// crashExit is the exit code of a helper process that died mid-transaction.
const crashExit = 3

// TestCrashHelper is not a test: crashChild runs the test binary with
// STORE_CRASH_MODE set to make this function do one store operation and then
// exit abruptly, without closing the store, as a killed daemon would.
func TestCrashHelper(t *testing.T) {
	mode := os.Getenv("STORE_CRASH_MODE")
	if mode == "" {
		t.Skip("helper process for the crash tests")
	}
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv("STORE_CRASH_DB"))
	if err != nil {
		t.Fatal(err)
	}
	now, _ := strconv.ParseInt(os.Getenv("STORE_CRASH_NOW"), 10, 64)
	die := func(Task) Run { os.Exit(crashExit); return Run{} }
	dieBuilding := func([]InboxMessage) (Run, error) { os.Exit(crashExit); return Run{}, nil }
	switch mode {
	case "claim-crash-before-commit":
		_, err = s.ClaimDueTasks(ctx, now, every(now, time.Minute), die)
	case "claim-then-crash":
		_, err = s.ClaimDueTasks(ctx, now, every(now, time.Minute), taskRun)
	case "inbox-crash-before-commit":
		_, err = s.CreateInboxRun(ctx, "main", 0, dieBuilding)
	case "inbox-then-crash":
		_, err = s.CreateInboxRun(ctx, "main", 0, buildTurn)
	default:
		t.Fatalf("unknown STORE_CRASH_MODE %q", mode)
	}
	if err != nil {
		t.Fatal(err)
	}
	os.Exit(0)
}

// crashChild runs TestCrashHelper in a new process in the given mode against
// the database at path and returns its exit code.
func crashChild(t *testing.T, path, mode string, now int64) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STORE_CRASH_MODE="+mode, "STORE_CRASH_DB="+path, "STORE_CRASH_NOW="+strconv.FormatInt(now, 10))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if exit.ExitCode() != crashExit {
			t.Logf("helper output:\n%s", out)
		}
		return exit.ExitCode()
	default:
		t.Fatalf("running helper: %v\n%s", err, out)
		return -1
	}
}

// TestTaskClaimExactlyOnceAcrossRestarts: a due task yields exactly one run
// whether the daemon dies before the claim commits, after it, or is simply
// restarted between claiming and running.
func TestTaskClaimExactlyOnceAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "arizuko.db")
	ctx := context.Background()
	now := time.Now().UnixMilli()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTask(ctx, Task{ID: "t_1", Folder: "main", Prompt: "tick", ScheduleKind: ScheduleInterval, ScheduleExpr: "60000", NextRunAt: now}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	if code := crashChild(t, path, "claim-crash-before-commit", now); code != crashExit {
		t.Fatalf("helper exited %d, want %d (a crash mid-claim)", code, crashExit)
	}
	s = openAt(t, path)
	if runs, _ := s.ListRuns(ctx, RunFilter{}); len(runs) != 0 {
		t.Fatalf("a claim that crashed before commit left %d runs", len(runs))
	}
	if tk, _ := s.GetTask(ctx, "t_1"); tk.NextRunAt != now || tk.LastRunID != "" {
		t.Fatalf("a claim that crashed before commit moved the task: %+v", tk)
	}
	s.Close()

	if code := crashChild(t, path, "claim-then-crash", now); code != 0 {
		t.Fatalf("helper exited %d, want 0", code)
	}
	s = openAt(t, path)
	runs, _ := s.ListRuns(ctx, RunFilter{TaskID: "t_1"})
	if len(runs) != 1 || runs[0].State != RunQueued {
		t.Fatalf("after a committed claim and a crash: runs %+v, want one queued", runs)
	}
	tk, _ := s.GetTask(ctx, "t_1")
	if tk.LastRunID != runs[0].ID || tk.NextRunAt != now+60_000 {
		t.Fatalf("task after claim: %+v", tk)
	}
	if again, err := s.ClaimDueTasks(ctx, now, every(now, time.Minute), taskRun); err != nil || len(again) != 0 {
		t.Fatalf("claiming the same slot after restart: %+v, %v; want nothing", again, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A clean restart between the claim and the run: the run is still queued
	// and starts; the slot does not fire again.
	s = openAt(t, path)
	r, err := s.StartNext(ctx, 1)
	if err != nil || r == nil || r.ID != runs[0].ID {
		t.Fatalf("StartNext after restart = %+v, %v; want the task's run", r, err)
	}
	if again, _ := s.ClaimDueTasks(ctx, now+59_999, every(now+59_999, time.Minute), taskRun); len(again) != 0 {
		t.Fatalf("claimed before the next slot: %+v", again)
	}
	if next, _ := s.ClaimDueTasks(ctx, now+60_000, every(now+60_000, time.Minute), taskRun); len(next) != 1 {
		t.Fatalf("next slot: %d claims, want 1", len(next))
	}
}

// TestInboxRunExactlyOnceAcrossCrashes: a crash while making an inbox run
// leaves either nothing or one queued run, never two runs over a message.
func TestInboxRunExactlyOnceAcrossCrashes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "arizuko.db")
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	ids := appendMsgs(t, s, "main", "a", "b")
	s.Close()

	if code := crashChild(t, path, "inbox-crash-before-commit", 0); code != crashExit {
		t.Fatalf("helper exited %d, want %d", code, crashExit)
	}
	s = openAt(t, path)
	if runs, _ := s.ListRuns(ctx, RunFilter{}); len(runs) != 0 {
		t.Fatalf("a crash before commit left %d runs", len(runs))
	}
	s.Close()

	if code := crashChild(t, path, "inbox-then-crash", 0); code != 0 {
		t.Fatalf("helper exited %d, want 0", code)
	}
	s = openAt(t, path)
	runs, _ := s.ListRuns(ctx, RunFilter{})
	if len(runs) != 1 || runs[0].InboxFirst != ids[0] || runs[0].InboxLast != ids[1] || runs[0].State != RunQueued {
		t.Fatalf("after a committed inbox run and a crash: %+v, want one queued run over both messages", runs)
	}
	if r, err := s.CreateInboxRun(ctx, "main", 0, buildTurn); r != nil || err != nil {
		t.Fatalf("second inbox run after restart: %+v, %v; want none", r, err)
	}
}
