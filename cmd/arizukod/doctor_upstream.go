package main

import (
	"context"
	"fmt"
	"net/http"
)

// checkUpstream says whether the model's upstream answers over HTTP(S) from this host, as
// the daemon's model gateway would reach it (the environment's proxy included). Any HTTP
// answer counts: the credential is the model check's business.
func checkUpstream(ctx context.Context, o *doctorOpts) (string, error) {
	cfg, err := o.config()
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, cfg.Model.Upstream, nil)
	if err != nil {
		return "", fmt.Errorf("[model] upstream %q: %w", cfg.Model.Upstream, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("cannot reach %s: %w", cfg.Model.Upstream, err)
	}
	resp.Body.Close()
	return fmt.Sprintf("%s answers (HTTP %d)", cfg.Model.Upstream, resp.StatusCode), nil
}
