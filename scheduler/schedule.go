package scheduler

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// The schedule kinds, as store.ScheduleKind spells them.
const (
	KindCron     = "cron"
	KindInterval = "interval"
	KindOnce     = "once"
)

// MinInterval is the shortest interval a task may have. Every firing starts a
// container and an agent turn, which take seconds; a shorter interval would
// only pile up queued runs.
const MinInterval = 10 * time.Second

// maxExprLen bounds a schedule expression, so that errors quoting it stay short.
const maxExprLen = 256

// ErrInvalidSchedule is wrapped by every error about a schedule: a malformed
// expression, an unknown kind, a cron expression that never matches, a once
// time that is not in the future.
var ErrInvalidSchedule = errors.New("invalid schedule")

// NextRun returns the first time after `after` at which the schedule fires,
// in unix milliseconds; cron expressions are read in loc (nil: time.Local).
// For an interval it is after plus the interval; for once it is the time
// itself, which must be after `after` (at creation: in the future).
func NextRun(kind, expr string, after time.Time, loc *time.Location) (int64, error) {
	s, err := parse(kind, expr)
	if err != nil {
		return 0, err
	}
	return s.next(after, loc)
}

// schedule is a parsed schedule expression.
type schedule struct {
	kind string
	expr string
	// cron, with wildHour when its hour field starts with * (see instants).
	cron     cron.Schedule
	wildHour bool
	every    time.Duration // interval, whole milliseconds
	at       time.Time     // once
}

func (s schedule) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s %q: %s", ErrInvalidSchedule, s.kind, s.expr, fmt.Sprintf(format, args...))
}

func parse(kind, expr string) (schedule, error) {
	s := schedule{kind: kind, expr: expr}
	if len(expr) > maxExprLen {
		s.expr = expr[:32] + "..."
		return s, s.errorf("longer than %d bytes", maxExprLen)
	}
	if strings.TrimSpace(expr) == "" {
		return s, s.errorf("empty")
	}
	switch kind {
	case KindCron:
		return s, s.parseCron()
	case KindInterval:
		return s, s.parseInterval()
	case KindOnce:
		return s, s.parseOnce()
	}
	return s, fmt.Errorf("%w: kind %q: want %s, %s or %s", ErrInvalidSchedule, kind, KindCron, KindInterval, KindOnce)
}

// cronFields names the fields of a 5-field cron expression, in order.
var cronFields = [5]string{"minute", "hour", "day-of-month", "month", "day-of-week"}

// descriptors are the cron descriptors accepted, as 5-field expressions.
var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// neverRef is where Validate looks for a cron expression's first match: five
// years from it (the library's horizon) include two 29ths of February.
var neverRef = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func (s *schedule) parseCron() error {
	spec := strings.TrimSpace(s.expr)
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return s.errorf("a time zone prefix is not supported: schedules use the daemon's time zone")
	}
	if strings.HasPrefix(spec, "@") {
		d, _, _ := strings.Cut(spec, " ")
		if d == "@every" {
			return s.errorf("@every is not a cron schedule: use the interval kind")
		}
		std, ok := descriptors[spec]
		if !ok {
			return s.errorf("unknown descriptor %q: want @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly", spec)
		}
		spec = std
	}
	fields := strings.Fields(spec)
	switch {
	case len(fields) == 6 || len(fields) == 7:
		return s.errorf("%d fields: seconds (and years) are not supported; want 5 fields: %s", len(fields), strings.Join(cronFields[:], " "))
	case len(fields) != 5:
		return s.errorf("%d fields: want 5: %s", len(fields), strings.Join(cronFields[:], " "))
	}
	sched, err := cronParser.Parse(strings.Join(fields, " "))
	if err != nil {
		// Name the field: parse each alone, the others matching everything.
		for i, f := range fields {
			probe := []string{"*", "*", "*", "*", "*"}
			probe[i] = f
			if _, ferr := cronParser.Parse(strings.Join(probe, " ")); ferr != nil {
				return s.errorf("%s field %q: %v", cronFields[i], f, ferr)
			}
		}
		return s.errorf("%v", err)
	}
	if sched.Next(neverRef).IsZero() {
		return s.errorf("matches no date (the day never occurs in that month)")
	}
	s.cron = sched
	s.wildHour = strings.HasPrefix(fields[1], "*") || strings.HasPrefix(fields[1], "?")
	return nil
}

func (s *schedule) parseInterval() error {
	var d time.Duration
	if ms, err := strconv.ParseInt(s.expr, 10, 64); err == nil {
		if ms > math.MaxInt64/int64(time.Millisecond) {
			return s.errorf("%d milliseconds is too long", ms)
		}
		d = time.Duration(ms) * time.Millisecond
	} else if d, err = time.ParseDuration(s.expr); err != nil {
		return s.errorf("not a duration (like 90s, 15m, 1h30m) nor a number of milliseconds")
	}
	d = d.Truncate(time.Millisecond)
	if d < MinInterval {
		return s.errorf("%v is shorter than the minimum %v", d, MinInterval)
	}
	s.every = d
	return nil
}

func (s *schedule) parseOnce() error {
	t, err := time.Parse(time.RFC3339, s.expr)
	if err != nil {
		return s.errorf("not an RFC 3339 time with offset (like 2030-01-02T09:00:00+01:00): %v", err)
	}
	s.at = t
	return nil
}

// next is the first time of the schedule after `after`, in unix milliseconds.
func (s schedule) next(after time.Time, loc *time.Location) (int64, error) {
	if loc == nil {
		loc = time.Local
	}
	var t time.Time
	switch s.kind {
	case KindCron:
		if t = nextCron(s.cron, s.wildHour, after, loc); t.IsZero() {
			return 0, s.errorf("no time after %s within five years", after.In(loc).Format(time.RFC3339))
		}
	case KindInterval:
		t = after.Add(s.every)
	case KindOnce:
		if t = s.at; t.UnixMilli() <= after.UnixMilli() {
			return 0, s.errorf("%s is not after %s", t.Format(time.RFC3339), after.In(loc).Format(time.RFC3339))
		}
	}
	if t.UnixMilli() <= after.UnixMilli() {
		return 0, s.errorf("no time after %s that fits in unix milliseconds", after.Format(time.RFC3339))
	}
	return t.UnixMilli(), nil
}

// lookback exceeds any step of a wall clock in the tz database (daylight
// saving moves it by at most 2 hours), the date-line moves of whole days of a
// few islands aside.
const lookback = 3 * time.Hour

// nextCron returns the first instant after `after` whose wall clock in loc
// the schedule matches, per instants; zero if there is none within five
// years. The cron library only ever sees wall clocks in UTC, which has no
// daylight saving; instants maps them to loc. Since that map is not monotonic
// around a transition, it searches wall clocks from lookback before after's
// and stops once later wall clocks can only map later than the best found.
func nextCron(sched cron.Schedule, wildHour bool, after time.Time, loc *time.Location) time.Time {
	var best, bestWall time.Time
	// Every match is at second 0, so the one after w is the one after
	// w+59s, which spares the library a walk through the seconds.
	for w := sched.Next(wall(after, loc).Add(-lookback)); !w.IsZero(); w = sched.Next(w.Add(59 * time.Second)) {
		if !best.IsZero() && w.Sub(bestWall) > lookback {
			break
		}
		for _, t := range instants(w, loc, wildHour) {
			if t.After(after) && (best.IsZero() || t.Before(best)) {
				best, bestWall = t, wall(t, loc)
			}
		}
	}
	return best
}

// wall returns t's wall clock in loc as a time in UTC.
func wall(t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	y, m, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, m, d, h, mi, s, t.Nanosecond(), time.UTC)
}

// instants returns, in order, the instants at which the clock in loc reads
// the wall clock w (a time in UTC). Where the clock goes back a wall clock
// occurs twice: wildHour schedules follow the clock and get both, the others
// the first only. Where it jumps forward a wall clock never occurs: wildHour
// schedules skip it, the others get the instant as far after the jump as w
// lay inside the gap (w read with the offset before the jump).
func instants(w time.Time, loc *time.Location, wildHour bool) []time.Time {
	var (
		out    []time.Time
		minOff = math.MaxInt
	)
	// The instants reading w lie within a day of w as an instant, and so do
	// the offsets in force there.
	for _, probe := range [3]time.Time{w.Add(-24 * time.Hour), w, w.Add(24 * time.Hour)} {
		_, off := probe.In(loc).Zone()
		minOff = min(minOff, off)
		t := w.Add(-time.Duration(off) * time.Second)
		if wall(t, loc).Equal(w) && !slices.ContainsFunc(out, t.Equal) {
			out = append(out, t)
		}
	}
	switch {
	case len(out) == 0 && wildHour:
		return nil
	case len(out) == 0:
		return []time.Time{w.Add(-time.Duration(minOff) * time.Second)}
	}
	slices.SortFunc(out, time.Time.Compare)
	if !wildHour {
		out = out[:1]
	}
	return out
}
