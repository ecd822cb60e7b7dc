package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MetricsConf is where the metrics are served besides GET /metrics on the API socket.
type MetricsConf struct {
	Listen string // a loopback host:port serving /metrics alone; "" for none
}

// TracingConf is where the traces of turns go (OTLP over HTTP); the exporter's other
// settings are the standard OTEL_EXPORTER_OTLP_* variables.
type TracingConf struct {
	// Endpoint is the collector's base URL (http://127.0.0.1:4318, to which /v1/traces is
	// added) or the full URL of its traces; "" for OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT,
	// or none: no tracing.
	Endpoint string
}

// Retention is how long the store's runs, inbox and outbox rows and the groups' run logs
// are kept. A row or file goes when it is older than its MaxAge or beyond the newest
// MaxCount of its group; 0 turns either rule off. What a queued or running turn still
// needs is kept whatever the rules say.
type Retention struct {
	Interval       time.Duration // between the daemon's prunings; 0: never on its own
	RunsMaxAge     time.Duration
	RunsMaxCount   int
	InboxMaxAge    time.Duration
	InboxMaxCount  int
	OutboxMaxAge   time.Duration
	OutboxMaxCount int
	LogsMaxAge     time.Duration
	LogsMaxCount   int
}

// DefaultRetention is the retention of a configuration that sets none.
var DefaultRetention = Retention{
	Interval:   time.Hour,
	RunsMaxAge: 90 * day, RunsMaxCount: 10000,
	InboxMaxAge: 90 * day, InboxMaxCount: 10000,
	OutboxMaxAge: 90 * day, OutboxMaxCount: 10000,
	LogsMaxAge: 30 * day, LogsMaxCount: 1000,
}

const day = 24 * time.Hour

// Bounds of the retention rules.
const (
	maxKeep = 1 << 30 // the largest count a retention rule keeps
	maxAge  = 100 * 365 * day
)

// age accepts a duration ("90s", "36h") or a number of days ("90d"), from 1 minute up to
// 100 years, or 0 ("0", "0s", "0d") to turn its rule off.
func age(field func(*Config) *time.Duration) textSetter {
	return func(c *Config, s string) error {
		var d time.Duration
		if n, ok := strings.CutSuffix(s, "d"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			days, err := strconv.ParseInt(n, 10, 64)
			if err != nil || days > int64(maxAge/day) {
				return fmt.Errorf("%q: must be at most %dd", s, maxAge/day)
			}
			d = time.Duration(days) * day
		} else if s != "0" {
			var err error
			if d, err = time.ParseDuration(s); err != nil {
				return fmt.Errorf("%q: not a duration (like \"90d\", \"36h\" or \"0\" for never)", s)
			}
		}
		if d != 0 && (d < time.Minute || d > maxAge) {
			return fmt.Errorf("%q: must be 0 (never) or between 1m and %dd", s, maxAge/day)
		}
		*field(c) = d
		return nil
	}
}

// setTracingEndpoint accepts "" or an http(s) URL without credentials: a collector that
// wants them gets them from OTEL_EXPORTER_OTLP_HEADERS, kept out of the file.
func setTracingEndpoint(c *Config, s string) error {
	if s == "" {
		c.Tracing.Endpoint = ""
		return nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil, u.Scheme != "https" && u.Scheme != "http" || u.Host == "":
		return fmt.Errorf("%q: want the collector's OTLP/HTTP URL such as \"http://127.0.0.1:4318\"", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q: no user, query or fragment: a collector's credentials go in OTEL_EXPORTER_OTLP_HEADERS", s)
	}
	c.Tracing.Endpoint = s
	return nil
}

// setMetricsListen accepts "" or a loopback host:port: the metrics say what runs on the
// host, and they are served without a check of who asks.
func setMetricsListen(c *Config, s string) error {
	if s == "" {
		c.Metrics.Listen = ""
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q: want a loopback address and port like \"127.0.0.1:9464\"", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: %q is not a port from 1 to 65535", s, port)
	}
	ip := net.ParseIP(host)
	if host == "localhost" {
		ip = net.IPv4(127, 0, 0, 1)
	}
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: not a loopback address; the metrics are served to anyone who can connect, so only 127.0.0.1 or [::1] is allowed", s)
	}
	c.Metrics.Listen = net.JoinHostPort(ip.String(), port)
	return nil
}

// setRelayListen accepts "" or host:port, where the Kubernetes nodes' relay connections
// come in (TLS with client certificates of the relay CA: any address may be served).
func setRelayListen(c *Config, s string) error {
	if s == "" {
		c.Kubernetes.RelayListen = ""
		return nil
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q: want an address and port like \"0.0.0.0:7443\"", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: %q is not a port from 1 to 65535", s, port)
	}
	c.Kubernetes.RelayListen = s
	return nil
}
