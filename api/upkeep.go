package api

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/retention"
)

// Upkeep is what the API asks of the daemon to keep it small and safe: pruning by the
// retention rules and a consistent copy of the store.
type Upkeep interface {
	Prune(ctx context.Context, dryRun bool) (retention.Report, error)
	// Backup returns a consistent copy of the store, to be read whole and closed.
	Backup(ctx context.Context) (io.ReadCloser, int64, error)
}

func (s *Server) prune(w http.ResponseWriter, r *http.Request) {
	var req apiwire.PruneRequest
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
	writeJSON(w, http.StatusOK, apiwire.PruneReport(rep))
}

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
	w.Header().Set("Content-Type", apiwire.BackupContentType)
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	if _, err := io.Copy(w, rc); err != nil {
		s.log.Warn("api: backup not sent whole", "err", err)
	}
}
