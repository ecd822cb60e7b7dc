package main

import (
	"context"
	"fmt"
	"os"

	"github.com/arizuko/arizukod/config"
)

// checkLimits says whether the engine applies the memory, CPU and pids limits, and, when
// it cannot, whether turns run anyway (allow_unlimited = true) or are refused.
func checkLimits(ctx context.Context, o *doctorOpts) (string, error) {
	_, info, err := o.ef.open(ctx)
	if err != nil {
		return "", fmt.Errorf("no engine to ask: %w", err)
	}
	if info.NoLimits == "" {
		return fmt.Sprintf("%s applies the memory, CPU and pids limits", info), nil
	}
	cfg, err := config.Load(serviceMode(), "", os.Getenv)
	if err != nil {
		return "", err
	}
	if err := info.CheckLimits(cfg.Limits.AllowUnlimited); err != nil {
		return "", fmt.Errorf("turns are refused: %w", err)
	}
	return fmt.Sprintf("not applied on %s: %s; turns run without them (allow_unlimited = true in %s)", info, info.NoLimits, cfg.Source), nil
}
