package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/arizuko/arizukod/retention"
)

// Upkeep is what the API asks of the daemon to keep it small and safe: pruning by the
// retention rules and a consistent copy of the store.
type Upkeep interface {
	Prune(ctx context.Context, dryRun bool) (retention.Report, error)
	// Backup returns a consistent copy of the store, to be read whole and closed.
	Backup(ctx context.Context) (io.ReadCloser, int64, error)
}

// PruneRequest is the body of POST /v1/prune.
type PruneRequest struct {
	DryRun bool `json:"dry_run"`
}

func (s *Server) prune(w http.ResponseWriter, r *http.Request) {
	var req PruneRequest
	if r.ContentLength != 0 && !decode(w, r, &req) {
		return
	}
	if s.Upkeep == nil {
		writeErr(w, http.StatusNotFound, "", "no pruning on this server")
		return
	}
	rep, err := s.Upkeep.Prune(r.Context(), req.DryRun)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// BackupContentType is the media type of POST /v1/backup's answer: an SQLite database.
const BackupContentType = "application/vnd.sqlite3"

func (s *Server) backup(w http.ResponseWriter, r *http.Request) {
	if s.Upkeep == nil {
		writeErr(w, http.StatusNotFound, "", "no backup on this server")
		return
	}
	rc, size, err := s.Upkeep.Backup(r.Context())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", BackupContentType)
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	if _, err := io.Copy(w, rc); err != nil {
		s.log.Warn("api: backup not sent whole", "err", err)
	}
}

// Prune prunes by the daemon's retention rules, or only counts with dryRun.
func (c *Client) Prune(ctx context.Context, dryRun bool) (retention.Report, error) {
	var rep retention.Report
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
		var e apiError
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
