package daemon

import (
	"context"

	"github.com/arizuko/arizukod/project"
	"github.com/arizuko/arizukod/turn"
)

// projects serves the API's projects through the builder of the moment, whose manager
// has the allowlist of the last reload.
type projects struct {
	builder func() *turn.Builder
}

func (p projects) SetProject(ctx context.Context, folder, path string) (project.Info, error) {
	return p.builder().Projects.Set(ctx, folder, path)
}

func (p projects) ClearProject(ctx context.Context, folder string, discard bool) (project.Info, error) {
	return p.builder().Projects.Clear(ctx, folder, discard)
}

func (p projects) GetProject(ctx context.Context, folder string) (project.Info, error) {
	return p.builder().Projects.Get(ctx, folder)
}
