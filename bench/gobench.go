package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// goBenchResult is one line of `go test -bench` output, or a package whose benchmark is
// not there yet.
type goBenchResult struct {
	pkg     string
	name    string
	iters   string
	metrics []string // "123 ns/op", "4 allocs/op", ...
	note    string   // why there is no figure
}

// goBenchmarks are the other issues' benchmarks the report carries.
var goBenchmarks = []struct {
	pkg, pattern, fn string
}{
	{"./memory/", ".", "BenchmarkAssemble"},
	{"./ipc/", "BenchmarkToolCall", "BenchmarkToolCall"},
	{"./gateway/", "BenchmarkModelGateway", "BenchmarkModelGateway"},
	{"./tracing/", "BenchmarkTurnTrace", "BenchmarkTurnTrace"},
}

// runGoBenchmarks runs each benchmark that exists in the repository and parses its lines.
func runGoBenchmarks(ctx context.Context, repo string, say func(string, ...any)) []goBenchResult {
	var out []goBenchResult
	for _, gb := range goBenchmarks {
		out = append(out, runGoBenchmark(ctx, repo, gb.pkg, gb.pattern, gb.fn, say)...)
	}
	return out
}

// runGoBenchmark runs the benchmarks of pkg matching pattern, if fn exists there.
func runGoBenchmark(ctx context.Context, repo, pkg, pattern, fn string, say func(string, ...any)) []goBenchResult {
	if !hasFunc(filepath.Join(repo, pkg), fn) {
		return []goBenchResult{{pkg: pkg, name: fn, note: "pending: " + fn + " does not exist yet"}}
	}
	say("go test -run '^$' -bench %s %s", pattern, pkg)
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", pattern, "-benchmem", pkg)
	cmd.Dir = repo
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return []goBenchResult{{pkg: pkg, name: fn, note: "failed: " + firstLine(stderr.String()+stdout.String())}}
	}
	rows := parseGoBench(pkg, stdout.String())
	if len(rows) == 0 {
		rows = append(rows, goBenchResult{pkg: pkg, name: fn, note: "no benchmark line in the output"})
	}
	return rows
}

// parseGoBench reads the benchmark lines: name, iterations, then value-unit pairs.
func parseGoBench(pkg, text string) []goBenchResult {
	var out []goBenchResult
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		r := goBenchResult{pkg: pkg, name: f[0], iters: f[1]}
		for i := 2; i+1 < len(f); i += 2 {
			r.metrics = append(r.metrics, f[i]+" "+f[i+1])
		}
		out = append(out, r)
	}
	return out
}

// hasFunc reports whether a _test.go file of dir declares func name.
func hasFunc(dir, name string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && bytes.Contains(b, []byte("func "+name+"(")) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
