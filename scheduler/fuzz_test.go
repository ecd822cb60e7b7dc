package scheduler

import (
	"errors"
	"testing"
	"time"
)

// fuzzZones have daylight saving, half-hour shifts, midnight jumps and a
// date-line move.
var fuzzZones = []string{"UTC", "Europe/Berlin", "America/Santiago", "Australia/Lord_Howe", "Pacific/Apia", "America/New_York"}

// FuzzNextRun: NextRun never panics; what it returns lies after `after`, and
// for cron it is the schedule's first time after `after` (asking again from
// just before it gives it again); a schedule NextRun takes Validate takes.
func FuzzNextRun(f *testing.F) {
	for _, s := range []struct {
		kind, expr string
		after      int64
	}{
		{"cron", "0 9 * * *", 1_711_800_000},
		{"cron", "30 2 * * *", 1_711_846_800},
		{"cron", "*/15 * * * *", 1_729_990_000},
		{"cron", "@daily", 1_725_700_000},
		{"cron", "0 0 29 2 *", 1_700_000_000},
		{"cron", "0 0 9 * * *", 0},
		{"cron", "TZ=", 0},
		{"cron", "1-2/0 * * * *", 0},
		{"interval", "90s", 1_700_000_000},
		{"interval", "60000", 1_700_000_000},
		{"once", "2030-01-02T09:00:00+01:00", 1_700_000_000},
	} {
		for i := range fuzzZones {
			f.Add(s.kind, s.expr, s.after, uint8(i))
		}
	}
	locs := make([]*time.Location, len(fuzzZones))
	for i, z := range fuzzZones {
		locs[i] = mustLoad(f, z)
	}
	f.Fuzz(func(t *testing.T, kind, expr string, afterSec int64, zone uint8) {
		// Times from 1900 to 2100, to the millisecond.
		const span = 200 * 365 * 24 * 3600 * 1000
		ms := afterSec % span
		if ms < 0 {
			ms += span
		}
		after := time.UnixMilli(ms - 70*365*24*3600*1000)
		loc := locs[int(zone)%len(locs)]
		next, err := NextRun(kind, expr, after, loc)
		if err != nil {
			if !errors.Is(err, ErrInvalidSchedule) {
				t.Fatalf("NextRun(%q, %q) error %v is not ErrInvalidSchedule", kind, expr, err)
			}
			return
		}
		if next <= after.UnixMilli() {
			t.Fatalf("NextRun(%q, %q, %s) = %d, not after %d", kind, expr, after, next, after.UnixMilli())
		}
		if err := Validate(kind, expr); err != nil {
			t.Fatalf("NextRun(%q, %q) succeeded but Validate: %v", kind, expr, err)
		}
		if kind != KindCron {
			return
		}
		again, err := NextRun(kind, expr, time.UnixMilli(next-1), loc)
		if err != nil || again != next {
			t.Fatalf("NextRun(%q, %q, %s in %s) = %s, but from 1ms before that: %s, %v", kind, expr, after, loc,
				time.UnixMilli(next).In(loc), time.UnixMilli(again).In(loc), err)
		}
	})
}
