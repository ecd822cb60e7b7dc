package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// mcpStub is the MCP server of the Claude Code turns that run without a daemon (bare and
// podman run): on a unix socket that `socat STDIO UNIX-CONNECT:` bridges to, as arizukod's
// router.sock is, it offers the very tools arizukod's server offered (copied from a daemon
// turn's model request: names, descriptions, schemas), so every method's model request
// carries the same tool list. send_reply answers as arizukod's does, with an outbox id;
// the others are refused, since no measured turn calls them. (bench/ measures the daemon
// from outside: it does not link the ipc package.)
type mcpStub struct {
	srv      *server.MCPServer
	ln       net.Listener
	sessions atomic.Int64
	outbox   atomic.Int64
	wg       sync.WaitGroup
}

// mcpToolPrefix is how Claude Code names the tools of the MCP server "arizuko".
const mcpToolPrefix = "mcp__arizuko__"

// startMCPStub serves tools (the tools of a Messages request whose names carry
// mcpToolPrefix) on socket.
func startMCPStub(socket string, tools []any) (*mcpStub, error) {
	s := &mcpStub{srv: server.NewMCPServer("arizukod", "1", server.WithToolCapabilities(false))}
	n := 0
	for _, t := range tools {
		m, _ := t.(map[string]any)
		name, _ := m["name"].(string)
		if !strings.HasPrefix(name, mcpToolPrefix) {
			continue
		}
		name = strings.TrimPrefix(name, mcpToolPrefix)
		desc, _ := m["description"].(string)
		schema, err := json.Marshal(m["input_schema"])
		if err != nil {
			return nil, err
		}
		s.srv.AddTool(mcp.NewToolWithRawSchema(name, desc, schema), s.call(name))
		n++
	}
	if n == 0 {
		return nil, errors.New("the daemon's model request offered no tool of arizuko's MCP server")
	}
	os.Remove(socket)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(socket, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	s.ln = ln
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *mcpStub) call(name string) server.ToolHandlerFunc {
	return func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if name != "send_reply" {
			return mcp.NewToolResultError(name + " is not served by the bench"), nil
		}
		chat := req.GetString("chat_jid", claudeChat)
		b, _ := json.Marshal(map[string]any{"outbox_id": s.outbox.Add(1), "kind": "reply", "chat_jid": chat})
		return mcp.NewToolResultText(string(b)), nil
	}
}

func (s *mcpStub) close() {
	s.ln.Close()
	s.wg.Wait()
}

func (s *mcpStub) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go s.serve(c)
	}
}

// stubSession is one connection's MCP client session.
type stubSession struct {
	id    string
	notes chan mcp.JSONRPCNotification
	ready atomic.Bool
}

func (c *stubSession) SessionID() string                                   { return c.id }
func (c *stubSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return c.notes }
func (c *stubSession) Initialize()                                         { c.ready.Store(true) }
func (c *stubSession) Initialized() bool                                   { return c.ready.Load() }

// serve answers one connection's newline-delimited JSON-RPC messages, each connection with
// a session of its own (mcp-go's StdioServer has one for the whole process).
func (s *mcpStub) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	ctx := context.Background()
	sess := &stubSession{id: fmt.Sprintf("bench#%d", s.sessions.Add(1)), notes: make(chan mcp.JSONRPCNotification, 16)}
	if err := s.srv.RegisterSession(ctx, sess); err != nil {
		return
	}
	defer s.srv.UnregisterSession(ctx, sess.id)
	ctx = s.srv.WithContext(ctx, sess)
	r := bufio.NewReaderSize(c, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			if resp := s.srv.HandleMessage(ctx, line); resp != nil {
				b, merr := json.Marshal(resp)
				if merr != nil {
					return
				}
				if _, werr := c.Write(append(b, '\n')); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}
