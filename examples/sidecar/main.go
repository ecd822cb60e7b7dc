// Command sidecar is the example MCP sidecar: the reference for sidecar authors and the
// fixture of arizukod's sidecar tests. Built static (CGO_ENABLED=0) it is an image of its
// own with engine.ImportStatic or `arizukod image`.
//
// It listens on the unix socket named by -socket or $ARIZUKO_SIDECAR_SOCKET (arizukod
// sets it to /var/run/pub/arizuko/sidecars/<name>.sock) and speaks MCP as newline-delimited
// JSON-RPC 2.0, one session per connection, the way `socat STDIO UNIX-CONNECT:...` in the
// agent's settings.json carries it:
//
//	-> {"jsonrpc":"2.0","id":1,"method":"initialize","params":{...}}
//	<- {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":...,"capabilities":{"tools":{}},...}}
//	-> {"jsonrpc":"2.0","method":"notifications/initialized"}
//	-> {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}
//	<- {"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}
//
// Its one tool, echo, returns its text. It prints a line for each connection on stdout,
// which a transient unit sends to the journal. SIGTERM removes the socket and exits 0.
// -fail MESSAGE (or $SIDECAR_FAIL) prints MESSAGE on stderr and exits 3 without
// listening: a sidecar that cannot start, for tests.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
)

const (
	serverName = "arizuko-example-sidecar"
	// protocolVersion is answered when the client asks for a version this server does
	// not know.
	protocolVersion = "2025-06-18"
	maxMessage      = 1 << 20
)

func main() {
	socket := flag.String("socket", os.Getenv("ARIZUKO_SIDECAR_SOCKET"), "unix socket to listen on ($ARIZUKO_SIDECAR_SOCKET)")
	failMsg := flag.String("fail", os.Getenv("SIDECAR_FAIL"), "print this on stderr and exit 3 instead of serving ($SIDECAR_FAIL)")
	flag.Parse()
	if *failMsg != "" {
		fmt.Fprintln(os.Stderr, *failMsg)
		os.Exit(3)
	}
	if *socket == "" {
		fmt.Fprintln(os.Stderr, "sidecar: no socket: set -socket or ARIZUKO_SIDECAR_SOCKET")
		os.Exit(2)
	}
	if err := serve(*socket); err != nil {
		fmt.Fprintln(os.Stderr, "sidecar:", err)
		os.Exit(1)
	}
}

func serve(socket string) error {
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sig
		fmt.Printf("%s: %v: closing %s\n", serverName, s, socket)
		l.Close()
	}()
	fmt.Printf("%s: listening on %s\n", serverName, socket)
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go session(c)
	}
}

type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// session answers one connection's requests in order until it closes.
func session(c net.Conn) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), maxMessage)
	enc := json.NewEncoder(c)
	calls := 0
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			enc.Encode(response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &rpcError{-32700, "parse error: " + err.Error()}})
			continue
		}
		if len(req.ID) == 0 {
			continue // a notification, such as notifications/initialized
		}
		result, rerr := answer(req)
		if req.Method == "tools/call" {
			calls++
		}
		enc.Encode(response{JSONRPC: "2.0", ID: req.ID, Result: result, Error: rerr})
	}
	if calls > 0 {
		fmt.Printf("%s: a session made %d tool calls\n", serverName, calls)
	}
}

func answer(req request) (any, *rpcError) {
	switch req.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		json.Unmarshal(req.Params, &p)
		v := p.ProtocolVersion
		if v == "" {
			v = protocolVersion
		}
		return map[string]any{
			"protocolVersion": v,
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": serverName, "version": "1"},
		}, nil
	case "ping":
		return map[string]any{}, nil
	case "tools/list":
		return map[string]any{"tools": []any{map[string]any{
			"name":        "echo",
			"description": "Returns its text.",
			"inputSchema": map[string]any{
				"type":       "object",
				"properties": map[string]any{"text": map[string]any{"type": "string"}},
				"required":   []string{"text"},
			},
		}}}, nil
	case "tools/call":
		var p struct {
			Name      string `json:"name"`
			Arguments struct {
				Text *string `json:"text"`
			} `json:"arguments"`
		}
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, &rpcError{-32602, "invalid params: " + err.Error()}
		}
		if p.Name != "echo" {
			return nil, &rpcError{-32602, "unknown tool " + p.Name}
		}
		if p.Arguments.Text == nil {
			return toolText("echo: the text argument is required", true), nil
		}
		return toolText(*p.Arguments.Text, false), nil
	}
	return nil, &rpcError{-32601, "method not found: " + req.Method}
}

func toolText(text string, isError bool) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": isError}
}
