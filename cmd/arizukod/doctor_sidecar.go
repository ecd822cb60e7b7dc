package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/sidecar"
)

// checkSidecars says where the daemon would run sidecars: as transient units of its
// user's own systemd manager (the system's for root in a service), or directly on the
// engine; and the names they get, which carry the daemon's instance (for systemctl and
// journalctl). For the system service it asks as that service would. Both modes work; the
// engine mode has no journal per sidecar and cannot pass a sidecar a command.
func checkSidecars(ctx context.Context, o *doctorOpts) (string, error) {
	mode, why := sidecar.Probe(ctx, o.host.mode == config.ModeSystem)
	detail := fmt.Sprintf("%s: %s", mode, why)
	if instance, err := o.instance(); err == nil {
		detail += fmt.Sprintf(". This daemon's sidecars are named %sFOLDER-NAME", sidecar.NamePrefix(instance))
	}
	return detail, nil
}

// instance is the instance label of the daemon of this configuration and data directory
// (--data-dir in place of DATA_DIR, as the instance derives from it).
func (o *doctorOpts) instance() (string, error) {
	dataDir := ""
	if o.dataDir != "" {
		abs, err := filepath.Abs(o.dataDir)
		if err != nil {
			return "", fmt.Errorf("--data-dir: %w", err)
		}
		dataDir = abs
	}
	cfg, err := config.Load(o.host.mode, o.configPath, func(k string) string {
		if k == "DATA_DIR" && dataDir != "" {
			return dataDir
		}
		return os.Getenv(k)
	})
	if err != nil {
		return "", err
	}
	return cfg.Instance, nil
}
