package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/arizuko/arizukod/api/apiwire"
)

// cmdUsage prints what the groups' model usage cost (GET /v1/usage): per group, its own
// and its subtree's today, this month and since --since; then per model. --prices prints
// the price table instead (GET /v1/prices).
func cmdUsage(ctx context.Context, args []string) error {
	fs := newFlags("usage", "[--folder F] [--since YYYY-MM-DD] [--prices] [--json]")
	socket := socketFlag(fs)
	folder := fs.String("folder", "", "only this group and the groups below it (default: every group)")
	since := fs.String("since", "", "also sum from this date (YYYY-MM-DD, in the daemon's time zone) or RFC 3339 time (default: the month's start)")
	prices := fs.Bool("prices", false, "print the price table the daemon uses instead")
	asJSON := fs.Bool("json", false, "print the daemon's answer as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c := apiwire.NewClient(*socket)
	if *prices {
		if *folder != "" || *since != "" {
			fmt.Fprintln(fs.Output(), "arizukod usage: --prices lists every model's price; drop --folder and --since")
			fs.Usage()
			return errUsage
		}
		var p apiwire.Prices
		if err := c.Do(ctx, http.MethodGet, "/v1/prices", nil, &p); err != nil {
			return err
		}
		if *asJSON {
			return indentedJSON(os.Stdout).Encode(p)
		}
		fmt.Printf("prices per million tokens, as of %s\n", safeLine(p.AsOf))
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MODEL\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCACHE WRITE 1H")
		for _, m := range p.Prices {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", safeLine(m.Model), m.Input.USD, m.Output.USD, m.CacheRead.USD, m.CacheWrite.USD, m.CacheWrite1h.USD)
		}
		return tw.Flush()
	}
	q := url.Values{}
	if *folder != "" {
		q.Set("folder", *folder)
	}
	if *since != "" {
		q.Set("since", *since)
	}
	var rep apiwire.UsageReport
	if err := c.Do(ctx, http.MethodGet, "/v1/usage?"+q.Encode(), nil, &rep); err != nil {
		return err
	}
	if *asJSON {
		return indentedJSON(os.Stdout).Encode(rep)
	}
	scope := "every group"
	if rep.Folder != "" {
		scope = safeLine(rep.Folder) + " and the groups below it"
	}
	fmt.Printf("model usage of %s, in US dollars at the prices of %s; SINCE is from %s\n", scope, safeLine(rep.PricesAsOf), safeLine(rep.Since))
	if len(rep.Groups) == 0 {
		fmt.Println("no usage")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FOLDER\tTODAY\tMONTH\tSINCE\tSUBTREE TODAY\tSUBTREE MONTH\tSUBTREE SINCE")
	for _, g := range rep.Groups {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safeLine(g.Folder), cost(g.Today), cost(g.Month), cost(g.Since),
			cost(g.SubtreeToday), cost(g.SubtreeMonth), cost(g.SubtreeSince))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println()
	tw = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCOST SINCE")
	for _, m := range rep.Models {
		c := "unknown: no price"
		if m.Cost != nil {
			c = m.Cost.USD
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", safeLine(m.Model), m.InputTokens, m.OutputTokens, m.CacheReadTokens, m.CacheWriteTokens, c)
	}
	fmt.Fprintf(tw, "TOTAL\t\t\t\t\t%s\n", cost(rep.Total))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.Total.Unpriced) > 0 {
		fmt.Printf("\n%s has no price: its cost is unknown, and \"+?\" marks a sum without it; add [prices.\"MODEL\"] to arizukod.toml\n",
			safeLine(strings.Join(rep.Total.Unpriced, ", ")))
	}
	return nil
}

// cost is c in dollars, "+?" after a sum that misses an unpriced model's cost.
func cost(c apiwire.Cost) string {
	if len(c.Unpriced) > 0 {
		return c.USD + "+?"
	}
	return c.USD
}
