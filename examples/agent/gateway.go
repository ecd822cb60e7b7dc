package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arizuko/arizukod/contract"
)

// socketClient is an HTTP client whose every connection goes to one unix socket: the
// container has no network, so the sockets in the IPC directory are its only way out.
func socketClient(path string, proxy bool) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}
	if proxy {
		tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: "egress"})
		tr.TLSClientConfig = &tls.Config{RootCAs: egressRoots()}
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// egressRoots are the system's roots and the egress proxy's CA ($ARIZUKO_EGRESS_CA),
// which signs the certificates of the hosts the proxy sends a secret to.
func egressRoots() *x509.CertPool {
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if b, err := os.ReadFile(os.Getenv("ARIZUKO_EGRESS_CA")); err == nil {
		roots.AppendCertsFromPEM(b)
	}
	return roots
}

func socketPath(env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	return ipcDir + "/" + name
}

// modelCommand asks the model through the gateway: "model TEXT" streams a Messages API
// answer and returns its text; "model-as TOKEN TEXT" presents another token; "model-raw
// METHOD PATH" sends a bare request, for the tests of what the gateway refuses.
func modelCommand(_ contract.Input, arg string) contract.Output {
	token := os.Getenv("ARIZUKO_MODEL_TOKEN")
	return askModel(token, arg)
}

func modelAsCommand(_ contract.Input, arg string) contract.Output {
	token, text, _ := strings.Cut(arg, " ")
	return askModel(token, text)
}

// modelRetryCommand asks the model as Claude Code does: every answer but a 200 is tried
// again, after 0.5 s doubling up to 32 s, ten times, so about 3 minutes in all. "model-retry
// TEXT" answers the last status and how many attempts it made.
func modelRetryCommand(_ contract.Input, arg string) contract.Output {
	token := os.Getenv("ARIZUKO_MODEL_TOKEN")
	delay := 500 * time.Millisecond
	var answer map[string]any
	for attempt := 1; ; attempt++ {
		out := askModel(token, arg)
		answer = map[string]any{"error": out.Error}
		json.Unmarshal([]byte(out.Result), &answer)
		if answer["status"] == float64(http.StatusOK) || attempt == 11 {
			answer["attempts"] = attempt
			return report(answer)
		}
		time.Sleep(delay)
		delay = min(2*delay, 32*time.Second)
	}
}

// modelBurstCommand asks the model N times at once, as parallel tool calls would: "model-burst
// N TEXT" answers the status of each answer, in the order they came.
func modelBurstCommand(_ contract.Input, arg string) contract.Output {
	count, text, _ := strings.Cut(arg, " ")
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > 64 {
		return fail("model-burst: want a count from 1 to 64 and a text, got %q", arg)
	}
	token := os.Getenv("ARIZUKO_MODEL_TOKEN")
	var mu sync.Mutex
	var wg sync.WaitGroup
	statuses := []any{}
	for range n {
		wg.Go(func() {
			var answer map[string]any
			json.Unmarshal([]byte(askModel(token, text).Result), &answer)
			mu.Lock()
			statuses = append(statuses, answer["status"])
			mu.Unlock()
		})
	}
	wg.Wait()
	return report(map[string]any{"statuses": statuses})
}

// modelSeqCommand asks the model N times, one after another, as the requests of one
// agent turn come: "model-seq N TEXT" answers the status of each answer and the error of
// the first refused one.
func modelSeqCommand(_ contract.Input, arg string) contract.Output {
	count, text, _ := strings.Cut(arg, " ")
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > 64 {
		return fail("model-seq: want a count from 1 to 64 and a text, got %q", arg)
	}
	token := os.Getenv("ARIZUKO_MODEL_TOKEN")
	statuses := []any{}
	var refused any
	for range n {
		var answer map[string]any
		json.Unmarshal([]byte(askModel(token, text).Result), &answer)
		statuses = append(statuses, answer["status"])
		if refused == nil && answer["error"] != nil {
			refused = answer["error"]
		}
	}
	return report(map[string]any{"statuses": statuses, "error": refused})
}

func askModel(token, text string) contract.Output {
	body, _ := json.Marshal(map[string]any{
		"model": "claude-test", "max_tokens": 256, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": text}},
	})
	req, _ := http.NewRequest(http.MethodPost, "http://model/v1/messages?beta=true", strings.NewReader(string(body)))
	req.Header.Set("X-Api-Key", token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := socketClient(socketPath("ARIZUKO_MODEL_SOCKET", contract.ModelSocket), false).Do(req)
	if err != nil {
		return fail("model: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return report(map[string]any{"status": resp.StatusCode, "error": json.RawMessage(b)})
	}
	var answer strings.Builder
	dec := newSSE(resp.Body)
	for {
		data, err := dec()
		if err != nil {
			break
		}
		var ev struct {
			Type  string
			Delta struct{ Type, Text string }
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			answer.WriteString(ev.Delta.Text)
		}
	}
	return report(map[string]any{"status": resp.StatusCode, "text": answer.String()})
}

// newSSE returns the data of each event of an SSE stream in turn.
func newSSE(r io.Reader) func() (string, error) {
	var buf []byte
	chunk := make([]byte, 4096)
	return func() (string, error) {
		for {
			if i := strings.Index(string(buf), "\n"); i >= 0 {
				line := strings.TrimRight(string(buf[:i]), "\r")
				buf = buf[i+1:]
				if d, ok := strings.CutPrefix(line, "data:"); ok {
					return strings.TrimSpace(d), nil
				}
				continue
			}
			n, err := r.Read(chunk)
			buf = append(buf, chunk[:n]...)
			if err != nil && n == 0 {
				return "", err
			}
		}
	}
}

func modelRawCommand(_ contract.Input, arg string) contract.Output {
	method, path, _ := strings.Cut(arg, " ")
	req, err := http.NewRequest(method, "http://model"+path, strings.NewReader(`{"model":"claude-test"}`))
	if err != nil {
		return fail("model-raw: %v", err)
	}
	req.Header.Set("X-Api-Key", os.Getenv("ARIZUKO_MODEL_TOKEN"))
	resp, err := socketClient(socketPath("ARIZUKO_MODEL_SOCKET", contract.ModelSocket), false).Do(req)
	if err != nil {
		return fail("model-raw: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return report(map[string]any{"status": resp.StatusCode, "body": string(b)})
}

// fetchCommand gets a URL through the egress proxy: "fetch URL", or "fetch-auth VAR URL"
// sending "Authorization: Bearer $VAR" (a placeholder the proxy swaps for its secret).
func fetchCommand(_ contract.Input, arg string) contract.Output {
	return fetch(arg, "")
}

func fetchAuthCommand(_ contract.Input, arg string) contract.Output {
	name, u, _ := strings.Cut(arg, " ")
	return fetch(u, "Bearer "+os.Getenv(name))
}

func fetch(u, auth string) contract.Output {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return fail("fetch: %v", err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := socketClient(socketPath("ARIZUKO_EGRESS_SOCKET", contract.EgressSocket), true).Do(req)
	if err != nil {
		return report(map[string]any{"status": 0, "error": err.Error()})
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return report(map[string]any{"status": resp.StatusCode, "body": string(b)})
}

// tokenCommand answers the turn's model token: worthless once the turn ends, which the
// tests prove by presenting it in the next turn.
func tokenCommand(contract.Input, string) contract.Output {
	return ok(os.Getenv("ARIZUKO_MODEL_TOKEN"))
}

// scanCommand looks for PREFIX in its environment and in every regular file it can read
// under /workspace, /root, /var/run/pub, /tmp and /etc, and answers where it found it: the
// tests use it to prove that the model credential is nowhere in the container.
func scanCommand(_ contract.Input, prefix string) contract.Output {
	if prefix == "" {
		return fail("scan: want a prefix")
	}
	var hits []string
	for _, kv := range os.Environ() {
		if strings.Contains(kv, prefix) {
			k, _, _ := strings.Cut(kv, "=")
			hits = append(hits, "env:"+k)
		}
	}
	for _, root := range []string{"/workspace", "/root", "/var/run/pub", "/tmp", "/etc"} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), prefix) {
				hits = append(hits, p)
			}
			return nil
		})
	}
	return report(map[string]any{"hits": hits})
}
