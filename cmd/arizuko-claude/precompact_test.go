package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/memory"
)

// TestPreCompact: the hook archives the transcript's user and assistant text as one
// episode that memory lists in the next turn's prompt, refuses transcripts outside
// ~/.claude, writes nothing for a transcript without text, and keeps the most recent
// part of a huge one.
func TestPreCompact(t *testing.T) {
	fixture, err := os.ReadFile("testdata/transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	huge := &bytes.Buffer{}
	for i := range 3000 {
		huge.WriteString(`{"type":"user","message":{"role":"user","content":"message ` + strings.Repeat("é", 20) + ` number ` + strconv.Itoa(i) + `"}}` + "\n")
	}
	huge.WriteString(`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"LAST ANSWER"}]}}` + "\n")
	now := time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)
	const sid = "0f3c9a2e-1111-2222-3333-444455556666"
	tests := []struct {
		name       string
		transcript []byte // written to ~/.claude/projects/-workspace/<sid>.jsonl
		input      func(home, outside string) string
		status     int
		stderr     string
		episode    []string // substrings of the episode; nil: no episode
		absent     []string
		maxSize    int
	}{
		{
			name: "fixture", transcript: fixture,
			episode: []string{
				"---\nsummary: \"Please deploy v2 and write the rollback plan\"\ndate: 2030-01-02\n---\n",
				"\n## User\n\nPlease   deploy v2\nand write the rollback plan\n",
				"\n## Assistant\n\nDeploying now.\n",
				"\n## Assistant\n\nDone: v2 is live, <rollback> in ops.md.\n",
			},
			absent: []string{"TOOL-PAYLOAD", "TOOL-RESULT", "secret thoughts", "meta", "ignored", "not json"},
		},
		{
			name: "empty transcript", transcript: []byte{},
			stderr: "no episode written",
		},
		{
			name: "huge transcript capped", transcript: huge.Bytes(),
			episode: []string{"summary: \"message éééééééééééééééééééé number 0\"", "[truncated: ", "number 2999\n", "LAST ANSWER\n"},
			absent:  []string{"number 0\n", "number 1000\n"},
			maxSize: maxEpisode + 200,
		},
		{
			name: "transcript outside ~/.claude", transcript: fixture,
			input:  func(home, outside string) string { return `{"session_id":"x","transcript_path":"` + outside + `"}` },
			status: 1, stderr: "refused",
		},
		{
			name: "dot-dot out of ~/.claude", transcript: fixture,
			input: func(home, outside string) string {
				return `{"session_id":"x","transcript_path":"` + home + `/.claude/../outside.jsonl"}`
			},
			status: 1, stderr: "refused",
		},
		{
			name: "symlink out of ~/.claude", transcript: fixture,
			input: func(home, outside string) string {
				link := filepath.Join(home, ".claude", "link.jsonl")
				if err := os.Symlink(outside, link); err != nil {
					panic(err)
				}
				return `{"session_id":"x","transcript_path":"` + link + `"}`
			},
			status: 1, stderr: "refused",
		},
		{
			name: "relative path", transcript: fixture,
			input:  func(home, outside string) string { return `{"transcript_path":"projects/x.jsonl"}` },
			status: 1, stderr: "must be an absolute path",
		},
		{
			name: "missing transcript", transcript: fixture,
			input:  func(home, outside string) string { return `{"transcript_path":"` + home + `/.claude/nope.jsonl"}` },
			status: 1, stderr: "no such file",
		},
		{
			name: "not JSON", transcript: fixture,
			input:  func(home, outside string) string { return `PreCompact` },
			status: 1, stderr: "decode the hook input",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			group := t.TempDir()
			dir := filepath.Join(group, "episodes")
			old := episodesDir
			episodesDir = dir
			t.Cleanup(func() { episodesDir = old })
			transcript := filepath.Join(home, ".claude", "projects", "-workspace", sid+".jsonl")
			if err := os.MkdirAll(filepath.Dir(transcript), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(transcript, tt.transcript, 0o600); err != nil {
				t.Fatal(err)
			}
			outside := filepath.Join(home, "outside.jsonl")
			if err := os.WriteFile(outside, fixture, 0o600); err != nil {
				t.Fatal(err)
			}
			in := `{"session_id":"` + sid + `","transcript_path":"` + transcript + `","cwd":"/workspace","hook_event_name":"PreCompact","trigger":"manual","custom_instructions":""}`
			if tt.input != nil {
				in = tt.input(home, outside)
			}
			var stderr bytes.Buffer
			if got := preCompact(strings.NewReader(in), &stderr, home, now); got != tt.status {
				t.Errorf("status = %d, want %d (stderr %q)", got, tt.status, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.stderr)
			}
			entries, _ := os.ReadDir(dir)
			if tt.episode == nil {
				if len(entries) != 0 {
					t.Errorf("episodes/ holds %v, want nothing", entries)
				}
				return
			}
			if len(entries) != 1 || entries[0].Name() != "2030-01-02-0f3c9a2e-150405.md" {
				t.Fatalf("episodes/ = %v, want 2030-01-02-0f3c9a2e-150405.md alone", entries)
			}
			got, err := os.ReadFile(filepath.Join(dir, entries[0].Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.episode {
				if !strings.Contains(string(got), want) {
					t.Errorf("episode lacks %q:\n%.2000s", want, got)
				}
			}
			for _, no := range tt.absent {
				if strings.Contains(string(got), no) {
					t.Errorf("episode holds %q", no)
				}
			}
			if tt.maxSize > 0 && len(got) > tt.maxSize {
				t.Errorf("episode is %d bytes, want at most %d", len(got), tt.maxSize)
			}
			prompt, err := memory.Assemble(context.Background(), group, memory.Options{Now: now, Location: time.UTC})
			if err != nil {
				t.Fatal(err)
			}
			if want := `<entry age="today" date="2030-01-02" file="2030-01-02-0f3c9a2e-150405.md">`; !strings.Contains(prompt, want) {
				t.Errorf("the next prompt does not list the episode:\n%s", prompt)
			}
		})
	}
}

// TestShortID: the file name part of a session id is at most 8 safe characters.
func TestShortID(t *testing.T) {
	for in, want := range map[string]string{
		"0f3c9a2e-1111": "0f3c9a2e",
		"abc":           "abc",
		"":              "session",
		"../../etc/x":   "etcx",
		"/// ..":        "session",
	} {
		if got := shortID(in); got != want {
			t.Errorf("shortID(%q) = %q, want %q", in, got, want)
		}
	}
}
