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
			oldEpisodes, oldDiary := episodesDir, diaryDir
			episodesDir, diaryDir = dir, filepath.Join(group, "diary")
			t.Cleanup(func() { episodesDir, diaryDir = oldEpisodes, oldDiary })
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
			if want := `<entry age="today" date="2030-01-02">Compacted a session: `; !strings.Contains(prompt, want) {
				t.Errorf("the next prompt has no diary entry of the compaction:\n%s", prompt)
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

// TestPreCompactDiary: the hook notes each compaction in the day's diary: a new file gets
// frontmatter with the session's summary, an existing one keeps the agent's summary and
// gets a section appended, a file without frontmatter gets one in front (else the diary
// layer would skip it), and a diary that is no regular file is left alone with an error.
func TestPreCompactDiary(t *testing.T) {
	now := time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)
	section := "\n## 15:04 (session compacted)\n\nDeploy v2\n\nThe session so far is archived in episodes/ep.md.\n"
	tests := []struct {
		name    string
		old     *string // the diary file before; nil: none
		want    string  // the diary file after
		summary string  // the diary layer's entry after
		err     string
	}{
		{name: "new", want: "---\nsummary: \"Compacted a session: Deploy v2\"\n---\n" + section, summary: "Compacted a session: Deploy v2"},
		{name: "existing", old: ptr("---\nsummary: Release day\n---\n\n## 10:00\n\nStarted."),
			want: "---\nsummary: Release day\n---\n\n## 10:00\n\nStarted.\n" + section, summary: "Release day"},
		{name: "no frontmatter", old: ptr("notes\n"),
			want: "---\nsummary: \"Compacted a session: Deploy v2\"\n---\nnotes\n" + section, summary: "Compacted a session: Deploy v2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			group := t.TempDir()
			dir := filepath.Join(group, "diary")
			path := filepath.Join(dir, "2030-01-02.md")
			if tt.old != nil {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(*tt.old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := appendDiary(dir, "/workspace/episodes/ep.md", "Deploy v2", now); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tt.want {
				t.Errorf("diary file:\n%s\nwant:\n%s", got, tt.want)
			}
			prompt, err := memory.Assemble(context.Background(), group, memory.Options{Now: now, Location: time.UTC})
			if want := `<entry age="today" date="2030-01-02">` + tt.summary + "</entry>"; err != nil || !strings.Contains(prompt, want) {
				t.Errorf("prompt %q (%v), want %q in it", prompt, err, want)
			}
		})
	}
	t.Run("not a regular file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "2030-01-02.md"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := appendDiary(dir, "ep.md", "x", now); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("err = %v, want not a regular file", err)
		}
	})
}

func ptr(s string) *string { return &s }

// TestDiaryNudge: every 100th turn counted in the session home heads the turn's message
// with the diary nudge; the others leave it as it is; a count that is garbage starts again;
// the message is sent before the count is saved.
func TestDiaryNudge(t *testing.T) {
	now := time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)
	home := t.TempDir()
	for i := 1; i <= 2*diaryEvery; i++ {
		var got string
		countTurn(home, func(n int) {
			if saved := nextTurn(home); saved != n {
				t.Fatalf("turn %d: the count was saved (%d) before the message went", i, saved-1)
			}
			got = withNudge("hello", n, now)
		})
		nudged := strings.Contains(got, "<diary-nudge turn=")
		if nudged != (i%diaryEvery == 0) {
			t.Fatalf("turn %d: nudged %v, prompt %q", i, nudged, got)
		}
		if nudged && (!strings.HasPrefix(got, "<diary-nudge turn=\""+strconv.Itoa(i)+"\">\n") || !strings.HasSuffix(got, "</diary-nudge>\n\nhello")) ||
			nudged && !strings.Contains(got, "/workspace/diary/2030-01-02.md") {
			t.Errorf("turn %d: prompt %q", i, got)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(home, turnsFile)); string(b) != "200\n" {
		t.Errorf("count file %q, want 200", b)
	}
	if err := os.WriteFile(filepath.Join(home, turnsFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := nextTurn(home); n != 1 {
		t.Errorf("after garbage: %d; want 1", n)
	}
	var got string
	countTurn("", func(n int) { got = withNudge("p", n, now) })
	if got != "p" {
		t.Errorf("without a home: %q", got)
	}
}
