package logging

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// TestJournald logs through a real journald and reads the entries back with
// journalctl -o json. The test host (hack/testhost) runs a standalone
// systemd-journald and sets ARIZUKO_TEST_JOURNALD=1.
func TestJournald(t *testing.T) {
	if os.Getenv("ARIZUKO_TEST_JOURNALD") != "1" {
		if os.Getenv("ARIZUKO_REQUIRE_ENGINES") == "1" {
			t.Fatal("ARIZUKO_REQUIRE_ENGINES=1 but ARIZUKO_TEST_JOURNALD is not set: start the test host (hack/testhost/up.sh)")
		}
		t.Skip("ARIZUKO_TEST_JOURNALD is not set: no journald to test against (hack/testhost/up.sh starts one)")
	}
	if !journal.Enabled() {
		t.Fatal("ARIZUKO_TEST_JOURNALD=1 but journald does not answer on /run/systemd/journal/socket")
	}
	if _, err := exec.LookPath("journalctl"); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	log := New(Options{Stderr: &stderr, Level: slog.LevelDebug, AddSource: true})
	if _, ok := log.Handler().(*journalHandler); !ok {
		t.Fatalf("New chose %T with journald up", log.Handler())
	}

	runID := fmt.Sprintf("test-%d-%d", os.Getpid(), time.Now().UnixNano())
	turn := log.With(FieldRunID, runID, FieldFolder, "main/research", FieldContainer, "arizuko-main-research-1")
	turn.Debug("stderr line\nwith a second line", "stream", "stderr")
	turn.Warn("turn finished", FieldStatus, "error", FieldExitCode, 2, FieldDurationMS, int64(1234),
		slog.Group("arizuko", "failure", "no-output"), "secrets", secret("hunter2"))

	entries := readJournal(t, FieldRunID+"="+runID, 2)
	if stderr.Len() > 0 {
		t.Errorf("fell back to stderr: %q", stderr.String())
	}
	run := map[string]string{
		"SYSLOG_IDENTIFIER": "arizukod",
		FieldRunID:          runID,
		FieldFolder:         "main/research",
		FieldContainer:      "arizuko-main-research-1",
	}
	for i, want := range []map[string]string{
		{"MESSAGE": "stderr line\nwith a second line", "PRIORITY": "7", "STREAM": "stderr"},
		{"MESSAGE": "turn finished", "PRIORITY": "4", FieldStatus: "error", FieldExitCode: "2",
			FieldDurationMS: "1234", "ARIZUKO_FAILURE": "no-output", "SECRETS": "[redacted]", "CODE_FUNC": "github.com/arizuko/arizukod/logging.TestJournald"},
	} {
		for k, v := range run {
			want[k] = v
		}
		for k, v := range want {
			if got := entries[i][k]; got != v {
				t.Errorf("entry %d: %s = %q, want %q", i, k, got, v)
			}
		}
		if !strings.HasSuffix(entries[i]["CODE_FILE"], "logging/journald_e2e_test.go") || entries[i]["CODE_LINE"] == "" {
			t.Errorf("entry %d: CODE_FILE %q CODE_LINE %q", i, entries[i]["CODE_FILE"], entries[i]["CODE_LINE"])
		}
		for k, v := range entries[i] {
			if strings.Contains(v, "hunter2") {
				t.Errorf("entry %d: %s = %q: the secret reached the journal", i, k, v)
			}
		}
	}
}

// readJournal polls journalctl until it shows want entries matching match,
// for up to 5 s, and returns them oldest first.
func readJournal(t *testing.T, match string, want int) []map[string]string {
	t.Helper()
	var entries []map[string]string
	deadline := time.Now().Add(5 * time.Second)
	for {
		entries = entries[:0]
		out, err := exec.Command("journalctl", "-o", "json", "--no-pager", "--all", match).Output()
		if err != nil {
			t.Fatalf("journalctl %s: %v", match, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			entries = append(entries, decodeEntry(t, sc.Bytes()))
		}
		if len(entries) >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(entries) != want {
		t.Fatalf("journalctl %s: %d entries after 5s, want %d", match, len(entries), want)
	}
	return entries
}

// decodeEntry reads one line of journalctl -o json: a value is a string, or
// an array of bytes when it is not printable (a newline makes it so).
func decodeEntry(t *testing.T, line []byte) map[string]string {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		t.Fatalf("journalctl output %q: %v", line, err)
	}
	e := map[string]string{}
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil {
			e[k] = s
			continue
		}
		var b []byte
		var ints []int
		if json.Unmarshal(v, &ints) == nil {
			for _, i := range ints {
				b = append(b, byte(i))
			}
			e[k] = string(b)
		}
	}
	return e
}
