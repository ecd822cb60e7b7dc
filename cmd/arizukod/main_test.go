package main

import (
	"os"
	"testing"

	"github.com/arizuko/arizukod/internal/daemontest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	daemontest.RemoveBinary()
	os.Exit(code)
}
