package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/arizuko/arizukod/internal/atomicfile"
)

// diaryEvery is how many turns of a group pass between two diary nudges (seed 001: a
// diary entry "every 100 turns").
const diaryEvery = 100

// turnsFile is where the runner counts the group's turns, under its session home (/root,
// the group's own sessions/<folder>/ on the host): the count lives as long as the session
// directory, across containers and daemon restarts.
const turnsFile = ".arizuko/turns"

// countTurn adds one turn to the count in home and returns the new count. A count that
// is missing or unreadable starts again from zero.
func countTurn(home string) (int, error) {
	path := filepath.Join(home, turnsFile)
	n := 0
	if b, err := readBounded(path, 64); err == nil {
		n, _ = strconv.Atoi(string(bytes.TrimSpace(b)))
		n = max(n, 0)
	}
	n++
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return n, fmt.Errorf("count turns: %w", err)
	}
	if err := atomicfile.Write(path, []byte(strconv.Itoa(n)+"\n"), 0o600); err != nil {
		return n, fmt.Errorf("count turns: %w", err)
	}
	return n, nil
}

// diaryNudge is what every diaryEvery-th turn puts before its messages: the ask to write a
// diary entry before answering.
func diaryNudge(n int, now time.Time) string {
	return fmt.Sprintf(`<diary-nudge turn="%d">
This is turn %d of this group: every %d turns you write a diary entry. Before you answer, add a section to today's diary file, /workspace/diary/%s.md, saying what happened since the last entry (decisions, results, promises, open tasks), and keep its frontmatter's summary: a one-line summary of the day. The diary skill (/diary) describes the format.
</diary-nudge>
`, n, n, diaryEvery, now.Format("2006-01-02"))
}

// withNudge is the turn's user message text, headed by the diary nudge when this turn
// (counted in home) is a diary turn.
func withNudge(text, home string, now time.Time) string {
	if home == "" {
		return text
	}
	n, err := countTurn(home)
	if err != nil {
		fmt.Fprintf(os.Stderr, "arizuko-claude: %v\n", err)
		return text
	}
	if n%diaryEvery != 0 {
		return text
	}
	fmt.Fprintf(os.Stderr, "arizuko-claude: turn %d: the agent is asked to write a diary entry\n", n)
	return diaryNudge(n, now) + "\n" + text
}
