package main

import (
	"fmt"
	"slices"
	"time"
)

// sample is a set of measured durations.
type sample []time.Duration

// pct is the p-th percentile by nearest rank (p in 0..100); zero for an empty sample.
func (s sample) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

func (s sample) p50() time.Duration { return s.pct(50) }

// ms formats a duration in milliseconds with one decimal.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// ratio formats a/b with two decimals, or "-" when b is zero.
func ratio(a, b time.Duration) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}
