package gateway

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/internal/fakemodel"
)

// BenchmarkModelGateway compares one streamed Messages API request sent straight to a
// local fake upstream with the same request through a turn's gateway (unix socket, token
// check, credential swap, usage parsing). The difference per op is the gateway's added
// latency per request; ns/token divides it over the streamed text's 16-byte deltas.
func BenchmarkModelGateway(b *testing.B) {
	fake := fakemodel.Start()
	defer fake.Close()
	text := strings.Repeat("0123456789abcdef", 64) // 64 deltas
	fake.Reply = func(fakemodel.Request) fakemodel.Reply { return fakemodel.Reply{Text: text} }
	up, _ := url.Parse(fake.URL)
	const tok = "arz-bench-token-0123456789abcdef"
	m, err := StartModel(ModelConfig{SocketPath: b.TempDir() + "/model.sock", Token: tok, Upstream: up,
		Credential: Credential{Value: realKey}})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Stop()
	body := `{"model":"claude-test","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"go"}]}`
	run := func(b *testing.B, c *http.Client, base string) {
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(body))
			req.Header.Set("X-Api-Key", tok)
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || n < int64(len(text)) {
				b.Fatalf("%d, %d bytes", resp.StatusCode, n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/token")
	}
	b.Run("direct", func(b *testing.B) { run(b, &http.Client{}, fake.URL) })
	b.Run("gateway", func(b *testing.B) { run(b, unixClient(m.cfg.SocketPath), "http://model") })
}
