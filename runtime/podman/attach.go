package podman

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/docker/docker/pkg/stdcopy"

	"github.com/arizuko/arizukod/runtime/engine"
)

// Attach speaks the libpod attach endpoint on a connection of its own. The bindings'
// containers.Attach swaps the transport of the shared client while it dials (podman marks
// it "one giant race condition"), which concurrent turns cannot afford, and inspects the
// container first, which a turn does not need.
func (p *Podman) Attach(ctx context.Context, id string) (*engine.Attachment, error) {
	path := "/v4.0.0/libpod/containers/" + url.PathEscape(id) + "/attach?stream=true&stdin=true&stdout=true&stderr=true"
	return hijack(ctx, p.uri, path, p.forget)
}

// hijack sends an HTTP upgrade request on a fresh connection to the engine at uri and
// returns the raw stream, multiplexed in Docker's 8-byte-header framing (both engines use it
// for a container without a terminal).
func hijack(ctx context.Context, uri, path string, onErr func(error)) (*engine.Attachment, error) {
	conn, err := dialEngine(ctx, uri)
	if err != nil {
		onErr(err)
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://d"+path, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("attach %s: %w", path, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("attach %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		conn.Close()
		err := fmt.Errorf("attach: engine answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
		if resp.StatusCode == http.StatusNotFound {
			err = fmt.Errorf("%w: %v", engine.ErrNoSuchContainer, err)
		}
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	copyOut := func(stdout, stderr io.Writer) error {
		_, err := stdcopy.StdCopy(stdout, stderr, br)
		return err
	}
	return engine.NewAttachment(halfCloser{conn}, copyOut, conn.Close), nil
}

// halfCloser closes only the write side, so the container sees EOF on stdin while its
// output keeps flowing.
type halfCloser struct{ net.Conn }

func (h halfCloser) Close() error {
	if cw, ok := h.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func dialEngine(ctx context.Context, uri string) (net.Conn, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("engine URI %q: %w", uri, err)
	}
	var d net.Dialer
	switch u.Scheme {
	case "unix":
		return d.DialContext(ctx, "unix", u.Path)
	case "tcp":
		return d.DialContext(ctx, "tcp", u.Host)
	}
	return nil, fmt.Errorf("engine URI %q: scheme %q is not supported (use unix:// or tcp://)", uri, u.Scheme)
}
