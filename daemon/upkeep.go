package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/arizuko/arizukod/retention"
)

// Prune prunes by the current retention rules (POST /v1/prune), one pruning at a time.
func (d *Daemon) Prune(ctx context.Context, dryRun bool) (retention.Report, error) {
	d.pruning.Lock()
	defer d.pruning.Unlock()
	return retention.Prune(ctx, d.store, d.layout, d.sys.Load().Config.Retention, time.Now(), dryRun)
}

// Backup copies the store into a new file of the data dir, opens it and removes its name at
// once: the copy lives as long as the caller reads it, and nothing is left behind.
func (d *Daemon) Backup(ctx context.Context) (io.ReadCloser, int64, error) {
	var b [8]byte
	rand.Read(b[:])
	path := filepath.Join(d.layout.DataDir, "backup-"+hex.EncodeToString(b[:])+".db")
	if err := d.store.Backup(ctx, path); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(path)
	os.Remove(path)
	if err != nil {
		return nil, 0, fmt.Errorf("backup: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("backup: %w", err)
	}
	return f, fi.Size(), nil
}
