package daemon_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
)

// dbText yields every text cell of every table of db, with its table.column.
func dbText(t *testing.T, db *sql.DB) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		var tables []string
		rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var n string
			rows.Scan(&n)
			tables = append(tables, n)
		}
		rows.Close()
		for _, table := range tables {
			rows, err := db.Query(`SELECT * FROM "` + table + `"`)
			if err != nil {
				t.Fatal(err)
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				for i, v := range vals {
					var s string
					switch v := v.(type) {
					case string:
						s = v
					case []byte:
						s = string(v)
					default:
						continue
					}
					if !yield(table+"."+cols[i], s) {
						rows.Close()
						return
					}
				}
			}
			rows.Close()
		}
	}
}

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
		run                    apiwire.Run
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

// TestNoSecretLeakEverySource: every secret the daemon knows is redacted, whoever echoes
// it: an env file value the allowlist passes into the containers and one it does not, a
// value the env file got before a reload (SIGHUP), a group's own model credential whose
// file was written after the start (read by the group's first turn), and a sidecar's env
// value. The agent echoes them all on stderr, in its answer (the run's result and an
// outbox row), in its error and in a fatal error (the inbox cursor's reason, the parked
// notice): none is in the journal, the run logs, the database file or its WAL, or the
// daemon's stderr. The sidecar's value is in the group's container config, which the
// operator stored: no other row of the database holds it.
func TestNoSecretLeakEverySource(t *testing.T) {
	daemontest.JournalOn(t)
	e := daemontest.Podman4(t)
	credentials := t.TempDir()
	secrets := map[string]string{
		"GH_TOKEN":               "ghp_passed_" + daemontest.RandHex(12),
		"OLD_TOKEN":              "unpassed_" + daemontest.RandHex(12),
		"LATER_TOKEN":            "reloaded_" + daemontest.RandHex(12),
		"credential:team.key":    "sk-group-" + daemontest.RandHex(12),
		"sidecar:echo:API_TOKEN": "sidecar-" + daemontest.RandHex(12),
	}
	d := daemontest.New(t, daemontest.Config{Engine: e,
		EnvFile: "GH_TOKEN=" + secrets["GH_TOKEN"] + "\nOLD_TOKEN=" + secrets["OLD_TOKEN"] + "\n",
		TOML:    fmt.Sprintf("[model]\ncredentials_dir = %q\n", credentials)})
	ensureSidecarImage(t, e, d.Eng)
	d.Start(t)
	pid := "_PID=" + strconv.Itoa(d.Pid())

	// A value the env file gets later is redacted from the reload on.
	env, err := os.OpenFile(filepath.Join(d.Dir, "env"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(env, "LATER_TOKEN=%s\n", secrets["LATER_TOKEN"])
	env.Close()
	syscall.Kill(d.Pid(), syscall.SIGHUP)
	es := daemontest.WaitJournal(t, 30*time.Second, daemontest.HasMessage("configuration reloaded"), pid)
	if c := daemontest.Find(es, "configuration reloaded")["CHANGED"]; !strings.Contains(c, "env_file") {
		t.Errorf("reloaded: changed %q, want env_file (its values)", c)
	}
	// The group's credential, written after the start and the reload: the turn reads it.
	if err := os.WriteFile(filepath.Join(credentials, "team.key"), []byte(secrets["credential:team.key"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.PutGroup(t, "main", `{"model": {"credential": "team.key"}, "sidecars": [{"name": "echo", "image": "`+sidecarImage+
		`", "env": {"API_TOKEN": "`+secrets["sidecar:echo:API_TOKEN"]+`"}}]}`)
	if r := d.Turn(t, "main", "reply the first turn reads the group's secrets"); r.Status != "ok" {
		t.Fatalf("first turn: %+v", r)
	}

	var all []string
	for _, v := range secrets {
		all = append(all, v)
	}
	said := strings.Join(all, " ")
	inbox := func() apiwire.Inbox {
		var in apiwire.Inbox
		if err := d.Client.Do(context.Background(), http.MethodGet, "/v1/groups/main/messages", nil, &in); err != nil {
			t.Fatal(err)
		}
		return in
	}
	for _, cmd := range []string{"stderr", "reply", "error", "fatal"} {
		id := d.AppendInbox(t, "main", cmd+" "+said)[0]
		deadline := time.Now().Add(3 * time.Minute)
		for in := inbox(); in.LastDoneID < id && in.ParkedReason == ""; in = inbox() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the inbox did not get past message %d: %+v", cmd, id, in)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if in := inbox(); !strings.Contains(in.ParkedReason, "[REDACTED:") {
		t.Errorf("parked for %q, want the agent's fatal error, redacted", in.ParkedReason)
	}
	runs := d.Runs(t, "folder=main")
	if len(runs) < 5 {
		t.Fatalf("%d runs, want the 5 turns and the fatal one's retries", len(runs))
	}

	leaks := func(what string, b []byte, except ...string) {
		t.Helper()
		for name, v := range secrets {
			if bytes.Contains(b, []byte(v)) && !slices.Contains(except, name) {
				t.Errorf("%s holds %s", what, name)
			}
		}
	}
	dbFiles := func(when string) {
		t.Helper()
		for _, f := range []string{"arizukod.db", "arizukod.db-wal", "arizukod.db-shm"} {
			if b, err := os.ReadFile(filepath.Join(d.DataDir, f)); err == nil {
				leaks(f+" "+when, b, "sidecar:echo:API_TOKEN")
			}
		}
	}
	dbFiles("while the daemon runs")
	es, err = daemontest.Journal(pid)
	if err != nil {
		t.Fatal(err)
	}
	var journal bytes.Buffer
	for _, e := range es {
		for k, v := range e {
			fmt.Fprintf(&journal, "%s=%s\n", k, v)
		}
	}
	leaks("the journal", journal.Bytes())
	for name := range secrets {
		if !strings.Contains(journal.String(), "[REDACTED:"+name+"]") {
			t.Errorf("the journal never shows [REDACTED:%s]: the echo was not forwarded", name)
		}
	}
	logs := 0
	filepath.WalkDir(filepath.Join(d.DataDir, "groups"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.Contains(p, "/logs/") {
			return err
		}
		logs++
		b, err := os.ReadFile(p)
		if err != nil {
			t.Error(err)
		}
		leaks("run log "+p, b)
		return nil
	})
	if logs < 5 {
		t.Errorf("%d run logs, want one per turn", logs)
	}
	d.Stop(t)
	dbFiles("after the daemon stopped")
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.DataDir, "arizukod.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cells := 0
	for table, text := range dbText(t, db) {
		cells++
		if table != "groups.container_config" {
			leaks("the database's "+table, []byte(text))
		}
	}
	if b, err := os.ReadFile(d.StderrLog); err == nil {
		leaks("the daemon's stderr", b)
	}
	t.Logf("%d secrets from 5 sources: %d journal entries, %d run logs, %d runs and %d cells of the database clean", len(secrets), len(es), logs, len(runs), cells)
}
