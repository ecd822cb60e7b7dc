// Command depsfloor is the floor of arizukod's resident memory that its required modules
// set: a program that only imports the packages of them the daemon links (the Podman
// bindings' connection, the Docker client, mcp-go, modernc's SQLite, go-systemd's journal)
// and prints its VmRSS and RssAnon in KiB, as bench/'s memory section reads them. It does
// nothing else. Built with the tag bindingsapi it also imports the bindings' containers,
// images and system packages and specgen, which runtime/podman does without (its package
// comment): the bench shows both floors.
package main

import (
	"fmt"
	"os"
	"strings"

	_ "github.com/containers/podman/v5/pkg/bindings"
	_ "github.com/coreos/go-systemd/v22/journal"
	_ "github.com/docker/docker/client"
	_ "github.com/mark3labs/mcp-go/client"
	_ "github.com/mark3labs/mcp-go/server"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	_ "go.opentelemetry.io/otel/sdk/trace"
	_ "go.opentelemetry.io/proto/otlp/trace/v1"
	_ "google.golang.org/protobuf/proto"
	_ "modernc.org/sqlite"
)

func main() {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, "depsfloor:", err)
		os.Exit(1)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && (k == "VmRSS" || k == "RssAnon") {
			fmt.Println(k, strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
}
