package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/arizuko/arizukod/agentimage"
	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/runtime/kube"
)

// checkImage says whether the configured agent image is on the engine, and whether the
// Claude Code image is, when that is another.
func checkImage(ctx context.Context, o *doctorOpts) (string, error) {
	eng, _, err := o.engine(ctx)
	if err != nil {
		return "", fmt.Errorf("no engine to ask: %w", err)
	}
	cfg, err := o.config()
	if err != nil {
		return "", err
	}
	image := cfg.Image
	if o.daemon != nil && o.daemon.Image != "" {
		image = o.daemon.Image
	}
	ok, err := eng.ImageExists(ctx, image)
	if err != nil {
		return "", err
	}
	if image == agentimage.ClaudeRef {
		if !ok {
			return "", fmt.Errorf("the agent image %s (Claude Code) is not on the engine (runs never pull)", image)
		}
		return image + " (Claude Code) is on the engine", nil
	}
	o.claudeThere, _ = eng.ImageExists(ctx, agentimage.ClaudeRef)
	if !ok {
		return "", fmt.Errorf("the agent image %s is not on the engine (runs never pull); %s (Claude Code) is %s", image, agentimage.ClaudeRef, present(o.claudeThere))
	}
	return fmt.Sprintf("%s is on the engine; %s (Claude Code) is %s", image, agentimage.ClaudeRef, present(o.claudeThere)), nil
}

// imageFix puts an agent image on the engine, or names the Claude Code image that is
// there already.
func imageFix(o *doctorOpts) string {
	const build = "arizukod image build claude   (Claude Code; then image = %q in arizukod.toml)   or: arizukod image import-static --tag localhost/arizuko-agent:latest /usr/libexec/arizuko/agent"
	if o.claudeThere {
		return fmt.Sprintf("image = %q in arizukod.toml (it is on the engine), or put the image named there: arizukod image import-static --tag IMAGE BINARY", agentimage.ClaudeRef)
	}
	if _, onCluster := o.eng.(*kube.Engine); onCluster {
		return fmt.Sprintf("build it on a Podman (%s), then on every node: %v", fmt.Sprintf(build, agentimage.ClaudeRef), kube.ErrImport)
	}
	return fmt.Sprintf(build, agentimage.ClaudeRef)
}

func present(ok bool) string {
	if ok {
		return "there"
	}
	return "not built"
}

// checkModel says where the model gateway's credential comes from, without printing it:
// the daemon's, when one answers.
func checkModel(_ context.Context, o *doctorOpts) (string, error) {
	if d := o.daemon; d != nil {
		if d.Model.Error != "" {
			return "", fmt.Errorf("the daemon cannot reach a model (upstream %s): %s", d.Model.Upstream, d.Model.Error)
		}
		return fmt.Sprintf("%s, upstream %s", d.Model.Credential, d.Model.Upstream), nil
	}
	cfg, err := o.config()
	if err != nil {
		return "", err
	}
	fromFile := map[string]string{}
	if cfg.EnvFile != "" {
		if vars, err := mountsec.ReadEnvFile(cfg.EnvFile); err == nil {
			fromFile = vars
		}
	}
	cred, err := gateway.LoadCredential(gateway.CredentialSources{
		APIKeyFile: cfg.Model.APIKeyFile, OAuthTokenFile: cfg.Model.OAuthTokenFile,
		Getenv: func(k string) string {
			if v := os.Getenv(k); v != "" {
				return v
			}
			return fromFile[k]
		},
	})
	if errors.Is(err, gateway.ErrNoCredential) {
		return "", fmt.Errorf("no model credential for %s: turns cannot reach the model", cfg.Model.Upstream)
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s, upstream %s", cred, cfg.Model.Upstream), nil
}
