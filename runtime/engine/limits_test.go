package engine

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestCheckNetwork is the network rule every entry point shares.
func TestCheckNetwork(t *testing.T) {
	allowed := []string{"agents", "lab.net"}
	for _, tc := range []struct {
		in, want, err string
	}{
		{"", "none", ""},
		{"none", "none", ""},
		{"bridge", "bridge", ""},
		{"slirp4netns", "slirp4netns", ""},
		{"slirp", "slirp4netns", ""},
		{"pasta", "pasta", ""},
		{"agents", "agents", ""},
		{"lab.net", "lab.net", ""},
		{"host", "", "host's network"},
		{"container:3f2a", "", "share another network namespace"},
		{"container:", "", "share another network namespace"},
		{"ns:/proc/1/ns/net", "", "share another network namespace"},
		{"netns:/run/netns/x", "", "share another network namespace"},
		{"ns-path:/run/netns/x", "", "share another network namespace"},
		{"private", "", "reserved"},
		{"default", "", "reserved"},
		{"HOST", "", "reserved"},
		{"Bridge", "", "reserved"},
		{"bridge:ip=10.0.0.5", "", "want \"none\""},
		{"slirp4netns:allow_host_loopback=true", "", "want \"none\""},
		{"pasta:--map-gw", "", "want \"none\""},
		{"agents,host", "", "want \"none\""},
		{"other", "", "not in limits.allowed_networks"},
		{"Agents", "", "not in limits.allowed_networks"},
		{"-x", "", "want \"none\""},
		{"a b", "", "want \"none\""},
		{"../../x", "", "want \"none\""},
		{strings.Repeat("n", 64), "", "want \"none\""},
		{"\x00", "", "want \"none\""},
	} {
		got, err := CheckNetwork(tc.in, allowed)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("CheckNetwork(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !errors.Is(err, ErrNetwork) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("CheckNetwork(%q) = %q, %v; want ErrNetwork with %q", tc.in, got, err, tc.err)
		}
	}
	if _, err := CheckNetwork("agents", nil); err == nil || !strings.Contains(err.Error(), "it lists none") {
		t.Errorf("a named network with nothing allowed: %v", err)
	}
}

func TestParseMemory(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"1g", 1 << 30, ""},
		{"1G", 1 << 30, ""},
		{"512m", 512 << 20, ""},
		{"6144k", 6 << 20, ""},
		{"6291456", 6 << 20, ""},
		{"0008g", 8 << 30, ""},
		{"8589934591g", 8589934591 << 30, ""},
		{"8589934592g", 0, "too large"},
		{"99999999999999999999", 0, "too large"},
		{"6291455", 0, "below the minimum"},
		{"0", 0, "below the minimum"},
		{"", 0, "not a memory size"},
		{"g", 0, "not a memory size"},
		{"1.5g", 0, "not a memory size"},
		{"-1g", 0, "not a memory size"},
		{"+1g", 0, "not a memory size"},
		{"1gb", 0, "not a memory size"},
		{"1t", 0, "not a memory size"},
		{" 1g", 0, "not a memory size"},
		{"1_000m", 0, "not a memory size"},
	} {
		got, err := ParseMemory(tc.in)
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("ParseMemory(%q) = %d, %v, want %d", tc.in, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), strconv.Quote(tc.in))) {
			t.Errorf("ParseMemory(%q) = %d, %v, want an error with %q", tc.in, got, err, tc.err)
		}
	}
}

func FuzzParseMemory(f *testing.F) {
	for _, s := range []string{"1g", "512M", "6291456", "9223372036854775807", "8589934592g", "", "k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseMemory(s)
		if err == nil && n < MinMemory {
			t.Fatalf("ParseMemory(%q) = %d, below MinMemory", s, n)
		}
	})
}
