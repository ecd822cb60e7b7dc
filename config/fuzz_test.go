package config

import (
	"errors"
	"os"
	"testing"
)

func FuzzDecode(f *testing.F) {
	if sample, err := os.ReadFile("testdata/arizukod.toml"); err == nil {
		f.Add(sample)
		f.Add(settingLine.ReplaceAll(sample, []byte("$1")))
	}
	for _, s := range []string{
		"run_timeout = \"5q\"\n",
		"[limits]\nmemory = \"1x\"\ncpus = nan\n",
		"limits.foo.bar = 1\n",
		"[[memory]]\n",
		"env_allow = [[1], {a = 1}]\n",
		"a.\"b.c\".d = 1\n",
		"listen = \"unix:\"\n",
		"engine_socket = \"tcp://[::1]:0\"\n",
		"[limits]\nnetwork = \"container:x\"\nallowed_networks = [\"host\", 1]\nallow_unlimited = 1\n",
		"[prices.\"m\"]\ninput = 1e300\noutput = nan\ncache_read = -0.0\ncache_write = inf\n[prices.x.y]\nz = 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l := &loader{c: &Config{}, set: map[string]bool{}, lines: map[string]int{}}
		err := l.decode("f.toml", data)
		var ce *Error
		if err != nil && (!errors.As(err, &ce) || ce.Source != "f.toml") {
			t.Fatalf("decode: %v is not an *Error of f.toml", err)
		}
	})
}

func FuzzEnvironment(f *testing.F) {
	for _, s := range []string{"/srv/x", "unix:/run/x.sock", ":8080", "20m", "image:tag", "", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, e := range envVars {
			l := &loader{c: &Config{}, set: map[string]bool{}, lines: map[string]int{}}
			err := l.environment(env(e.name, v))
			var ce *Error
			if err != nil && (!errors.As(err, &ce) || ce.Key != e.name) {
				t.Fatalf("%s=%q: %v does not name the variable", e.name, v, err)
			}
		}
	})
}
