package main

import (
	"context"
	"fmt"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/sidecar"
)

// checkSidecars says where the daemon would run sidecars: as transient units of its
// user's own systemd manager (the system's for root in a service), or directly on the
// engine. For the system service it asks as that service would. Both work; the engine mode
// has no journal per sidecar and cannot pass a sidecar a command.
func checkSidecars(ctx context.Context, o *doctorOpts) (string, error) {
	mode, why := sidecar.Probe(ctx, o.host.mode == config.ModeSystem)
	return fmt.Sprintf("%s: %s", mode, why), nil
}
