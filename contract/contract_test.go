package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCapture(t *testing.T) {
	ok := `{"status":"ok","result":"hi","newSessionId":"s1","error":""}`
	tests := []struct {
		name    string
		chunks  []string
		max     int
		want    Output
		wantErr error
	}{
		{name: "plain", chunks: []string{StartMarker + "\n" + ok + "\n" + EndMarker + "\n"}, want: Output{Status: StatusOK, Result: "hi", NewSessionID: "s1"}},
		{name: "noise before and after", chunks: []string{"boot\nlog " + StartMarker + " inline\n", StartMarker + "\n" + ok + "\n" + EndMarker + "\ntrailing\n" + StartMarker + "\n{}\n"}, want: Output{Status: StatusOK, Result: "hi", NewSessionID: "s1"}},
		{name: "split across writes", chunks: []string{"---ARIZUKO_OUT", "PUT_START---\r\n{\"status\":", "\"error\",\"error\":\"x\"}\n---ARIZUKO_OUTPUT_E", "ND---"}, want: Output{Status: StatusError, Error: "x"}},
		{name: "end marker without newline at EOF", chunks: []string{StartMarker + "\n" + ok + "\n" + EndMarker}, want: Output{Status: StatusOK, Result: "hi", NewSessionID: "s1"}},
		{name: "no markers", chunks: []string{"hello\nworld\n"}, wantErr: ErrNoOutput},
		{name: "nothing", chunks: nil, wantErr: ErrNoOutput},
		{name: "unterminated", chunks: []string{StartMarker + "\n" + ok + "\n"}, wantErr: ErrUnterminated},
		{name: "invalid json", chunks: []string{StartMarker + "\n{not json\n" + EndMarker + "\n"}, wantErr: ErrBadOutput},
		{name: "unknown status", chunks: []string{StartMarker + "\n{\"status\":\"great\"}\n" + EndMarker + "\n"}, wantErr: ErrBadOutput},
		{name: "two objects", chunks: []string{StartMarker + "\n" + ok + ok + "\n" + EndMarker + "\n"}, wantErr: ErrBadOutput},
		{name: "block too big", max: 16, chunks: []string{StartMarker + "\n" + ok + "\n" + EndMarker + "\n"}, wantErr: ErrBlockTooBig},
		{name: "huge noise line", chunks: []string{strings.Repeat("x", 1<<20) + StartMarker + "\n" + ok + "\n" + EndMarker + "\n"}, wantErr: ErrNoOutput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Capture{MaxBlock: tt.max}
			for _, ch := range tt.chunks {
				if n, err := c.Write([]byte(ch)); n != len(ch) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			got, err := c.Result()
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Result = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestCaptureMemoryIsBounded(t *testing.T) {
	c := &Capture{MaxBlock: 1 << 10}
	chunk := bytes.Repeat([]byte("y"), 64<<10)
	c.Write([]byte(StartMarker + "\n"))
	for range 256 {
		c.Write(chunk)
	}
	if cap(c.block) > 4<<10 || cap(c.line) > 2*maxMarkerLine {
		t.Fatalf("capture kept %d block bytes and %d line bytes", cap(c.block), cap(c.line))
	}
	if c.Total() != 256*64<<10+int64(len(StartMarker)+1) {
		t.Fatalf("Total = %d", c.Total())
	}
}

func TestWriteOutputRoundTrip(t *testing.T) {
	want := Output{Status: StatusOK, Result: "line1\n" + EndMarker + "\nline3", NewSessionID: "abc"}
	c := &Capture{}
	c.Write([]byte("noise\n"))
	c.Write(WriteOutput(want))
	got, err := c.Result()
	if err != nil || got != want {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
}

func TestEncodeInput(t *testing.T) {
	b, err := EncodeInput(Input{Folder: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("not one line: %q", b)
	}
	if !bytes.Contains(b, []byte(`"messages":[]`)) || !bytes.Contains(b, []byte(`"grants":[]`)) {
		t.Fatalf("nil slices must encode as []: %s", b)
	}
	_, err = EncodeInput(Input{SystemPrompt: strings.Repeat("a", MaxInputBytes)})
	if !errors.Is(err, ErrInputTooBig) {
		t.Fatalf("err = %v, want ErrInputTooBig", err)
	}
}

// TestInputCompatibility: the per-message sender, chat and time and the turn's chat are
// extra fields. A line without them (an old daemon's) decodes; a line with them decodes
// into an old agent's types; nothing unknown is written when nothing is known.
func TestInputCompatibility(t *testing.T) {
	old := `{"sessionId":"s1","messages":[{"role":"user","content":"hi"}],"systemPrompt":"p","grants":[],"folder":"main","senderJid":"tg:1"}` + "\n"
	var in Input
	if err := json.Unmarshal([]byte(old), &in); err != nil {
		t.Fatalf("an old-shaped line: %v", err)
	}
	if len(in.Messages) != 1 || in.Messages[0] != (Message{Role: "user", Content: "hi"}) || in.SenderJID != "tg:1" || in.ChatJID != "" {
		t.Errorf("an old-shaped line decoded to %+v", in)
	}
	if b, err := EncodeInput(in); err != nil || string(b) != old {
		t.Errorf("re-encoded without the new fields:\n%s\nwant\n%s (%v)", b, old, err)
	}

	full := Input{Folder: "main", SenderJID: "tg:2", ChatJID: "tg:-100", Messages: []Message{
		{Role: "user", Content: "a", SenderJID: "tg:1", ChatJID: "tg:-100", Time: "2030-01-02T15:04:05Z"},
		{Role: "user", Content: "b", SenderJID: "tg:2", ChatJID: "tg:-100", Time: "2030-01-02T15:04:06Z"},
	}}
	b, err := EncodeInput(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"senderJid":"tg:1"`, `"chatJid":"tg:-100","time":"2030-01-02T15:04:05Z"`, `"chatJid":"tg:-100"}`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the line lacks %s: %s", want, b)
		}
	}
	var oldAgent struct {
		SessionID string `json:"sessionId"`
		Messages  []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Folder    string `json:"folder"`
		SenderJID string `json:"senderJid"`
	}
	if err := json.Unmarshal(b, &oldAgent); err != nil || len(oldAgent.Messages) != 2 || oldAgent.Messages[1].Content != "b" || oldAgent.SenderJID != "tg:2" {
		t.Errorf("an old agent's types: %+v %v", oldAgent, err)
	}
}

func TestReplyChat(t *testing.T) {
	tests := []struct {
		msgs []Message
		want string
	}{
		{nil, ""},
		{[]Message{{Content: "a"}}, ""},
		{[]Message{{ChatJID: "tg:1"}, {ChatJID: "tg:2"}}, "tg:2"},
		{[]Message{{ChatJID: "tg:1"}, {Content: "injected"}}, "tg:1"},
	}
	for _, tt := range tests {
		if got := ReplyChat(tt.msgs); got != tt.want {
			t.Errorf("ReplyChat(%+v) = %q, want %q", tt.msgs, got, tt.want)
		}
	}
}

func FuzzCapture(f *testing.F) {
	f.Add([]byte(StartMarker+"\n{\"status\":\"ok\"}\n"+EndMarker+"\n"), 3)
	f.Add([]byte("noise"), 1)
	f.Fuzz(func(t *testing.T, data []byte, split int) {
		c := &Capture{MaxBlock: 1 << 12}
		if split <= 0 {
			split = 1
		}
		for len(data) > 0 {
			n := min(split, len(data))
			c.Write(data[:n])
			data = data[n:]
		}
		out, err := c.Result()
		if err == nil && out.Status != StatusOK && out.Status != StatusError && out.Status != StatusFatal {
			t.Fatalf("accepted status %q", out.Status)
		}
	})
}
