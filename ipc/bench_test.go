package ipc_test

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkToolCall measures tools/call round trips over the unix socket
// with mcp-go's client on one connection: decoding, the tier and grant
// checks (rules read from the store each call), the store work and the
// answer. It reports the median and 99th percentile of the round trips.
func BenchmarkToolCall(b *testing.B) {
	cases := []struct {
		tool string
		args map[string]any
	}{
		{"get_groups", nil},
		{"list_tasks", nil},
		{"send_message", map[string]any{"chat_jid": "tg:1", "text": "benchmark"}},
	}
	for _, bc := range cases {
		b.Run(bc.tool, func(b *testing.B) {
			e := newEnv(b)
			if err := e.st.SetGrants(e.ctx, "main", []string{"*", "!send_message(chat_jid=wa:*)", "!inject_message"}); err != nil {
				b.Fatal(err)
			}
			s := e.start(b, "main", nil)
			c := dial(b, s.SocketPath())
			mustOK(b, "warm up", call(b, c, bc.tool, bc.args))
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				r, err := callErr(c, bc.tool, bc.args)
				lat = append(lat, time.Since(start))
				if err != nil || r.isError {
					b.Fatalf("%s: %v %s", bc.tool, err, r.text)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
