package daemontest

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestJournalSince: a query by _PID reads from the start of the latest daemon this process
// saw with that pid (an earlier process with the same pid, in this run or another, is left
// out), from this process's start for a pid it did not start, and unbounded without a pid.
func TestJournalSince(t *testing.T) {
	started := time.Unix(1_800_000_000, 0)
	pidStarts.Store(4242, started)
	t.Cleanup(func() { pidStarts.Delete(4242) })
	for _, c := range []struct {
		matches []string
		want    []string
	}{
		{[]string{"_PID=4242"}, []string{fmt.Sprintf("--since=@%d", started.Unix()-1)}},
		{[]string{"ARIZUKO_FOLDER=main", "_PID=4242"}, []string{fmt.Sprintf("--since=@%d", started.Unix()-1)}},
		{[]string{"_PID=4243"}, []string{fmt.Sprintf("--since=@%d", testStart.Unix()-1)}},
		{[]string{"MESSAGE=configuration reloaded"}, nil},
	} {
		if got := journalSince(c.matches); !slices.Equal(got, c.want) {
			t.Errorf("journalSince(%q) = %q, want %q", c.matches, got, c.want)
		}
	}
}
