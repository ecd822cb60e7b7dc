//go:build bindingsapi

package main

import (
	_ "github.com/containers/podman/v5/pkg/bindings/containers"
	_ "github.com/containers/podman/v5/pkg/bindings/images"
	_ "github.com/containers/podman/v5/pkg/bindings/system"
	_ "github.com/containers/podman/v5/pkg/specgen"
)
