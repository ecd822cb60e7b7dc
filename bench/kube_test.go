package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServicePid: a pid file names its process only while that process is alive and its
// command line holds the file's token; anything else is an error naming the file.
func TestServicePid(t *testing.T) {
	dir := t.TempDir()
	self := os.Getpid()
	cmdline, err := os.ReadFile("/proc/self/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	token := strings.SplitN(string(cmdline), "\x00", 2)[0]
	for _, tc := range []struct {
		name, text string
		want       int
		err        string
	}{
		{"ours", fmt.Sprintf("%d\n%s\n", self, token), self, ""},
		{"no token checks only that it lives", fmt.Sprintf("%d\n", self), self, ""},
		{"another process", fmt.Sprintf("%d\n/no/such/token\n", self), 0, "is another process"},
		{"not a pid", "x\ntoken\n", 0, "no pid"},
		{"dead", "2147483647\ntoken\n", 0, "is not alive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".pid")
			if err := os.WriteFile(f, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := servicePid(f)
			if tc.err == "" && (err != nil || got != tc.want) {
				t.Fatalf("servicePid = %d, %v; want %d", got, err, tc.want)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), f)) {
				t.Fatalf("servicePid = %d, %v; want an error naming %s: %s", got, err, f, tc.err)
			}
		})
	}
	if _, err := servicePid(filepath.Join(dir, "missing.pid")); err == nil {
		t.Error("a missing pid file named a process")
	}
}

// TestKubeletPidsLimit: podPidsLimit is read from the kubelet's configuration; a file
// without a positive one is an error naming it.
func TestKubeletPidsLimit(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       int64
	}{
		{"set", "kind: KubeletConfiguration\n  podPidsLimit: 1024\nmaxPods: 110\n", 1024},
		{"unset", "kind: KubeletConfiguration\n", 0},
		{"negative", "podPidsLimit: -1\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, tc.name+".yaml")
			if err := os.WriteFile(f, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := kubeletPidsLimit(f)
			if got != tc.want || (tc.want == 0) != (err != nil) || err != nil && !strings.Contains(err.Error(), f) {
				t.Fatalf("kubeletPidsLimit = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
