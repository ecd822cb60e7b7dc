package contract

import (
	"bytes"
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
