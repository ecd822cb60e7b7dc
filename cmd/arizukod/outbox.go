package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
)

const outboxSynopsis = "[list] [--folder F] [--chat C] [--platform P] [--state parked|delivered|all] [--after ID] [--limit N] [--json]" +
	" | --follow [--folder F] [--chat C] [--platform P] [--json] | show ID | ack ID... --lease TOKEN | fail ID --lease TOKEN --error TEXT | retry ID"

func cmdOutbox(ctx context.Context, args []string) error {
	return runOutbox(ctx, args, os.Stdout)
}

// runOutbox is `arizukod outbox`: list shows rows with their delivery state without
// leasing them; --follow consumes the stream as a gateway would (prints each pending row as
// it comes and acknowledges it); show, ack, fail and retry act on single rows.
func runOutbox(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("outbox", outboxSynopsis)
	socket := socketFlag(fs)
	var q apiwire.OutboxQuery
	fs.StringVar(&q.Folder, "folder", "", "list, --follow: only rows of this folder")
	fs.StringVar(&q.Chat, "chat", "", "list, --follow: only rows addressed to this chat, e.g. tg:-100")
	fs.StringVar(&q.Platform, "platform", "", "list, --follow: only rows for this platform (the chat's part before ':')")
	state := fs.String("state", "all", "list: parked, delivered or all")
	fs.Int64Var(&q.After, "after", 0, "list, --follow: only rows with a greater id")
	fs.IntVar(&q.Limit, "limit", 100, "list: at most this many rows, oldest first")
	follow := fs.Bool("follow", false, "lease pending rows as they come, print and acknowledge each (a consumer: a gateway will not get them)")
	errText := fs.String("error", "", "fail: why delivering the row failed")
	lease := fs.String("lease", "", "ack, fail: the token of the lease that handed the rows out (the \"lease\" of GET /v1/outbox's answer)")
	asJSON := fs.Bool("json", false, "print rows as JSON (with --follow one per line)")

	verb, rest := "list", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		verb, rest = args[0], args[1:]
	}
	var ids []int64
	for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		id, err := strconv.ParseInt(rest[0], 10, 64)
		if err != nil || id <= 0 {
			fmt.Fprintf(fs.Output(), "arizukod outbox %s: %q is not a row id (a number, as `arizukod outbox` shows)\n", verb, rest[0])
			fs.Usage()
			return errUsage
		}
		ids, rest = append(ids, id), rest[1:]
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	usage := func(msg string) error {
		fmt.Fprintf(fs.Output(), "arizukod outbox %s: %s\n", verb, msg)
		fs.Usage()
		return errUsage
	}
	switch verb {
	case "list":
		if len(ids) > 0 {
			return usage("list takes no row ids")
		}
	case "show", "fail", "retry":
		if len(ids) != 1 {
			return usage("give one row id")
		}
	case "ack":
		if len(ids) == 0 {
			return usage("give the ids of the rows to acknowledge")
		}
	default:
		return usage(fmt.Sprintf("%q is not list, show, ack, fail or retry", verb))
	}
	for _, name := range []string{"folder", "chat", "platform", "state", "after", "limit", "follow"} {
		if set[name] && verb != "list" {
			return usage("--" + name + " is for listing, not " + verb)
		}
	}
	switch {
	case set["error"] && verb != "fail":
		return usage("--error is for fail")
	case set["lease"] && verb != "ack" && verb != "fail":
		return usage("--lease is for ack and fail")
	case (verb == "ack" || verb == "fail") && *lease == "":
		return usage("give --lease, the token of the lease that handed the rows out: only that consumer acks or fails them")
	case verb == "fail" && *errText == "":
		return usage("give --error, why delivering the row failed")
	case *follow && (set["state"] || set["limit"]):
		return usage("--follow leases pending rows: leave out --state and --limit")
	}
	c := apiwire.NewClient(*socket)
	enc := indentedJSON(stdout)
	switch verb {
	case "show":
		row, err := c.GetOutbox(ctx, ids[0])
		if err != nil {
			return err
		}
		return enc.Encode(showRow(row))
	case "retry":
		row, err := c.RetryOutbox(ctx, ids[0])
		if err != nil {
			return err
		}
		return enc.Encode(showRow(row))
	case "fail":
		row, err := c.FailOutbox(ctx, *lease, ids[0], *errText)
		if err != nil {
			return err
		}
		return enc.Encode(showRow(row))
	case "ack":
		n, err := c.AckOutbox(ctx, *lease, ids...)
		if err != nil {
			return err
		}
		return enc.Encode(apiwire.AckResponse{Acked: n})
	}
	if *follow {
		return followOutbox(ctx, c, q, *asJSON, stdout)
	}
	switch *state {
	case "parked", "delivered", "all":
		q.State = *state
	default:
		return usage(fmt.Sprintf("--state %q is not parked, delivered or all (--follow takes the pending rows)", *state))
	}
	list, err := c.LeaseOutbox(ctx, q)
	if err != nil {
		return err
	}
	rows := list.Items
	if *asJSON {
		if rows == nil {
			rows = []apiwire.OutboxRow{}
		}
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tFOLDER\tKIND\tTARGET\tSTATE\tATTEMPTS\tCREATED\tCONTENT / LAST ERROR")
	for _, r := range rows {
		text := r.Content
		if r.Kind == "document" {
			text = r.DocName + " " + text
		}
		if r.LastError != "" {
			text += " / " + r.LastError
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, safeLine(r.Folder), safeLine(r.Kind), dash(r.Target), safeLine(r.State), r.Attempts,
			time.UnixMilli(r.CreatedAt).UTC().Format(time.RFC3339), clip(text, 60))
	}
	return tw.Flush()
}

// shownRow is one outbox row as show, retry and fail print it: its times in RFC 3339
// (UTC), as the list shows them, rather than the API's unix milliseconds; a time that is
// not (no lease, not delivered) is left out.
type shownRow struct {
	apiwire.OutboxRow
	CreatedAt   string `json:"createdAt"`
	LeaseUntil  string `json:"leaseUntil,omitempty"`
	DeliveredAt string `json:"deliveredAt,omitempty"`
}

func showRow(r apiwire.OutboxRow) shownRow {
	iso := func(ms int64) string {
		if ms == 0 {
			return ""
		}
		return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	}
	return shownRow{OutboxRow: r, CreatedAt: iso(r.CreatedAt), LeaseUntil: iso(r.LeaseUntil), DeliveredAt: iso(r.DeliveredAt)}
}

// followOutbox leases rows as they come, prints each and acknowledges it, until ctx ends.
// A row's content keeps its lines, the lines after the first indented.
func followOutbox(ctx context.Context, c *apiwire.Client, q apiwire.OutboxQuery, asJSON bool, stdout io.Writer) error {
	q.Wait, q.Limit = 30*time.Second, 0
	enc := lineJSON(stdout)
	for {
		lease, err := c.LeaseOutbox(ctx, q)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		ids := make([]int64, 0, len(lease.Items))
		for _, r := range lease.Items {
			if asJSON {
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(stdout, "%d %s %s %s: %s\n", r.ID, safeLine(r.Folder), safeLine(r.Kind), dash(r.Target), safeText(r.Content, "  "))
			}
			ids = append(ids, r.ID)
		}
		if len(ids) > 0 {
			// ctx may end now; the rows printed are acknowledged all the same.
			if _, err := c.AckOutbox(context.WithoutCancel(ctx), lease.Lease, ids...); err != nil {
				return fmt.Errorf("acknowledge %v: %w", ids, err)
			}
		}
	}
}
