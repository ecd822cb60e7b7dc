package apiwire

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
		var e ErrorBody
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

// Prune prunes by the daemon's retention rules, or only counts with dryRun.
func (c *Client) Prune(ctx context.Context, dryRun bool) (PruneReport, error) {
	var rep PruneReport
	err := c.Do(ctx, http.MethodPost, "/v1/prune", PruneRequest{DryRun: dryRun}, &rep)
	return rep, err
}

// Backup writes a consistent copy of the daemon's store to w and returns its size. A copy
// that arrives short is an error.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://arizukod/v1/backup", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("arizukod at %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 || resp.Header.Get("Content-Type") != BackupContentType {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e ErrorBody
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = string(b)
		}
		return 0, &Error{Code: resp.StatusCode, Field: e.Field, Msg: e.Error}
	}
	n, err := io.Copy(w, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("backup: got %d of %d bytes", n, resp.ContentLength)
	}
	return n, err
}
