package gateway

import (
	"bytes"
	"encoding/json"
	"io"
)

// apiUsage is the usage object of the Messages API. cache_creation splits the cache
// writes by the cache's lifetime, which their price depends on.
type apiUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheCreation            *struct {
		Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

// write1h is how many of u's cache writes are to the 1-hour cache.
func (u *apiUsage) write1h() int64 {
	if u.CacheCreation == nil {
		return 0
	}
	return min(u.CacheCreation.Ephemeral1h, u.CacheCreationInputTokens)
}

// apiMessage is the part of a message (a non-streamed answer, or message_start's) that
// the gateway reads.
type apiMessage struct {
	Model string    `json:"model"`
	Usage *apiUsage `json:"usage"`
}

func (m apiMessage) usage() Usage {
	u := Usage{Model: m.Model}
	if m.Usage != nil {
		u.InputTokens = m.Usage.InputTokens
		u.OutputTokens = m.Usage.OutputTokens
		u.CacheReadTokens = m.Usage.CacheReadInputTokens
		u.CacheWriteTokens = m.Usage.CacheCreationInputTokens
		u.CacheWrite1hTokens = m.Usage.write1h()
	}
	return u
}

// messageEvent is a streamed event: message_start carries the message with its input
// usage, message_delta the cumulative usage at the end.
type messageEvent struct {
	Type    string     `json:"type"`
	Message apiMessage `json:"message"`
	Usage   *apiUsage  `json:"usage"`
}

// sseUsage passes a streamed answer through unchanged and reads its usage on the way.
// The usage of one answer is recorded when its message_delta line has been read, before
// that line is handed on: the turn cannot end before its usage is stored.
type sseUsage struct {
	rc     io.ReadCloser
	record func(Usage)
	line   []byte
	// seen is the usage counted so far for the current message; message_delta's
	// cumulative counts replace it.
	seen     Usage
	recorded bool
}

func (s *sseUsage) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	s.scan(p[:n])
	if err == io.EOF {
		s.flush()
	}
	return n, err
}

func (s *sseUsage) Close() error {
	s.flush()
	return s.rc.Close()
}

// maxLine bounds a buffered SSE line; a longer one (a large text delta) is skipped, as it
// never carries usage.
const maxLine = 1 << 20

func (s *sseUsage) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(s.line)+len(b) <= maxLine {
				s.line = append(s.line, b...)
			} else {
				s.line = append(s.line[:0], "skip"...)
			}
			return
		}
		if len(s.line)+i <= maxLine {
			s.line = append(s.line, b[:i]...)
			s.event(s.line)
		}
		s.line = s.line[:0]
		b = b[i+1:]
	}
}

func (s *sseUsage) event(line []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
	if !ok {
		return
	}
	var ev messageEvent
	if json.Unmarshal(bytes.TrimSpace(data), &ev) != nil {
		return
	}
	switch ev.Type {
	case "message_start":
		s.flush()
		s.seen, s.recorded = ev.Message.usage(), false
	case "message_delta":
		if ev.Usage != nil {
			// The delta's counts are cumulative; a zero count keeps message_start's.
			u := ev.Usage
			s.seen.OutputTokens = max(s.seen.OutputTokens, u.OutputTokens)
			s.seen.InputTokens = max(s.seen.InputTokens, u.InputTokens)
			s.seen.CacheReadTokens = max(s.seen.CacheReadTokens, u.CacheReadInputTokens)
			s.seen.CacheWriteTokens = max(s.seen.CacheWriteTokens, u.CacheCreationInputTokens)
			s.seen.CacheWrite1hTokens = max(s.seen.CacheWrite1hTokens, u.write1h())
		}
		s.flush()
	}
}

// flush records the current message's usage once.
func (s *sseUsage) flush() {
	if s.recorded || s.seen == (Usage{}) {
		return
	}
	s.recorded = true
	s.record(s.seen)
}
