// Package scheduler fires scheduled tasks: it reads their schedules (cron,
// fixed interval, once) and, in the daemon, claims the due tasks from the
// store and queues one isolated turn for each.
//
// It owns the meaning of a task's schedule (NextRun, Validate) and the loop
// that claims due tasks (Scheduler). It must not touch engines, containers,
// group directories or the network, and it keeps no state of its own: the
// tasks, their next due times and the runs they queue all live in the store,
// whose ClaimDueTasks makes each claim atomic.
//
// # Schedules
//
// A task's schedule is a kind and an expression:
//
//   - cron: a standard 5-field cron expression (minute hour day-of-month month
//     day-of-week, as in crontab(5) but with Sunday 0 only, not 7; parsed by
//     github.com/robfig/cron/v3), or one of the descriptors @yearly
//     (@annually), @monthly, @weekly, @daily (@midnight) and @hourly. There is no seconds field, no time zone prefix
//     (TZ=, CRON_TZ=) and no @every (that is the interval kind). It is read in
//     the daemon's time zone.
//   - interval: a Go duration ("90s", "15m", "1h30m") or a whole number of
//     milliseconds ("60000"), at least MinInterval. A task fires every
//     interval, counted from its first due time.
//   - once: an RFC 3339 time with its offset ("2030-01-02T09:00:00+01:00"),
//     which must lie in the future when the task is made. After it fired the
//     task is completed.
//
// # Daylight saving time
//
// Cron times are wall-clock times in the daemon's zone. When the clock jumps
// or goes back, the hour field decides (as in Vixie cron, which looks at the
// minute field too):
//
//   - A schedule whose hour field starts with * (every hour, or */2 ...)
//     follows the clock: when the clock goes back it fires again in the
//     repeated hour, and a skipped hour has no times to fire.
//   - Any other schedule names hours, and each of its wall-clock times fires
//     once a day: when the clock goes back (02:30 occurs twice in Berlin on
//     the last Sunday of October) it fires at the first occurrence only; when
//     the clock jumps over it (02:30 on the last Sunday of March) it fires as
//     far after the jump as it lay inside the gap (03:30), as java.time
//     resolves such times.
//
// # Firing, catch-up and restarts
//
// A task fires when the daemon's clock reaches its due time (NextRunAt): the
// scheduler checks at least every Poll. The next due
// time is computed from the slot that fired, not from the moment the check
// ran, so intervals do not drift. Slots missed while the daemon was down (or
// the host slept) are not replayed: the task fires once, late, and its next
// due time is the first slot of its schedule after now. A daemon down for a
// day thus runs an hourly task once on start, not 24 times. A once task whose
// time passed while the daemon was down fires once on start.
//
// The store claims a slot exactly when it queues the slot's run, in one
// transaction, so a restart (or a crash at any point) never loses a due task
// nor fires one slot twice.
//
// # The run
//
// A due task queues a store.Run of kind task naming the task; the runner
// names its container arizuko-<folder>-task-<task_id>-<unix_ms>, a name of
// its own for each run, as the last run's container may still be being
// removed when the next one starts. Its input is the task's
// prompt as the only user message, sender scheduler-isolated:<task_id> and an
// empty session id: the turn is isolated, starting a fresh agent session
// rather than continuing the group's, so a scheduled prompt neither sees nor
// disturbs the group's conversation.
package scheduler
