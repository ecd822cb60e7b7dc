package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/arizuko/arizukod/internal/atomicfile"
)

// Where the pre-compact hook writes: the group's episodes/ and diary/, which arizukod
// reads into the next turn's system prompt.
var (
	episodesDir = workspace + "/episodes"
	diaryDir    = workspace + "/diary"
)

const (
	// maxEpisode caps an episode's session content; the most recent part is kept.
	maxEpisode = 64 << 10
	// maxSummary caps the summary line, in runes.
	maxSummary = 120
	// maxHookInput caps the hook's JSON on stdin.
	maxHookInput = 1 << 20
	// maxDiary caps a diary file the hook appends to.
	maxDiary = 4 << 20
)

// errUnusable is wrapped when the hook's input cannot be archived at all.
var errUnusable = errors.New("pre-compact: unusable input")

// hookInput is the part of Claude Code's PreCompact hook input the runner reads.
type hookInput struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Trigger        string `json:"trigger"`
}

// preCompact is the PreCompact hook: it archives the session's user and assistant text as
// one episode file before Claude Code compacts it, and notes that in the day's diary
// (appendDiary), so the diary layer of the next prompts says what the compacted session
// was about. It returns the exit status: 1 when the
// input is unusable, else 0, so that a failing archive never stops a compaction; every
// problem is reported on stderr.
func preCompact(stdin io.Reader, stderr io.Writer, home string, now time.Time) int {
	name, err := archive(stdin, home, episodesDir, now)
	if err != nil {
		fmt.Fprintf(stderr, "arizuko-claude: %v\n", err)
		if errors.Is(err, errUnusable) {
			return 1
		}
		return 0
	}
	if name == "" {
		fmt.Fprintln(stderr, "arizuko-claude: pre-compact: the transcript holds no text; no episode written")
	}
	return 0
}

// appendDiary adds a section for the compacted session to the day's diary file,
// diary/YYYY-MM-DD.md: its time, the session's summary and the episode that holds it. A
// new file gets frontmatter whose summary is the session's; a file without frontmatter
// gets one in front, so the diary layer does not skip it; an existing summary is the
// agent's and is kept.
func appendDiary(dir, episode, summary string, now time.Time) error {
	path := filepath.Join(dir, now.Format("2006-01-02")+".md")
	old, err := readBounded(path, maxDiary)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pre-compact: diary: %w", err)
	}
	var b bytes.Buffer
	if !bytes.HasPrefix(old, []byte("---\n")) && !bytes.HasPrefix(old, []byte("---\r\n")) {
		b.WriteString("---\nsummary: ")
		b.Write(yamlString("Compacted a session: " + summary))
		b.WriteString("\n---\n")
	}
	b.Write(old)
	if len(old) > 0 && old[len(old)-1] != '\n' {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "\n## %s (session compacted)\n\n%s\n\nThe session so far is archived in episodes/%s.\n",
		now.Format("15:04"), summary, filepath.Base(episode))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pre-compact: diary: %w", err)
	}
	if err := atomicfile.Write(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("pre-compact: diary: %w", err)
	}
	return nil
}

// readBounded reads a regular file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s exceeds %d bytes: not appended to", path, limit)
	}
	return b, nil
}

// archive writes the episode and returns its path ("" when there was nothing to write).
func archive(stdin io.Reader, home, dir string, now time.Time) (string, error) {
	raw, err := io.ReadAll(io.LimitReader(stdin, maxHookInput+1))
	if err != nil {
		return "", fmt.Errorf("%w: read stdin: %w", errUnusable, err)
	}
	if len(raw) > maxHookInput {
		return "", fmt.Errorf("%w: the hook input on stdin exceeds %d bytes", errUnusable, maxHookInput)
	}
	var in hookInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", fmt.Errorf("%w: decode the hook input on stdin: %w (expected Claude Code's PreCompact JSON)", errUnusable, err)
	}
	path, err := transcriptPath(home, in.TranscriptPath)
	if err != nil {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: transcript_path: %w", errUnusable, err)
	}
	defer f.Close()
	turns, err := readTranscript(f)
	if err != nil {
		return "", fmt.Errorf("%w: transcript %s: %w", errUnusable, path, err)
	}
	if len(turns) == 0 {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("pre-compact: %w", err)
	}
	out := filepath.Join(dir, now.Format("2006-01-02")+"-"+shortID(in.SessionID)+"-"+now.Format("150405")+".md")
	if err := atomicfile.Write(out, episode(turns, now), 0o644); err != nil {
		return "", fmt.Errorf("pre-compact: %w", err)
	}
	if err := appendDiary(diaryDir, out, sessionSummary(turns), now); err != nil {
		return out, err
	}
	return out, nil
}

// transcriptPath accepts only a regular file under home/.claude (after resolving
// symlinks), where Claude Code keeps its transcripts: the hook must not become a way to
// copy any other file of the container into the group's memory.
func transcriptPath(home, p string) (string, error) {
	if p == "" || !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: transcript_path %q must be an absolute path under %s/.claude", errUnusable, p, home)
	}
	root, err := filepath.EvalSymlinks(filepath.Join(home, ".claude"))
	if err != nil {
		return "", fmt.Errorf("%w: %s/.claude: %w", errUnusable, home, err)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%w: transcript_path: %w", errUnusable, err)
	}
	if !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: transcript_path %q is not under %s: refused", errUnusable, p, root)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("%w: transcript_path: %w", errUnusable, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%w: transcript_path %q is not a regular file", errUnusable, p)
	}
	return real, nil
}

// turn is one user or assistant text of the transcript.
type turn struct {
	role, text string
}

// transcriptLine is the part of a Claude Code transcript line the hook reads.
type transcriptLine struct {
	Type    string `json:"type"`
	IsMeta  bool   `json:"isMeta"`
	Message struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// readTranscript returns the user and assistant text of a JSONL transcript, in order:
// tool calls, tool results, thinking and lines it cannot read are left out.
func readTranscript(r io.Reader) ([]turn, error) {
	var turns []turn
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var l transcriptLine
			if json.Unmarshal(line, &l) == nil && !l.IsMeta && (l.Type == "user" || l.Type == "assistant") {
				if text := strings.TrimSpace(contentText(l.Message.Content)); text != "" {
					turns = append(turns, turn{l.Type, text})
				}
			}
		}
		if err == io.EOF {
			return turns, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// contentText is the text of a message's content: a string, or the text blocks of a
// block list.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

// episode renders the episode file: frontmatter with the summary (the first user text,
// on one line) and the date, then the session's turns, the most recent maxEpisode bytes.
func episode(turns []turn, now time.Time) []byte {
	var b bytes.Buffer
	b.WriteString("---\nsummary: ")
	b.Write(yamlString(sessionSummary(turns)))
	b.WriteString("\ndate: " + now.Format("2006-01-02") + "\n---\n")
	b.Write(body(turns))
	return b.Bytes()
}

// sessionSummary is the first user text on one line.
func sessionSummary(turns []turn) string {
	for _, t := range turns {
		if t.role == "user" {
			return oneLine(t.text)
		}
	}
	return "Session archived before compaction"
}

// body is the turns as markdown sections, cut from the front to maxEpisode bytes with a
// marker saying how much was left out.
func body(turns []turn) []byte {
	var full bytes.Buffer
	for _, t := range turns {
		heading := "User"
		if t.role == "assistant" {
			heading = "Assistant"
		}
		full.WriteString("\n## " + heading + "\n\n" + t.text + "\n")
	}
	all := full.Bytes()
	if len(all) <= maxEpisode {
		return all
	}
	cut := len(all) - maxEpisode
	for cut < len(all) && !utf8.RuneStart(all[cut]) {
		cut++
	}
	return append([]byte(fmt.Sprintf("\n[truncated: %d bytes omitted]\n", cut)), all[cut:]...)
}

// oneLine folds whitespace and cuts to maxSummary runes.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= maxSummary {
		return s
	}
	r := []rune(s)
	return string(r[:maxSummary-1]) + "…"
}

// yamlString quotes s as a YAML double-quoted scalar (a JSON string is one).
func yamlString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// shortID is the first 8 characters of the session id, [A-Za-z0-9-] only, so the file
// name stays inside episodes/.
func shortID(id string) string {
	var b strings.Builder
	for _, c := range id {
		if b.Len() == 8 {
			break
		}
		if c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			b.WriteRune(c)
		}
	}
	if b.Len() == 0 {
		return "session"
	}
	return b.String()
}
