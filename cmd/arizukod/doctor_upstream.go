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
	upstream, from := "", ""
	if o.daemon != nil && o.daemon.Model.Upstream != "" {
		upstream, from = o.daemon.Model.Upstream, " (the daemon's upstream, asked from this host)"
	} else {
		cfg, err := o.config()
		if err != nil {
			return "", err
		}
		upstream = cfg.Model.Upstream
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, upstream, nil)
	if err != nil {
		return "", fmt.Errorf("[model] upstream %q: %w", upstream, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("cannot reach %s%s: %w", upstream, from, err)
	}
	resp.Body.Close()
	return fmt.Sprintf("%s answers (HTTP %d)%s", upstream, resp.StatusCode, from), nil
}
