// Package contract is the wire contract between arizukod and an agent container: the one
// JSON line written to the container's stdin, and the marked block the container prints on
// stdout. It owns the types, the markers and the parser; it must not know about engines,
// stores or files, so that agent authors can import it alone.
package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The markers that frame the agent's answer on stdout. Everything before StartMarker is
// ignored; everything between the markers is the Output JSON.
const (
	StartMarker = "---ARIZUKO_OUTPUT_START---"
	EndMarker   = "---ARIZUKO_OUTPUT_END---"
)

// MaxInputBytes bounds the stdin line of one turn, newline included.
const MaxInputBytes = 1 << 20

// Message is one chat message of the batch a turn answers.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Input is the single JSON line an agent reads from stdin.
type Input struct {
	SessionID    string    `json:"sessionId"`
	Messages     []Message `json:"messages"`
	SystemPrompt string    `json:"systemPrompt"`
	Grants       []string  `json:"grants"`
	Folder       string    `json:"folder"`
	SenderJID    string    `json:"senderJid"`
}

// Status is the agent's verdict on its turn.
type Status string

// The statuses of the contract: ok and error advance the group's cursor, fatal rolls it back.
const (
	StatusOK    Status = "ok"
	StatusError Status = "error"
	StatusFatal Status = "fatal"
)

// Output is the JSON object between the markers.
type Output struct {
	Status       Status `json:"status"`
	Result       string `json:"result"`
	NewSessionID string `json:"newSessionId"`
	Error        string `json:"error"`
}

// Errors that say why a container's stdout holds no usable answer.
var (
	ErrNoOutput     = errors.New("no output block: the agent never printed " + StartMarker)
	ErrUnterminated = errors.New("output block not terminated: the agent never printed " + EndMarker)
	ErrBadOutput    = errors.New("output block is not valid contract JSON")
	ErrInputTooBig  = errors.New("turn input exceeds the 1 MiB stdin limit")
)

// EncodeInput renders in as one JSON line ending in a newline, refusing lines over
// MaxInputBytes so that the agent side can rely on the bound.
func EncodeInput(in Input) ([]byte, error) {
	if in.Messages == nil {
		in.Messages = []Message{}
	}
	if in.Grants == nil {
		in.Grants = []string{}
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode turn input: %w", err)
	}
	b = append(b, '\n')
	if len(b) > MaxInputBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrInputTooBig, len(b))
	}
	return b, nil
}

// ParseOutput decodes the block between the markers. A status outside the contract is an
// error: the caller treats it as fatal.
func ParseOutput(block []byte) (Output, error) {
	var out Output
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimSpace(block)))
	if err := dec.Decode(&out); err != nil {
		return Output{}, fmt.Errorf("%w: %v", ErrBadOutput, err)
	}
	if dec.More() {
		return Output{}, fmt.Errorf("%w: trailing data after the JSON object", ErrBadOutput)
	}
	switch out.Status {
	case StatusOK, StatusError, StatusFatal:
	default:
		return Output{}, fmt.Errorf("%w: status %q is not one of ok, error, fatal", ErrBadOutput, out.Status)
	}
	return out, nil
}

// WriteOutput frames out with the markers, as an agent must print it.
func WriteOutput(out Output) []byte {
	b, _ := json.Marshal(out)
	var buf bytes.Buffer
	buf.WriteString("\n" + StartMarker + "\n")
	buf.Write(b)
	buf.WriteString("\n" + EndMarker + "\n")
	return buf.Bytes()
}
