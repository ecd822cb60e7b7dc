package main

// The mcp commands call the daemon's MCP tools the way Claude Code does through
// `socat STDIO UNIX-CONNECT:/var/run/pub/arizuko/router.sock`: newline-delimited
// JSON-RPC 2.0 over the group's unix socket. The protocol is written out by hand to keep
// this static agent small and to show agent authors everything that crosses the socket:
//
//	-> {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":...}}
//	<- {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":...,"capabilities":{"tools":{}},...}}
//	-> {"jsonrpc":"2.0","method":"notifications/initialized"}
//	-> {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"send_reply","arguments":{"text":"hi"}}}
//	<- {"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"..."}],"isError":false}}

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/arizuko/arizukod/contract"
)

const (
	routerSocket  = ipcDir + "/" + contract.RouterSocket
	sidecarDir    = ipcDir + "/" + contract.SidecarDir
	mcpProtocol   = "2025-06-18"
	mcpDeadline   = 30 * time.Second
	maxMCPMessage = 16 << 20
)

// mcpCommand is `mcp list` or `mcp TOOL [JSONARGS]` against the daemon's socket.
func mcpCommand(_ contract.Input, arg string) contract.Output {
	return mcpRun(routerSocket, arg)
}

// mcpSocketCommand is `mcp-socket PATH list` or `mcp-socket PATH TOOL [JSONARGS]`; a
// relative PATH is taken below /var/run/pub/arizuko/sidecars/.
func mcpSocketCommand(_ contract.Input, arg string) contract.Output {
	path, rest, _ := strings.Cut(arg, " ")
	if path == "" {
		return fail("mcp-socket: usage: mcp-socket PATH list | mcp-socket PATH TOOL [JSONARGS]")
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(sidecarDir, path)
	}
	return mcpRun(path, strings.TrimSpace(rest))
}

// mcpRun answers {"tools":[names]} for list, and for a call {"isError":..., "text":...}
// (the tool's text content) or {"error":{"code":...,"message":...}} when the server
// refused the request itself, as it does for an unknown tool.
func mcpRun(socket, arg string) contract.Output {
	tool, rawArgs, _ := strings.Cut(arg, " ")
	if tool == "" {
		return fail("mcp: usage: mcp list | mcp TOOL [JSONARGS]")
	}
	rawArgs = strings.TrimSpace(rawArgs)
	if rawArgs == "" {
		rawArgs = "{}"
	}
	if !json.Valid([]byte(rawArgs)) {
		return fail("mcp: arguments of %s are not valid JSON: %s", tool, rawArgs)
	}
	c, err := dialMCP(socket)
	if err != nil {
		return fail("mcp: %v", err)
	}
	defer c.conn.Close()
	if tool == "list" {
		names, err := c.listTools()
		if err != nil {
			return fail("mcp: tools/list: %v", err)
		}
		return report(map[string]any{"tools": names})
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	err = c.request("tools/call", map[string]any{"name": tool, "arguments": json.RawMessage(rawArgs)}, &res)
	var rerr *rpcError
	if errors.As(err, &rerr) {
		return report(map[string]any{"error": rerr})
	}
	if err != nil {
		return fail("mcp: tools/call %s: %v", tool, err)
	}
	var text []string
	for _, c := range res.Content {
		if c.Type == "text" {
			text = append(text, c.Text)
		}
	}
	return report(map[string]any{"isError": res.IsError, "text": strings.Join(text, "\n")})
}

// mcpConn is one initialized MCP session over a unix socket.
type mcpConn struct {
	conn net.Conn
	r    *bufio.Reader
	id   int
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

func dialMCP(socket string) (*mcpConn, error) {
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(mcpDeadline))
	c := &mcpConn{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	err = c.request("initialize", map[string]any{
		"protocolVersion": mcpProtocol,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "arizuko-example-agent", "version": "1"},
	}, &init)
	if err == nil {
		err = c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return c, nil
}

func (c *mcpConn) send(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	_, err = c.conn.Write(append(b, '\n'))
	return err
}

// request sends one request and decodes the result of the response with its id,
// skipping the notifications the server may send in between.
func (c *mcpConn) request(method string, params, result any) error {
	c.id++
	if err := c.send(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params}); err != nil {
		return err
	}
	for {
		line, err := c.readLine()
		if err != nil {
			return err
		}
		var resp struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return fmt.Errorf("bad message from the server: %v", err)
		}
		if resp.ID == nil || *resp.ID != c.id {
			continue
		}
		if resp.Error != nil {
			return resp.Error
		}
		return json.Unmarshal(resp.Result, result)
	}
}

func (c *mcpConn) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := c.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxMCPMessage {
			return nil, fmt.Errorf("message from the server longer than %d bytes", maxMCPMessage)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return line, nil
	}
}

func (c *mcpConn) listTools() ([]string, error) {
	names := []string{}
	cursor := ""
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var page struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := c.request("tools/list", params, &page); err != nil {
			return nil, err
		}
		for _, t := range page.Tools {
			names = append(names, t.Name)
		}
		if page.NextCursor == "" {
			return names, nil
		}
		cursor = page.NextCursor
	}
}
