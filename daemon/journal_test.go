package daemon_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/internal/daemontest"
)

// ended is the journal entry that records how a turn ended.
func ended(es []daemontest.Entry) daemontest.Entry {
	for _, e := range es {
		if e["ARIZUKO_STATUS"] != "" {
			return e
		}
	}
	return nil
}

// TestJournal reads a real journald: every turn is found by ARIZUKO_RUN_ID with its folder,
// container, status, exit code and duration; the container's stderr lines come with the
// same run fields; ARIZUKO_FOLDER selects one group's turns.
func TestJournal(t *testing.T) {
	daemontest.JournalOn(t)
	d := daemontest.New(t, daemontest.Config{Engine: daemontest.Podman4(t)})
	d.Start(t)
	d.AddGroup(t, "main")
	d.AddGroup(t, "other")
	word := "hello-" + daemontest.RandHex(4)
	// An agent's own error text is the agent's: the journal says the turn failed and how;
	// ARIZUKO_ERROR carries only the daemon's reasons (a failure class).
	oops := "oops-" + daemontest.RandHex(4)
	turns := []struct {
		run                    api.Run
		status, exit, priority string
		failure, errorHas      string
	}{
		{run: d.Turn(t, "main", "stderr "+word), status: "ok", exit: "0", priority: "6"},
		{run: d.Turn(t, "main", "error "+oops), status: "error", exit: "0", priority: "4"},
		{run: d.Turn(t, "main", "exit 3"), status: "fatal", exit: "3", priority: "4", failure: "no-output", errorHas: "no output block"},
		{run: d.Turn(t, "other", "reply x"), status: "ok", exit: "0", priority: "6"},
	}
	pid := strconv.Itoa(d.Pid())
	var slowest time.Duration
	for _, c := range turns {
		r := c.run
		t0 := time.Now()
		es := daemontest.WaitJournal(t, 5*time.Second, func(es []daemontest.Entry) bool { return ended(es) != nil }, "ARIZUKO_RUN_ID="+r.ID)
		slowest = max(slowest, time.Since(t0))
		end := ended(es)
		for _, e := range es {
			if e["SYSLOG_IDENTIFIER"] != "arizukod" || e["ARIZUKO_FOLDER"] != r.Folder || e["_PID"] != pid {
				t.Errorf("run %s: entry %q: SYSLOG_IDENTIFIER %q ARIZUKO_FOLDER %q _PID %q", r.ID, e["MESSAGE"], e["SYSLOG_IDENTIFIER"], e["ARIZUKO_FOLDER"], e["_PID"])
			}
			if e["ARIZUKO_CONTAINER"] != "" && e["ARIZUKO_CONTAINER"] != r.Container {
				t.Errorf("run %s: entry %q names container %q, the run's is %q", r.ID, e["MESSAGE"], e["ARIZUKO_CONTAINER"], r.Container)
			}
		}
		if started := daemontest.Find(es, "turn started"); started == nil || started["ARIZUKO_CONTAINER"] != r.Container {
			t.Errorf("run %s: no \"turn started\" entry naming %s: %v", r.ID, r.Container, started)
		}
		want := map[string]string{"ARIZUKO_CONTAINER": r.Container, "ARIZUKO_STATUS": c.status, "ARIZUKO_EXIT_CODE": c.exit,
			"PRIORITY": c.priority, "ARIZUKO_FAILURE": c.failure}
		for k, v := range want {
			if end[k] != v {
				t.Errorf("run %s (%s): %s = %q, want %q", r.ID, c.status, k, end[k], v)
			}
		}
		if ms, err := strconv.Atoi(end["ARIZUKO_DURATION_MS"]); err != nil || ms <= 0 {
			t.Errorf("run %s: ARIZUKO_DURATION_MS %q", r.ID, end["ARIZUKO_DURATION_MS"])
		}
		if !strings.Contains(end["ARIZUKO_ERROR"], c.errorHas) {
			t.Errorf("run %s: ARIZUKO_ERROR %q, want it to hold %q", r.ID, end["ARIZUKO_ERROR"], c.errorHas)
		}
	}
	line := daemontest.Find(daemontest.WaitJournal(t, 5*time.Second, daemontest.HasMessage(word), "ARIZUKO_RUN_ID="+turns[0].run.ID), word)
	if line["ARIZUKO_STREAM"] != "stderr" || line["ARIZUKO_CONTAINER"] != turns[0].run.Container {
		t.Errorf("forwarded stderr line: ARIZUKO_STREAM %q ARIZUKO_CONTAINER %q, want stderr and %s", line["ARIZUKO_STREAM"], line["ARIZUKO_CONTAINER"], turns[0].run.Container)
	}

	main, err := daemontest.Journal("ARIZUKO_FOLDER=main", "_PID="+pid)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range main {
		seen[e["ARIZUKO_RUN_ID"]] = true
		if e["ARIZUKO_FOLDER"] != "main" {
			t.Errorf("ARIZUKO_FOLDER=main selects %v", e)
		}
	}
	for i, c := range turns {
		if seen[c.run.ID] != (i < 3) {
			t.Errorf("journalctl ARIZUKO_FOLDER=main: run %s of %s listed %v", c.run.ID, c.run.Folder, seen[c.run.ID])
		}
	}
	t.Logf("journal: %d entries of folder main over 3 turns; each turn's end readable within %s of its end", len(main), slowest.Round(time.Millisecond))
}

// TestNoSecretLeak gives the daemon a credential (GH_TOKEN) in its env file. The containers get it in
// /workspace/env-dir/env (read-only); the database holds none of it; and when the agent
// itself prints it on stderr or puts it in its error, neither the journal, the run logs nor
// the daemon's stderr show it.
func TestNoSecretLeak(t *testing.T) {
	daemontest.JournalOn(t)
	secret := "ghp_test_" + daemontest.RandHex(12)
	d := daemontest.New(t, daemontest.Config{Engine: daemontest.Podman4(t), EnvFile: "GH_TOKEN=" + secret + "\nNOT_PASSED=x\n"})
	d.Start(t)
	d.AddGroup(t, "main")

	envPath := filepath.Join(d.DataDir, "env", "env")
	b, err := os.ReadFile(envPath)
	if err != nil || !bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("NOT_PASSED")) {
		t.Fatalf("%s: %v\n%s", envPath, err, b)
	}
	if fi, err := os.Stat(envPath); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("%s: mode %v %v, want no access for group and others", envPath, fi.Mode(), err)
	}
	run := d.Turn(t, "main", "sandbox")
	var sb struct {
		Mounts []struct {
			Target string `json:"target"`
			RO     bool   `json:"ro"`
		} `json:"mounts"`
	}
	if err := json.Unmarshal([]byte(run.Result), &sb); err != nil {
		t.Fatalf("sandbox report %q: %v", run.Result, err)
	}
	mounted := false
	for _, m := range sb.Mounts {
		if m.Target == "/workspace/env-dir/env" {
			mounted = m.RO
		}
	}
	if !mounted {
		t.Errorf("/workspace/env-dir/env is not mounted read-only: %+v", sb.Mounts)
	}
	for _, f := range []string{"arizukod.db", "arizukod.db-wal", "arizukod.db-shm"} {
		if b, err := os.ReadFile(filepath.Join(d.DataDir, f)); err == nil && bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the secret", f)
		}
	}

	// The agent has the secret and tries to hand it to the daemon's logs.
	for _, msg := range []string{"stderr " + secret, "error " + secret, "fatal " + secret} {
		d.Turn(t, "main", msg)
	}
	es := daemontest.WaitJournal(t, 5*time.Second, func(es []daemontest.Entry) bool {
		n := 0
		for _, e := range es {
			if e["ARIZUKO_STATUS"] != "" {
				n++
			}
		}
		return n == 4
	}, "_PID="+strconv.Itoa(d.Pid()))
	redacted := 0
	for _, e := range es {
		for k, v := range e {
			if strings.Contains(v, secret) {
				t.Errorf("journal entry %q: %s holds the secret", e["MESSAGE"], k)
			}
			if strings.Contains(v, "[REDACTED:GH_TOKEN]") {
				redacted++
			}
		}
	}
	if redacted == 0 {
		t.Errorf("no journal entry shows [REDACTED:GH_TOKEN]: the stderr line was not forwarded")
	}
	logs := 0
	filepath.WalkDir(filepath.Join(d.DataDir, "groups"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.Contains(p, "/logs/") {
			return err
		}
		logs++
		if b, err := os.ReadFile(p); err != nil || bytes.Contains(b, []byte(secret)) {
			t.Errorf("run log %s holds the secret (%v)", p, err)
		}
		return nil
	})
	d.Stop(t)
	if b, err := os.ReadFile(d.StderrLog); err != nil || bytes.Contains(b, []byte(secret)) {
		t.Errorf("the daemon's stderr holds the secret (%v)", err)
	}
	t.Logf("secret: in the env file only; %d journal entries and %d run logs clean, %d redactions in the journal", len(es), logs, redacted)
}
