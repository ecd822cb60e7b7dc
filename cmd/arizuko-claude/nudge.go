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

// nextTurn is the number of this turn in home's count: the count plus one. A count that
// is missing or unreadable starts again from zero.
func nextTurn(home string) int {
	n := 0
	if b, err := readBounded(filepath.Join(home, turnsFile), 64); err == nil {
		n, _ = strconv.Atoi(string(bytes.TrimSpace(b)))
		n = max(n, 0)
	}
	return n + 1
}

// saveTurn makes n home's count of turns.
func saveTurn(home string, n int) error {
	path := filepath.Join(home, turnsFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("count turns: %w", err)
	}
	if err := atomicfile.Write(path, []byte(strconv.Itoa(n)+"\n"), 0o600); err != nil {
		return fmt.Errorf("count turns: %w", err)
	}
	return nil
}

// diaryNudge is what every diaryEvery-th turn puts before its messages: the ask to write a
// diary entry before answering.
func diaryNudge(n int, now time.Time) string {
	return fmt.Sprintf(`<diary-nudge turn="%d">
This is turn %d of this group: every %d turns you write a diary entry. Before you answer, add a section to today's diary file, /workspace/diary/%s.md, saying what happened since the last entry (decisions, results, promises, open tasks), and keep its frontmatter's summary: a one-line summary of the day. The diary skill (/diary) describes the format.
</diary-nudge>
`, n, n, diaryEvery, now.Format("2006-01-02"))
}

// withNudge is the user message text of turn n (0: not counted), headed by the diary
// nudge when it is a diary turn.
func withNudge(text string, n int, now time.Time) string {
	if n <= 0 || n%diaryEvery != 0 {
		return text
	}
	fmt.Fprintf(os.Stderr, "arizuko-claude: turn %d: the agent is asked to write a diary entry\n", n)
	return diaryNudge(n, now) + "\n" + text
}

// countTurn is the number of this turn in home's count, with the drive's message: the
// message goes first, and the count (a synced write) is saved after it, off the path to
// the model's first request. Without a home the turn is not counted.
func countTurn(home string, send func(n int)) {
	if home == "" {
		send(0)
		return
	}
	n := nextTurn(home)
	send(n)
	if err := saveTurn(home, n); err != nil {
		fmt.Fprintf(os.Stderr, "arizuko-claude: %v\n", err)
	}
}
