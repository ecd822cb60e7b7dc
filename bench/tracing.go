package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/arizuko/arizukod/internal/fakemodel"
)

// tracingResult is what tracing costs a turn: the same turns through two daemons on
// Podman 4, one without [tracing] and one exporting every turn's trace to a receiver of
// the bench, in alternation.
type tracingResult struct {
	n    int
	rows [2]tracingRow // off, on
	// exports and bytes are what the traced daemon posted to the receiver, all its turns'.
	exports, bytes int64
	turns          int
}

type tracingRow struct {
	name    string
	lat     sample
	cpu     time.Duration // the daemon's CPU over the measured turns
	rssKB   int64         // after them
	idleRSS int64         // before the first turn
}

// tracingCost runs o.turns turns (each one model request through the gateway to a scripted
// upstream, so that a trace has its model span) on each daemon, alternating, after warm-up.
func (b *bench) tracingCost(ctx context.Context) error {
	fake := fakemodel.Start()
	defer fake.Close()
	var exports, bytes atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exports.Add(1)
		bytes.Add(n)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	key := filepath.Join(b.o.work, "tracing-key")
	if err := os.WriteFile(key, []byte("sk-ant-bench-0123456789abcdef\n"), 0o600); err != nil {
		return err
	}
	model := fmt.Sprintf("[model]\nupstream = %q\napi_key_file = %q\n", fake.URL, key)
	res := &tracingResult{n: b.o.turns}
	var daemons [2]*daemonProc
	for i, name := range []string{"tracing-off", "tracing-on"} {
		extra := model
		if i == 1 {
			extra += fmt.Sprintf("[tracing]\nendpoint = \"http://%s\"\n", ln.Addr())
		}
		d, err := b.startDaemonIn(ctx, filepath.Join(b.o.work, name), b.o.skillsDir, name, "podman", b.o.podmanSocket, b.o.arizukod, b.o.image, extra, nil)
		if err != nil {
			return err
		}
		if err := d.addGroups(ctx, "main"); err != nil {
			return err
		}
		daemons[i] = d
		res.rows[i].name = name
		if res.rows[i].idleRSS, err = d.rss(); err != nil {
			return err
		}
	}
	for range b.o.warm {
		for _, d := range daemons {
			if _, err := d.turn(ctx, "main", "model warm"); err != nil {
				return err
			}
		}
	}
	var cpu0 [2]time.Duration
	for i, d := range daemons {
		if cpu0[i], err = cpuTime(d.cmd.Process.Pid); err != nil {
			return err
		}
	}
	b.say("tracing: %d turns on each daemon, alternating", b.o.turns)
	for range b.o.turns {
		for i, d := range daemons {
			tr, err := d.turn(ctx, "main", "model hello")
			if err != nil {
				return err
			}
			res.rows[i].lat = append(res.rows[i].lat, tr.done.Sub(tr.submitted))
		}
	}
	for i, d := range daemons {
		cpu, err := cpuTime(d.cmd.Process.Pid)
		if err != nil {
			return err
		}
		res.rows[i].cpu = cpu - cpu0[i]
		if res.rows[i].rssKB, err = d.rss(); err != nil {
			return err
		}
	}
	// Stopping the traced daemon sends what its batch still holds.
	daemons[1].stop()
	res.exports, res.bytes, res.turns = exports.Load(), bytes.Load(), b.o.warm+b.o.turns
	b.report.tracing = res
	return nil
}

func (r *report) tracingSection(p printer) {
	t := r.tracing
	p("## 7. What tracing costs a turn ([tracing] on and off)")
	p("")
	p("Two daemons on Podman 4, the same configuration but for `[tracing] endpoint` (an OTLP/HTTP receiver of the")
	p("bench that reads and drops what it gets), take %d turns each in alternation after warm-up; each turn makes", t.n)
	p("one model request through the gateway (to a scripted upstream), so a trace has its root, six phases and")
	p("a model span.")
	p("")
	p("| daemon | p50 ms | p90 ms | daemon CPU per turn ms | VmRSS idle MiB | VmRSS after MiB |")
	p("|---|---:|---:|---:|---:|---:|")
	for _, row := range t.rows {
		p("| %s | %s | %s | %s | %.1f | %.1f |", row.name, ms(row.lat.p50()), ms(row.lat.pct(90)),
			ms(row.cpu/time.Duration(max(1, t.n))), float64(row.idleRSS)/1024, float64(row.rssKB)/1024)
	}
	p("")
	if t.turns > 0 {
		p("The traced daemon posted %d batches, %d bytes of OTLP protobuf: %d bytes per turn.", t.exports, t.bytes, t.bytes/int64(t.turns))
		p("`BenchmarkTurnTrace` (section 6) is the in-process cost of one turn's trace, export included.")
		p("")
	}
}
