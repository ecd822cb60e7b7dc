package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/arizuko/arizukod/groupfolder"
)

// DeliveryConf is how the outbox stream hands rows out ([delivery]).
type DeliveryConf struct {
	// VisibilityTimeout hides a handed-out row until it passes, unless it is acked.
	VisibilityTimeout time.Duration
	// MaxAttempts parks a row after this many failed or unacknowledged deliveries.
	MaxAttempts int
}

// Webhook is one [[webhook]] table: a receiver the daemon POSTs outbox rows to.
type Webhook struct {
	// URL is an http:// URL whose host is a loopback address or localhost, or
	// unix:/ABSOLUTE/PATH.sock (the request then goes to http://localhost/).
	URL        string
	SecretFile string // the shared secret's file, read by the daemon at start
	Folder     string // "" for every folder
	Platform   string // "" for every platform
	Timeout    time.Duration
	Backoff    time.Duration // the first wait after a failure; it doubles
	MaxBackoff time.Duration // the longest wait
}

// Unix is the socket path of a unix: URL, "" for an http one.
func (w Webhook) Unix() string {
	p, ok := strings.CutPrefix(w.URL, "unix:")
	if !ok {
		return ""
	}
	return p
}

// Delivery defaults.
const (
	DefaultVisibilityTimeout = 60 * time.Second
	DefaultMaxAttempts       = 5
	defaultWebhookTimeout    = 10 * time.Second
	defaultWebhookBackoff    = time.Second
	defaultWebhookMaxBackoff = 5 * time.Minute
)

// webhookKeys are the keys of a [[webhook]] table.
var webhookKeys = map[string]func(w *Webhook, v any) error{
	"url":         hookText(setWebhookURL),
	"secret_file": hookText(func(w *Webhook, s string) error { return hookPath(&w.SecretFile, s) }),
	"folder":      hookText(setWebhookFolder),
	"platform":    hookText(setWebhookPlatform),
	"timeout":     hookText(hookDuration(time.Second, 10*time.Minute, func(w *Webhook) *time.Duration { return &w.Timeout })),
	"backoff":     hookText(hookDuration(10*time.Millisecond, time.Hour, func(w *Webhook) *time.Duration { return &w.Backoff })),
	"max_backoff": hookText(hookDuration(10*time.Millisecond, 24*time.Hour, func(w *Webhook) *time.Duration { return &w.MaxBackoff })),
}

func hookText(set func(w *Webhook, s string) error) func(w *Webhook, v any) error {
	return func(w *Webhook, v any) error {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("want a string, not %s", typeName(v))
		}
		return set(w, s)
	}
}

func hookDuration(lo, hi time.Duration, field func(*Webhook) *time.Duration) func(w *Webhook, s string) error {
	return func(w *Webhook, s string) error {
		var d time.Duration
		if err := duration(lo, hi, func(*Config) *time.Duration { return &d })(nil, s); err != nil {
			return err
		}
		*field(w) = d
		return nil
	}
}

func hookPath(field *string, s string) error {
	p, err := absPath(s)
	if err != nil {
		return err
	}
	*field = p
	return nil
}

func setWebhookURL(w *Webhook, s string) error {
	if p, ok := strings.CutPrefix(s, "unix:"); ok {
		if err := hookPath(&p, p); err != nil {
			return fmt.Errorf("unix: %w (like unix:/run/gateway/hook.sock)", err)
		}
		if len(p) > maxSocketPath {
			return fmt.Errorf("%q: a socket path of at most %d bytes", p, maxSocketPath)
		}
		w.URL = "unix:" + p
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%q: want http://127.0.0.1:PORT/PATH (loopback only) or unix:/PATH.sock", s)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%q: the host must be a loopback address (127.0.0.1, [::1]) or localhost: outbox rows never leave the machine", s)
	}
	w.URL = s
	return nil
}

func setWebhookFolder(w *Webhook, s string) error {
	if s != "" {
		if _, err := groupfolder.Parse(s); err != nil {
			return err
		}
	}
	w.Folder = s
	return nil
}

func setWebhookPlatform(w *Webhook, s string) error {
	if len(s) > 64 || strings.ContainsFunc(s, func(r rune) bool { return r == ':' || r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("%q: not a platform (the part of a chat before its ':', like tg)", s)
	}
	w.Platform = s
	return nil
}

// webhooks reads the [[webhook]] tables of p.
func (l *loader) webhooks(md *toml.MetaData, path string, p toml.Primitive) error {
	var tables []map[string]toml.Primitive
	if err := md.PrimitiveDecode(p, &tables); err != nil {
		return &Error{Source: path, Line: lineOf(md, p), Key: "webhook", Err: errors.New("want [[webhook]] tables")}
	}
	for i, t := range tables {
		w := Webhook{Timeout: defaultWebhookTimeout, Backoff: defaultWebhookBackoff, MaxBackoff: defaultWebhookMaxBackoff}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		// The first mistake in the file is the one reported.
		sort.Slice(keys, func(a, b int) bool { return lineOf(md, t[keys[a]]) < lineOf(md, t[keys[b]]) })
		line := 0
		for _, k := range keys {
			name := fmt.Sprintf("webhook[%d].%s", i, k)
			set, ok := webhookKeys[k]
			if !ok {
				return &Error{Source: path, Line: lineOf(md, t[k]), Key: name, Err: errors.New("unknown key (url, secret_file, folder, platform, timeout, backoff, max_backoff)")}
			}
			var failed error
			err := md.PrimitiveDecode(t[k], unmarshaler(func(v any) error {
				failed = set(&w, v)
				return failed
			}))
			if err != nil {
				if failed == nil {
					failed = err
				}
				return &Error{Source: path, Line: lineOf(md, t[k]), Key: name, Err: failed}
			}
			line = max(line, lineOf(md, t[k]))
		}
		for _, req := range []struct{ key, v string }{{"url", w.URL}, {"secret_file", w.SecretFile}} {
			if req.v == "" {
				return &Error{Source: path, Line: line, Key: fmt.Sprintf("webhook[%d].%s", i, req.key), Err: errors.New("required")}
			}
		}
		if w.MaxBackoff < w.Backoff {
			return &Error{Source: path, Line: line, Key: fmt.Sprintf("webhook[%d].max_backoff", i),
				Err: fmt.Errorf("%s is shorter than backoff %s", w.MaxBackoff, w.Backoff)}
		}
		l.c.Webhooks = append(l.c.Webhooks, w)
	}
	return nil
}
