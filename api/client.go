package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Client talks to the API over its unix socket.
type Client struct {
	socket string
	http   *http.Client
}

// NewClient returns a client for the API at the unix socket path.
func NewClient(socket string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// Error is an API error answer.
type Error struct {
	Code  int
	Field string
	Msg   string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Msg, e.Code) }

// Do sends a request with an optional JSON body and decodes a JSON answer into out.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://arizukod"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("arizukod at %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		var e apiError
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = string(b)
		}
		return &Error{Code: resp.StatusCode, Field: e.Field, Msg: e.Error}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// CreateRun queues a run.
func (c *Client) CreateRun(ctx context.Context, req CreateRunRequest) (Run, error) {
	var r Run
	err := c.Do(ctx, http.MethodPost, "/v1/runs", req, &r)
	return r, err
}

// WaitRun waits for a run to end, long-polling in steps.
func (c *Client) WaitRun(ctx context.Context, id string) (Run, error) {
	for {
		var r Run
		if err := c.Do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"?wait=60s", nil, &r); err != nil {
			return r, err
		}
		switch r.State {
		case "exited", "error", "killed":
			return r, nil
		}
		if err := ctx.Err(); err != nil {
			return r, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
