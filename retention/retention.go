// Package retention keeps arizukod small: by the [retention] rules of arizukod.toml it
// prunes the store's finished runs, consumed inbox messages and outbox items, removes the
// groups' old run logs (groups/<folder>/logs/container-<unix_ms>.log) and compacts the
// database, every retention.interval in the daemon and on demand (`arizukod prune`).
//
// It owns applying the rules. What a queued or running turn still needs is kept by the
// store's own queries (store.Prune), and the logs directory is read and written through
// groupfolder, which follows no symlink; it must not touch anything else of a group.
package retention

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/store"
)

// Store is what pruning needs of the store.
type Store interface {
	Prune(ctx context.Context, r store.PruneRules) (store.Pruned, error)
	Compact(ctx context.Context) (store.Compacted, error)
	ListGroups(ctx context.Context) ([]store.Group, error)
}

// Report is what one pruning removed (or, dry, would remove).
type Report struct {
	DryRun   bool
	Runs     int64
	Inbox    int64
	Outbox   int64
	Logs     int
	LogBytes int64
	// The database's size before and after compaction; a dry run does not compact.
	DBBytesBefore int64
	DBBytesAfter  int64
	Vacuumed      bool
	// LogErrors are the groups whose logs could not be pruned, with why; the rest went on.
	LogErrors []string
}

// Prune applies rules at now: the store's rows in one transaction, then each registered
// group's run logs, then compaction. A group whose logs cannot be read (a symlink planted
// in its path, say) is reported in LogErrors and does not stop the others.
func Prune(ctx context.Context, st Store, layout groupfolder.Layout, rules config.Retention, now time.Time, dryRun bool) (Report, error) {
	rep := Report{DryRun: dryRun}
	keep := func(age time.Duration, count int) store.Keep {
		k := store.Keep{Count: count}
		if age > 0 {
			k.Before = now.Add(-age).UnixMilli()
		}
		return k
	}
	p, err := st.Prune(ctx, store.PruneRules{
		Runs:   keep(rules.RunsMaxAge, rules.RunsMaxCount),
		Inbox:  keep(rules.InboxMaxAge, rules.InboxMaxCount),
		Outbox: keep(rules.OutboxMaxAge, rules.OutboxMaxCount),
		DryRun: dryRun,
	})
	if err != nil {
		return rep, err
	}
	rep.Runs, rep.Inbox, rep.Outbox = p.Runs, p.Inbox, p.Outbox
	groups, err := st.ListGroups(ctx)
	if err != nil {
		return rep, err
	}
	logs := keep(rules.LogsMaxAge, rules.LogsMaxCount)
	for _, g := range groups {
		f, err := groupfolder.Parse(g.Folder)
		if err != nil {
			rep.LogErrors = append(rep.LogErrors, fmt.Sprintf("%s: %v", g.Folder, err))
			continue
		}
		n, bytes, err := pruneLogs(layout, f, logs, dryRun)
		rep.Logs += n
		rep.LogBytes += bytes
		if err != nil {
			rep.LogErrors = append(rep.LogErrors, fmt.Sprintf("%s: %v", g.Folder, err))
		}
	}
	if dryRun {
		return rep, nil
	}
	c, err := st.Compact(ctx)
	if err != nil {
		return rep, err
	}
	rep.DBBytesBefore, rep.DBBytesAfter, rep.Vacuumed = c.BytesBefore, c.BytesAfter, c.Vacuumed
	return rep, nil
}

// pruneLogs removes f's run logs that started before k.Before or are beyond the newest
// k.Count, and returns how many and their bytes.
func pruneLogs(layout groupfolder.Layout, f groupfolder.Folder, k store.Keep, dryRun bool) (int, int64, error) {
	if k == (store.Keep{}) {
		return 0, 0, nil
	}
	dir, err := layout.OpenLogs(f)
	if err != nil || dir == nil {
		return 0, 0, err
	}
	defer dir.Close()
	list, err := dir.List()
	if err != nil {
		return 0, 0, err
	}
	slices.SortFunc(list, func(a, b groupfolder.RunLog) int { return cmp.Compare(b.StartedMS, a.StartedMS) })
	var (
		n     int
		bytes int64
		errs  []error
	)
	for i, l := range list {
		if !(k.Before > 0 && l.StartedMS < k.Before) && !(k.Count > 0 && i >= k.Count) {
			continue
		}
		if !dryRun {
			if err := dir.Remove(l.Name); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		n++
		bytes += l.Size
	}
	return n, bytes, errors.Join(errs...)
}

// Run prunes every interval until ctx ends, logging what went. It reads the rules at each
// round, so a reload applies from the round after the current wait; while the interval is
// 0 it looks again every minute. The first round is one interval after the start: a
// restarting daemon does not prune first thing.
func Run(ctx context.Context, st Store, layout groupfolder.Layout, rules func() config.Retention, log *slog.Logger) {
	for {
		wait := rules().Interval
		if wait <= 0 {
			wait = time.Minute
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		r := rules()
		if r.Interval <= 0 {
			continue
		}
		rep, err := Prune(ctx, st, layout, r, time.Now(), false)
		switch {
		case err != nil:
			log.Error("retention: pruning failed; it is tried again next interval", "err", err)
		case rep.Runs+rep.Inbox+rep.Outbox > 0 || rep.Logs > 0 || rep.Vacuumed:
			log.Info("retention: pruned", "runs", rep.Runs, "inbox", rep.Inbox, "outbox", rep.Outbox,
				"logs", rep.Logs, "log_bytes", rep.LogBytes, "db_bytes_before", rep.DBBytesBefore,
				"db_bytes_after", rep.DBBytesAfter, "vacuumed", rep.Vacuumed)
		}
		if len(rep.LogErrors) > 0 {
			log.Warn("retention: some groups' run logs were not pruned", "errors", rep.LogErrors)
		}
	}
}
