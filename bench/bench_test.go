package main

import (
	"os"
	"slices"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) sample {
		var s sample
		for _, x := range v {
			s = append(s, time.Duration(x)*time.Millisecond)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		s    sample
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"median of odd", ms(5, 1, 3), 50, 3 * time.Millisecond},
		{"median of even takes the lower", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p90 of ten", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Millisecond},
		{"p100 is the max", ms(1, 9, 3), 100, 9 * time.Millisecond},
		{"p0 is the min", ms(4, 2, 8), 0, 2 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.pct(tc.p); got != tc.want {
				t.Errorf("pct(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

func TestParseRunLog(t *testing.T) {
	for _, tc := range []struct {
		name     string
		text     string
		id       string
		duration time.Duration
		events   map[string]time.Duration
	}{
		{
			name: "answered turn",
			text: "run: r_1\nfolder: bench\ncontainer: arizuko-bench-1\nstarted: 2026-01-02T03:04:05.5Z\nduration: 361ms\nexit: 0\n" +
				"stdout: 90 bytes\n\n-- events --\n10ms created 0123456789ab\n89ms started\n344ms exited 0 (exited)\n\n-- stderr (last 65536 bytes) --\nnoise: 12ms x\n",
			id: "r_1", duration: 361 * time.Millisecond,
			events: map[string]time.Duration{"created": 10 * time.Millisecond, "started": 89 * time.Millisecond, "exited": 344 * time.Millisecond},
		},
		{
			name: "the first of a repeated event counts",
			text: "run: r_2\nstarted: 2026-01-02T03:04:05Z\nduration: 1s\n\n-- events --\n1ms created x\n2ms created y\n",
			id:   "r_2", duration: time.Second,
			events: map[string]time.Duration{"created": time.Millisecond},
		},
		{
			name:   "no header",
			text:   "garbage\n",
			events: map[string]time.Duration{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, rl := parseRunLog(tc.text)
			if id != tc.id || rl.duration != tc.duration {
				t.Errorf("got id %q duration %v, want %q %v", id, rl.duration, tc.id, tc.duration)
			}
			if len(rl.events) != len(tc.events) {
				t.Errorf("events %v, want %v", rl.events, tc.events)
			}
			for k, v := range tc.events {
				if rl.events[k] != v {
					t.Errorf("event %s = %v, want %v", k, rl.events[k], v)
				}
			}
		})
	}
}

func TestParseGoBench(t *testing.T) {
	out := "goos: linux\nBenchmarkAssemble/dated-names-2   \t     160\t   7369312 ns/op\t     28737 prompt-bytes\t 1749928 B/op\t   15782 allocs/op\nPASS\nok  \tx\t3.1s\n"
	got := parseGoBench("./memory/", out)
	if len(got) != 1 {
		t.Fatalf("got %d rows, want 1: %+v", len(got), got)
	}
	want := []string{"7369312 ns/op", "28737 prompt-bytes", "1749928 B/op", "15782 allocs/op"}
	if got[0].name != "BenchmarkAssemble/dated-names-2" || got[0].iters != "160" || !slices.Equal(got[0].metrics, want) {
		t.Errorf("got %+v", got[0])
	}
}

// TestProcKB reads the figures the memory section takes from /proc for this process.
func TestProcKB(t *testing.T) {
	pid := os.Getpid()
	for _, tc := range []struct {
		name string
		read func() (int64, error)
	}{
		{"VmRSS", func() (int64, error) { return procStatusKB(pid, "VmRSS") }},
		{"RssAnon", func() (int64, error) { return procStatusKB(pid, "RssAnon") }},
		{"Pss", func() (int64, error) { return pssKB(pid) }},
	} {
		if kb, err := tc.read(); err != nil || kb <= 0 {
			t.Errorf("%s: %d KiB, %v", tc.name, kb, err)
		}
	}
	if _, err := procStatusKB(pid, "NoSuchField"); err == nil {
		t.Error("a missing field read as a figure")
	}
}
