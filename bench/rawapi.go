package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// rawAPI speaks an engine's HTTP API directly, for the few calls engine.Engine does not
// offer and the phase measurements need: Podman's init, and wait with a chosen poll interval.
type rawAPI struct {
	http *http.Client
}

func newRawAPI(uri string) (*rawAPI, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "unix" {
		return nil, fmt.Errorf("engine URI %q: only unix:// is measured", uri)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", u.Path)
	}}
	return &rawAPI{http: &http.Client{Transport: tr}}, nil
}

// post sends a POST to path and fails on any status but 2xx.
func (a *rawAPI) post(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://engine"+path, nil)
	if err != nil {
		return err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// ping is GET /_ping, the engines' cheapest liveness check.
func (a *rawAPI) ping(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://engine/_ping", nil)
	if err != nil {
		return err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /_ping: %s", resp.Status)
	}
	return nil
}

// podmanInit runs the OCI runtime's create for a created container (conmon, runc create,
// mounts, cgroup) without starting its process.
func (a *rawAPI) podmanInit(ctx context.Context, id string) error {
	return a.post(ctx, "/v4.0.0/libpod/containers/"+url.PathEscape(id)+"/init")
}

// podmanPids are a container's conmon and its first process (for an initialized container,
// the OCI runtime's init, waiting to exec the agent).
func (a *rawAPI) podmanPids(ctx context.Context, id string) (conmon, pid int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://engine/v4.0.0/libpod/containers/"+url.PathEscape(id)+"/json", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var d struct {
		State struct{ ConmonPid, Pid int }
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("inspect %s: %s", id, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return 0, 0, fmt.Errorf("inspect %s: %w", id, err)
	}
	return d.State.ConmonPid, d.State.Pid, nil
}

// podmanWait is the libpod wait for an exit, polling at interval on the server ("" keeps
// the server's default).
func (a *rawAPI) podmanWait(ctx context.Context, id, interval string) error {
	q := url.Values{"condition": {"exited", "stopped"}}
	if interval != "" {
		q.Set("interval", interval)
	}
	return a.post(ctx, "/v4.0.0/libpod/containers/"+url.PathEscape(id)+"/wait?"+q.Encode())
}
