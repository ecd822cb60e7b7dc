// Package contract is the wire contract between arizukod and an agent container: the one
// JSON line written to the container's stdin, the marked block the container prints on
// stdout, and where in the container the agent finds the sockets of its turn (IPCDir and
// the names in it). It owns the types, the markers, the parser and those names; it must
// not know about engines, stores or files, so that agent authors can import it alone.
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

// Preparing ahead: an image whose label PrepareLabel is "1" says its agent can be started
// before its turn (a warm agent). arizukod then starts the container after the folder's
// previous turn, writes a first line that is an Input with Prepare set (everything but the
// turn's messages, run id and chat: the session to resume, the system prompt, the grants,
// the folder), and waits for the agent to print ReadyMarker on a line of its own on stdout
// once it waits for its turn. When the turn comes, the turn's own Input line follows on
// stdin, then EOF, and the agent answers as any agent does (StartMarker ... EndMarker). The
// turn's line repeats what the prepare line said; arizukod never sends a turn whose
// session, system prompt, grants or folder differ from it (it discards the warm agent and
// starts a fresh container instead). Until the turn's line, nothing of the turn is served:
// the model gateway takes no token, arizukod's MCP server answers initialize and
// tools/list but refuses every tools/call, there is no egress proxy and no sidecar. An
// agent may never get its turn: arizukod removes it when what it was prepared with changes.
// An image without the label keeps the plain contract: its container is started at its
// turn and reads one line.
const (
	// PrepareLabel is the image label that declares an agent able to be prepared ahead.
	PrepareLabel = "io.arizuko.prepare"
	// ReadyMarker is the line a prepared agent prints on stdout once it waits for its turn.
	ReadyMarker = "---ARIZUKO_READY---"
)

// Where an agent finds what arizukod serves it for a turn: the group's IPC directory is
// mounted in its container at IPCDir, with these names in it.
const (
	IPCDir = "/var/run/pub/arizuko"
	// RouterSocket is the MCP server of arizukod's tools.
	RouterSocket = "router.sock"
	// ModelSocket is the model gateway (the Messages API).
	ModelSocket = "model.sock"
	// EgressSocket is the egress proxy (HTTP CONNECT).
	EgressSocket = "egress.sock"
	// SidecarDir holds the group's sidecars' sockets, <name>.sock.
	SidecarDir = "sidecars"
	// InputDir holds the steering messages of a running turn, and its close sentinel.
	InputDir = "input"
)

// EgressCAFile is the certificate (PEM) of the CA the egress proxy presents for the hosts
// it sends a secret to, mounted read-only in every agent container: an agent's TLS
// through egress.sock trusts it besides the system's roots.
const EgressCAFile = "/etc/arizuko/egress-ca.pem"

// MaxInputBytes bounds the stdin line of one turn, newline included.
const MaxInputBytes = 1 << 20

// Message is one chat message of the batch a turn answers. SenderJID, ChatJID and Time are
// there when known (an inbound chat message has all three) and left out of the JSON when
// not: an agent that reads only role and content sees the line it always saw.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// SenderJID is who wrote the message, e.g. tg:123456.
	SenderJID string `json:"senderJid,omitempty"`
	// ChatJID is the chat it was written in, e.g. tg:-5075870332.
	ChatJID string `json:"chatJid,omitempty"`
	// Time is when arizukod received it, in RFC 3339 (UTC).
	Time string `json:"time,omitempty"`
}

// Input is the single JSON line an agent reads from stdin. Agents must ignore fields they
// do not know: new ones are added without a version change.
type Input struct {
	// Prepare marks the first line of a warm agent (see PrepareLabel): no messages, run id
	// or chat yet; the turn's line follows.
	Prepare bool `json:"prepare,omitempty"`
	// RunID is the run this turn is: what the journal's ARIZUKO_RUN_ID names.
	RunID        string    `json:"runId,omitempty"`
	SessionID    string    `json:"sessionId"`
	Messages     []Message `json:"messages"`
	SystemPrompt string    `json:"systemPrompt"`
	Grants       []string  `json:"grants"`
	Folder       string    `json:"folder"`
	// SenderJID is the sender of the last message that has one: whose user memory the
	// system prompt holds.
	SenderJID string `json:"senderJid"`
	// ChatJID is the chat the turn answers, where send_reply without a chat_jid goes;
	// left out when the turn answers no chat.
	ChatJID string `json:"chatJid,omitempty"`
}

// Prepared is the prepare line of the turn in: what a warm agent is started with.
func Prepared(in Input) Input {
	return Input{Prepare: true, SessionID: in.SessionID, SystemPrompt: in.SystemPrompt, Grants: in.Grants,
		Folder: in.Folder}
}

// ReplyChat is the chat a batch of messages is answered in: the chat of the last message
// that names one, or "" when none does.
func ReplyChat(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].ChatJID != "" {
			return msgs[i].ChatJID
		}
	}
	return ""
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
