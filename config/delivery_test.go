package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestWebhooks(t *testing.T) {
	p := writeFile(t, `[delivery]
visibility_timeout = "5s"
max_attempts = 20

[[webhook]]
url = "unix:/run/gw/hook.sock"
secret_file = "/etc/arizuko/hook-secret"
folder = "main/research"
platform = "tg"
timeout = "2s"
backoff = "50ms"
max_backoff = "1s"

[[webhook]]
url = "http://127.0.0.1:8080/arizuko"
secret_file = "/etc/arizuko/other"
`)
	c, err := Load(ModeSystem, p, env())
	if err != nil {
		t.Fatal(err)
	}
	want := []Webhook{
		{URL: "unix:/run/gw/hook.sock", SecretFile: "/etc/arizuko/hook-secret", Folder: "main/research", Platform: "tg",
			Timeout: 2 * time.Second, Backoff: 50 * time.Millisecond, MaxBackoff: time.Second},
		{URL: "http://127.0.0.1:8080/arizuko", SecretFile: "/etc/arizuko/other", Timeout: 10 * time.Second,
			Backoff: time.Second, MaxBackoff: 5 * time.Minute},
	}
	if !reflect.DeepEqual(c.Webhooks, want) || c.Delivery != (DeliveryConf{VisibilityTimeout: 5 * time.Second, MaxAttempts: 20}) {
		t.Errorf("got %+v %+v", c.Webhooks, c.Delivery)
	}
	if c.Webhooks[0].Unix() != "/run/gw/hook.sock" || c.Webhooks[1].Unix() != "" {
		t.Errorf("Unix() = %q, %q", c.Webhooks[0].Unix(), c.Webhooks[1].Unix())
	}
}

func TestWebhookErrors(t *testing.T) {
	const ok = "url = \"unix:/run/hook.sock\"\nsecret_file = \"/etc/s\"\n"
	tests := []struct {
		name, body, key, msg string
		line                 int
	}{
		{"not loopback", "[[webhook]]\nurl = \"http://10.0.0.1/x\"\nsecret_file = \"/etc/s\"\n", "webhook[0].url", "loopback", 2},
		{"https", "[[webhook]]\nurl = \"https://127.0.0.1/x\"\nsecret_file = \"/etc/s\"\n", "webhook[0].url", "want http://", 2},
		{"relative socket", "[[webhook]]\nurl = \"unix:hook.sock\"\nsecret_file = \"/etc/s\"\n", "webhook[0].url", "absolute", 2},
		{"no secret", "[[webhook]]\nurl = \"unix:/run/hook.sock\"\n", "webhook[0].secret_file", "required", 2},
		{"no url", "[[webhook]]\nsecret_file = \"/etc/s\"\n", "webhook[0].url", "required", 2},
		{"unknown key", "[[webhook]]\n" + ok + "retries = 3\n", "webhook[0].retries", "unknown key", 4},
		{"bad folder", "[[webhook]]\n" + ok + "folder = \"../x\"\n", "webhook[0].folder", "", 4},
		{"bad platform", "[[webhook]]\n" + ok + "platform = \"tg:1\"\n", "webhook[0].platform", "platform", 4},
		{"bad timeout", "[[webhook]]\n" + ok + "timeout = \"soon\"\n", "webhook[0].timeout", "duration", 4},
		{"backoff order", "[[webhook]]\n" + ok + "backoff = \"2s\"\nmax_backoff = \"1s\"\n", "webhook[0].max_backoff", "shorter", 5},
		{"second table", "[[webhook]]\n" + ok + "[[webhook]]\nurl = 3\n", "webhook[1].url", "want a string", 5},
		{"not tables", "webhook = \"x\"\n", "webhook", "[[webhook]]", 1},
		{"attempts", "[delivery]\nmax_attempts = 0\n", "delivery.max_attempts", "between", 2},
		{"visibility", "[delivery]\nvisibility_timeout = \"1ms\"\n", "delivery.visibility_timeout", "between", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(ModeSystem, writeFile(t, tt.body), env())
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != tt.key || ce.Line != tt.line || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want key %s at line %d saying %q", err, tt.key, tt.line, tt.msg)
			}
		})
	}
}
