package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// client posts the batches of the OpenTelemetry exporter (otlptrace.Exporter, which turns
// the SDK's spans into OTLP's) to the collector as OTLP/HTTP protobuf, configured as the
// specification's OTEL_EXPORTER_OTLP_* variables say. It stands in for otlptracehttp, which
// links gRPC (its configuration and the collector's proto package import it): several MB
// of binary and of an idle daemon's memory for a transport the daemon does not use.
type client struct {
	url      string
	headers  http.Header
	timeout  time.Duration
	gzip     bool
	http     *http.Client
	attempts int
}

// envPair is the variable of the traces, or else the general one.
func envPair(name string) (string, string) {
	k := "OTEL_EXPORTER_OTLP_TRACES_" + name
	if v := os.Getenv(k); v != "" {
		return k, v
	}
	k = "OTEL_EXPORTER_OTLP_" + name
	return k, os.Getenv(k)
}

// newClient reads the exporter's settings: endpoint (the configuration's, if set), headers,
// timeout, compression and certificates. A variable that is set but wrong is an error
// naming it.
func newClient(endpoint string) (*client, error) {
	c := &client{headers: http.Header{}, timeout: 10 * time.Second, attempts: 3}
	from := "tracing.endpoint"
	switch k, v := envPair("ENDPOINT"); {
	case endpoint != "":
		c.url = tracesURL(endpoint)
	case k == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":
		c.url, from = v, k
	default:
		c.url, from = strings.TrimSuffix(v, "/")+"/v1/traces", k
	}
	if err := CheckEndpoint(c.url); err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	if k, v := envPair("HEADERS"); v != "" {
		for _, kv := range strings.Split(v, ",") {
			name, value, ok := strings.Cut(kv, "=")
			name = strings.TrimSpace(name)
			value, err := url.PathUnescape(strings.TrimSpace(value))
			if !ok || name == "" || err != nil {
				return nil, fmt.Errorf("%s: %q is not key=value with the value percent-encoded", k, kv)
			}
			c.headers.Add(name, value)
		}
	}
	if k, v := envPair("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%s: %q is not a number of milliseconds", k, v)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	if k, v := envPair("COMPRESSION"); v != "" {
		switch v {
		case "gzip":
			c.gzip = true
		case "none":
		default:
			return nil, fmt.Errorf("%s: %q is not gzip or none", k, v)
		}
	}
	tlsConf, err := tlsConfig()
	if err != nil {
		return nil, err
	}
	c.http = &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsConf,
		MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute,
	}}
	return c, nil
}

// tlsConfig is the certificates the variables name: the collector's CA, and a client's.
func tlsConfig() (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if k, v := envPair("CERTIFICATE"); v != "" {
		pem, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s has no PEM certificate", k, v)
		}
	}
	kc, cert := envPair("CLIENT_CERTIFICATE")
	kk, key := envPair("CLIENT_KEY")
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", kc, kk, err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

func (c *client) Start(context.Context) error { return nil }

func (c *client) Stop(context.Context) error {
	c.http.CloseIdleConnections()
	return nil
}

// UploadTraces posts one batch. TracesData is, on the wire, the ExportTraceServiceRequest
// the collector decodes (both are field 1, the ResourceSpans). A collector that answers 429,
// 502, 503 or 504, or not at all, is tried again, at most three times within the timeout.
func (c *client) UploadTraces(ctx context.Context, rs []*tracepb.ResourceSpans) error {
	body, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: rs})
	if err != nil {
		return err
	}
	if c.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(body)
		if err := zw.Close(); err != nil {
			return err
		}
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	wait := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		retry, err := c.post(ctx, body)
		if err == nil || !retry || attempt == c.attempts {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (then %w)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// errStatus is a collector's answer other than 2xx.
var errStatus = errors.New("the collector answered")

func (c *client) post(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	for k, v := range c.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if c.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		retry = true
	}
	return retry, fmt.Errorf("%w %s at %s: %q", errStatus, resp.Status, c.url, msg)
}
