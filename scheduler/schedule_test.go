package scheduler

import (
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata"
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestNextRun(t *testing.T) {
	for _, tt := range []struct {
		name, kind, expr, after, loc string
		want                         string // RFC 3339, or the error's text
	}{
		// cron, read in the daemon's zone
		{"daily", "cron", "0 9 * * *", "2024-05-01T10:00:00+02:00", "Europe/Berlin", "2024-05-02T09:00:00+02:00"},
		{"daily before its time", "cron", "0 9 * * *", "2024-05-01T08:59:59.999+02:00", "Europe/Berlin", "2024-05-01T09:00:00+02:00"},
		{"strictly after", "cron", "0 9 * * *", "2024-05-01T09:00:00+02:00", "Europe/Berlin", "2024-05-02T09:00:00+02:00"},
		{"same expression in Tokyo", "cron", "0 9 * * *", "2024-05-01T10:00:00+02:00", "Asia/Tokyo", "2024-05-02T09:00:00+09:00"},
		{"spaces", "cron", "  0   9 *\t* * ", "2024-05-01T10:00:00Z", "UTC", "2024-05-02T09:00:00Z"},
		{"weekdays", "cron", "0 9 * * 1-5", "2024-05-03T10:00:00Z", "UTC", "2024-05-06T09:00:00Z"},
		{"names", "cron", "0 9 * jan mon", "2024-05-03T10:00:00Z", "UTC", "2025-01-06T09:00:00Z"},
		{"steps", "cron", "*/15 * * * *", "2024-05-03T10:07:00Z", "UTC", "2024-05-03T10:15:00Z"},
		{"day of month or week", "cron", "0 0 13 * 5", "2024-05-01T00:00:00Z", "UTC", "2024-05-03T00:00:00Z"},
		{"leap day", "cron", "0 0 29 2 *", "2025-01-01T00:00:00Z", "UTC", "2028-02-29T00:00:00Z"},
		{"@daily", "cron", "@daily", "2024-05-01T10:00:00+02:00", "Europe/Berlin", "2024-05-02T00:00:00+02:00"},
		{"@midnight", "cron", "@midnight", "2024-05-01T10:00:00Z", "UTC", "2024-05-02T00:00:00Z"},
		{"@hourly", "cron", "@hourly", "2024-05-01T10:20:00Z", "UTC", "2024-05-01T11:00:00Z"},
		{"@weekly", "cron", "@weekly", "2024-05-01T10:00:00Z", "UTC", "2024-05-05T00:00:00Z"},
		{"@monthly", "cron", "@monthly", "2024-05-01T10:00:00Z", "UTC", "2024-06-01T00:00:00Z"},
		{"@yearly", "cron", "@yearly", "2024-05-01T10:00:00Z", "UTC", "2025-01-01T00:00:00Z"},
		{"@annually", "cron", "@annually", "2024-05-01T10:00:00Z", "UTC", "2025-01-01T00:00:00Z"},

		// DST in Berlin: spring forward 2024-03-31 02:00 CET -> 03:00 CEST,
		// fall back 2024-10-27 03:00 CEST -> 02:00 CET.
		{"9:00 stays 9:00 into summer", "cron", "0 9 * * *", "2024-03-30T10:00:00+01:00", "Europe/Berlin", "2024-03-31T09:00:00+02:00"},
		{"9:00 stays 9:00 into winter", "cron", "0 9 * * *", "2024-10-26T10:00:00+02:00", "Europe/Berlin", "2024-10-27T09:00:00+01:00"},
		{"skipped 02:30 fires at 03:30", "cron", "30 2 * * *", "2024-03-30T03:00:00+01:00", "Europe/Berlin", "2024-03-31T03:30:00+02:00"},
		{"skipped 02:30 from inside the jump", "cron", "30 2 * * *", "2024-03-31T03:10:00+02:00", "Europe/Berlin", "2024-03-31T03:30:00+02:00"},
		{"after the skipped 02:30", "cron", "30 2 * * *", "2024-03-31T03:30:00+02:00", "Europe/Berlin", "2024-04-01T02:30:00+02:00"},
		{"repeated 02:30 fires first", "cron", "30 2 * * *", "2024-10-27T01:00:00+02:00", "Europe/Berlin", "2024-10-27T02:30:00+02:00"},
		{"repeated 02:30 fires once", "cron", "30 2 * * *", "2024-10-27T02:30:00+02:00", "Europe/Berlin", "2024-10-28T02:30:00+01:00"},
		{"repeated 02:30 made in the second pass", "cron", "30 2 * * *", "2024-10-27T02:10:00+01:00", "Europe/Berlin", "2024-10-28T02:30:00+01:00"},
		{"hourly follows the clock back", "cron", "30 * * * *", "2024-10-27T02:30:00+02:00", "Europe/Berlin", "2024-10-27T02:30:00+01:00"},
		{"quarter hours follow the clock back", "cron", "*/15 * * * *", "2024-10-27T02:50:00+02:00", "Europe/Berlin", "2024-10-27T02:00:00+01:00"},
		{"hourly skips the missing hour", "cron", "30 * * * *", "2024-03-31T01:30:00+01:00", "Europe/Berlin", "2024-03-31T03:30:00+02:00"},
		{"@daily where midnight is skipped", "cron", "@daily", "2024-09-07T12:00:00-04:00", "America/Santiago", "2024-09-08T01:00:00-03:00"},
		{"half-hour shift", "cron", "15 2 * * *", "2024-10-05T12:00:00+10:30", "Australia/Lord_Howe", "2024-10-06T02:45:00+11:00"},

		// cron errors
		{"seconds", "cron", "0 0 9 * * *", "2024-05-01T10:00:00Z", "UTC", `6 fields: seconds (and years) are not supported; want 5 fields: minute hour day-of-month month day-of-week`},
		{"years", "cron", "0 0 9 * * * 2025", "2024-05-01T10:00:00Z", "UTC", `7 fields: seconds`},
		{"four fields", "cron", "0 9 * *", "2024-05-01T10:00:00Z", "UTC", `4 fields: want 5`},
		{"minute", "cron", "61 * * * *", "2024-05-01T10:00:00Z", "UTC", `cron "61 * * * *": minute field "61": `},
		{"hour", "cron", "0 24 * * *", "2024-05-01T10:00:00Z", "UTC", `hour field "24"`},
		{"day of month", "cron", "0 0 0 * *", "2024-05-01T10:00:00Z", "UTC", `day-of-month field "0"`},
		{"month", "cron", "0 0 * 13 *", "2024-05-01T10:00:00Z", "UTC", `month field "13"`},
		{"day of week", "cron", "0 0 * * 8", "2024-05-01T10:00:00Z", "UTC", `day-of-week field "8"`},
		{"bad step", "cron", "*/0 * * * *", "2024-05-01T10:00:00Z", "UTC", `minute field "*/0"`},
		{"word", "cron", "0 9 * * someday", "2024-05-01T10:00:00Z", "UTC", `day-of-week field "someday"`},
		{"no such date", "cron", "0 0 30 2 *", "2024-05-01T10:00:00Z", "UTC", `matches no date`},
		{"time zone prefix", "cron", "CRON_TZ=Europe/Berlin 0 9 * * *", "2024-05-01T10:00:00Z", "UTC", `time zone prefix is not supported`},
		{"TZ prefix without space", "cron", "TZ=Europe/Berlin", "2024-05-01T10:00:00Z", "UTC", `time zone prefix is not supported`},
		{"@every", "cron", "@every 5m", "2024-05-01T10:00:00Z", "UTC", `@every is not a cron schedule: use the interval kind`},
		{"unknown descriptor", "cron", "@fortnightly", "2024-05-01T10:00:00Z", "UTC", `unknown descriptor "@fortnightly"`},
		{"empty", "cron", " ", "2024-05-01T10:00:00Z", "UTC", `invalid schedule: cron " ": empty`},
		{"too long", "cron", strings.Repeat("1,", 200) + "1 * * * *", "2024-05-01T10:00:00Z", "UTC", `longer than 256 bytes`},

		// interval
		{"interval duration", "interval", "90s", "2024-05-01T10:00:00Z", "UTC", "2024-05-01T10:01:30Z"},
		{"interval compound", "interval", "1h30m", "2024-05-01T10:00:00Z", "UTC", "2024-05-01T11:30:00Z"},
		{"interval milliseconds", "interval", "60000", "2024-05-01T10:00:00.5Z", "UTC", "2024-05-01T10:01:00.5Z"},
		{"interval minimum", "interval", "10s", "2024-05-01T10:00:00Z", "UTC", "2024-05-01T10:00:10Z"},
		{"interval kept to the millisecond", "interval", "10s500us", "2024-05-01T10:00:00Z", "UTC", "2024-05-01T10:00:10Z"},
		{"interval too short", "interval", "5s", "2024-05-01T10:00:00Z", "UTC", `interval "5s": 5s is shorter than the minimum 10s`},
		{"interval zero", "interval", "0", "2024-05-01T10:00:00Z", "UTC", `0s is shorter than the minimum`},
		{"interval negative", "interval", "-1m", "2024-05-01T10:00:00Z", "UTC", `-1m0s is shorter than the minimum`},
		{"interval days", "interval", "1d", "2024-05-01T10:00:00Z", "UTC", `interval "1d": not a duration`},
		{"interval too long", "interval", "99999999999999999", "2024-05-01T10:00:00Z", "UTC", `too long`},

		// once
		{"once in the future", "once", "2030-01-02T09:00:00+01:00", "2024-05-01T10:00:00Z", "UTC", "2030-01-02T09:00:00+01:00"},
		{"once in a second", "once", "2024-05-01T10:00:01Z", "2024-05-01T10:00:00Z", "UTC", "2024-05-01T10:00:01Z"},
		{"once now", "once", "2024-05-01T10:00:00Z", "2024-05-01T10:00:00Z", "UTC", `once "2024-05-01T10:00:00Z": 2024-05-01T10:00:00Z is not after 2024-05-01T10:00:00Z`},
		{"once in the past", "once", "2020-01-01T00:00:00Z", "2024-05-01T10:00:00Z", "UTC", `is not after`},
		{"once without offset", "once", "2030-01-02T09:00:00", "2024-05-01T10:00:00Z", "UTC", `not an RFC 3339 time`},
		{"once with a space", "once", "2030-01-02 09:00", "2024-05-01T10:00:00Z", "UTC", `not an RFC 3339 time`},

		{"unknown kind", "weekly", "monday", "2024-05-01T10:00:00Z", "UTC", `invalid schedule: kind "weekly": want cron, interval or once`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NextRun(tt.kind, tt.expr, mustTime(t, tt.after), mustLoad(t, tt.loc))
			if want, perr := time.Parse(time.RFC3339Nano, tt.want); perr == nil {
				if err != nil {
					t.Fatalf("NextRun(%q, %q) error: %v", tt.kind, tt.expr, err)
				}
				if got != want.UnixMilli() {
					t.Errorf("NextRun(%q, %q) = %s, want %s", tt.kind, tt.expr,
						time.UnixMilli(got).In(want.Location()).Format(time.RFC3339Nano), tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("NextRun(%q, %q) = %s, want error %q", tt.kind, tt.expr, time.UnixMilli(got).UTC(), tt.want)
			}
			if !errors.Is(err, ErrInvalidSchedule) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NextRun(%q, %q) error = %v, want ErrInvalidSchedule with %q", tt.kind, tt.expr, err, tt.want)
			}
		})
	}
}

// TestNextRunDays walks a year of a daily and an hourly schedule through
// Berlin's two DST changes: the daily one fires once a day at its wall-clock
// time, the hourly one once per real hour.
func TestNextRunDays(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, berlin)
	end := start.AddDate(1, 0, 0)
	for _, tt := range []struct {
		expr  string
		count int
	}{
		{"30 2 * * *", 366},
		{"0 12 * * *", 366},
		{"30 * * * *", int(end.Sub(start) / time.Hour)},
	} {
		n, at := 0, start
		for {
			next, err := NextRun(KindCron, tt.expr, at, berlin)
			if err != nil {
				t.Fatal(err)
			}
			nt := time.UnixMilli(next).In(berlin)
			if !nt.Before(end) {
				break
			}
			if tt.count == 366 && nt.Sub(at) > 25*time.Hour {
				t.Errorf("%s: from %s to %s", tt.expr, at, nt)
			}
			n, at = n+1, nt
		}
		if n != tt.count {
			t.Errorf("%s: %d times in 2024, want %d", tt.expr, n, tt.count)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		kind, expr string
		ok         bool
	}{
		{"cron", "0 9 * * *", true},
		{"cron", "@hourly", true},
		{"cron", "0 0 29 2 *", true},
		{"cron", "0 0 30 2 *", false},
		{"cron", "0 0 9 * * *", false},
		{"interval", "10s", true},
		{"interval", "9999ms", false},
		{"once", "2000-01-01T00:00:00Z", true}, // well-formed; NextRun says it is past
		{"once", "tomorrow", false},
		{"", "0 9 * * *", false},
	} {
		err := Validate(tt.kind, tt.expr)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidSchedule)) {
			t.Errorf("Validate(%q, %q) = %v, want ok %v", tt.kind, tt.expr, err, tt.ok)
		}
	}
}

// Validate reports whether the schedule is well-formed: the checks of NextRun
// that do not depend on the time. A cron expression must match some time (not
// "0 0 30 2 *"); whether a once time lies in the future is NextRun's to say.
func Validate(kind, expr string) error {
	_, err := parse(kind, expr)
	return err
}
