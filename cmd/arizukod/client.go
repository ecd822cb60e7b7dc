package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/contract"
)

const levelDebug = slog.LevelDebug

// indentedJSON is how every client command prints JSON: indented by two spaces, with the
// C1 controls escaped (jsonWriter).
func indentedJSON(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(jsonWriter{w})
	enc.SetIndent("", "  ")
	return enc
}

// socketFlag registers --socket, defaulting to where the daemon of this user listens.
func socketFlag(fs *flag.FlagSet) *string {
	def := "/run/arizuko/arizukod.sock"
	if cfg, err := config.Load(serviceMode(), "", os.Getenv); err == nil {
		def = cfg.Listen
	}
	return fs.String("socket", def, "the daemon's API socket")
}

// runDaemon is `arizukod run` without --local: submit, wait, print.
func runDaemon(ctx context.Context, socket, folder, message, session, sender, chat string, timeout time.Duration) error {
	c := apiwire.NewClient(socket)
	req := apiwire.CreateRunRequest{Folder: folder, Messages: []contract.Message{{Role: "user", Content: message}}, SessionID: session, SenderJID: sender, ChatJID: chat}
	if timeout > 0 {
		d := apiwire.Duration(timeout)
		req.Timeout = &d
	}
	if err := engineReady(ctx, c); err != nil {
		return err
	}
	run, err := c.CreateRun(ctx, req)
	if err != nil {
		return err
	}
	run, err = waitRun(ctx, c, run, os.Stderr)
	if err != nil {
		return err
	}
	enc := indentedJSON(os.Stdout)
	if err := enc.Encode(run); err != nil {
		return err
	}
	if run.Status != "ok" {
		return errTurnFailed
	}
	return nil
}

func cmdRuns(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "warm" {
		return cmdRunsWarm(ctx, args[1:])
	}
	fs := newFlags("runs", "[list [--folder F] [--state S] [--limit N] [--json] | show ID | kill ID | warm [--json]]")
	socket := socketFlag(fs)
	folder := fs.String("folder", "", "only runs of this folder")
	state := fs.String("state", "", "only runs in this state: queued, running, exited, error, killed")
	limit := fs.Int("limit", 20, "at most this many runs, newest first")
	asJSON := fs.Bool("json", false, "list: print the runs as JSON (show and kill always print JSON)")
	verb, id, rest, err := verbOperand(fs, args, "show", "kill")
	if err != nil {
		return err
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	c := apiwire.NewClient(*socket)
	switch verb {
	case "list":
		q := url.Values{"limit": {fmt.Sprint(*limit)}}
		if *folder != "" {
			q.Set("folder", *folder)
		}
		if *state != "" {
			q.Set("state", *state)
		}
		var out struct{ Runs []apiwire.Run }
		if err := c.Do(ctx, http.MethodGet, "/v1/runs?"+q.Encode(), nil, &out); err != nil {
			return err
		}
		if *asJSON {
			enc := indentedJSON(os.Stdout)
			return enc.Encode(out.Runs)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RUN\tFOLDER\tSTATE\tSTATUS\tFAILURE\tCREATED\tTOKENS IN/OUT\tCONTAINER")
		for _, r := range out.Runs {
			tokens := "-"
			if u := r.Usage; u != nil {
				tokens = fmt.Sprintf("%d/%d", u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens, u.OutputTokens)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safeLine(r.ID), safeLine(r.Folder), safeLine(r.State), safeLine(r.Status),
				safeLine(r.Failure), safeLine(r.CreatedAt), tokens, safeLine(r.Container))
		}
		return tw.Flush()
	case "show", "kill":
		var r apiwire.Run
		method, path := http.MethodGet, "/v1/runs/"+url.PathEscape(id)
		if verb == "kill" {
			method = http.MethodDelete
		}
		if err := c.Do(ctx, method, path, nil, &r); err != nil {
			return err
		}
		if verb == "kill" {
			// The answer is the run as the kill was asked: print it once the kill is done.
			if err := c.Do(ctx, http.MethodGet, path+"?wait="+killWait.String(), nil, &r); err != nil {
				return err
			}
			if !final(r.State) {
				fmt.Fprintf(os.Stderr, "arizukod runs kill: run %s is still being killed after %s; `arizukod runs show %s` shows when it ended\n", safeLine(r.ID), killWait, safeLine(r.ID))
			}
		}
		enc := indentedJSON(os.Stdout)
		return enc.Encode(r)
	}
	return unknownVerb(fs, verb)
}

// cmdRunsWarm lists the warm agents (GET /v1/warm): the folders whose next agent waits,
// started, for its turn, with the memory each holds.
func cmdRunsWarm(ctx context.Context, args []string) error {
	fs := newFlags("runs warm", "[--json]")
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print the warm agents as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var out apiwire.WarmAgents
	if err := apiwire.NewClient(*socket).Do(ctx, http.MethodGet, "/v1/warm", nil, &out); err != nil {
		return err
	}
	if *asJSON {
		return indentedJSON(os.Stdout).Encode(out)
	}
	var total int64
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FOLDER\tCONTAINER\tREADY\tPSS MB")
	for _, w := range out.Agents {
		total += w.PSSBytes
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\n", safeLine(w.Folder), safeLine(w.Container), safeLine(w.Ready), float64(w.PSSBytes)/(1<<20))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("%d of warm_agents=%d, %.1f MB together; MemAvailable %d MB (warm_min_available %d MB)\n",
		len(out.Agents), out.Max, float64(total)/(1<<20), out.Available>>20, out.MinAvailable>>20)
	return nil
}

// killWait is how long `runs kill` waits for the run it kills to end.
const killWait = 2 * time.Minute

func cmdGroups(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "project" {
		return cmdGroupsProject(ctx, args[1:])
	}
	fs := newFlags("groups", "[list [--json] | add FOLDER [--name N] [--config JSON] | grants FOLDER RULE... | remove FOLDER [--yes] [--json] | project ...]")
	socket := socketFlag(fs)
	name := fs.String("name", "", "the group's display name")
	cc := fs.String("config", "", "the group's container config as JSON, e.g. '{\"network\":\"none\"}'")
	asJSON := fs.Bool("json", false, "list, remove: print JSON (add and grants always print JSON)")
	yes := fs.Bool("yes", false, "remove: remove the group; without it, say what removing it would do and remove nothing")
	verb, folder, rest, err := verbOperand(fs, args, "add", "grants", "remove")
	if err != nil {
		return err
	}
	var positional []string
	for folder != "" && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		positional, rest = append(positional, rest[0]), rest[1:]
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	c := apiwire.NewClient(*socket)
	enc := indentedJSON(os.Stdout)
	switch verb {
	case "list":
		var out struct{ Groups []apiwire.Group }
		if err := c.Do(ctx, http.MethodGet, "/v1/groups", nil, &out); err != nil {
			return err
		}
		if *asJSON {
			return enc.Encode(out.Groups)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FOLDER\tTIER\tNAME")
		for _, g := range out.Groups {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", safeLine(g.Folder), g.Tier, safeLine(g.Name))
		}
		return tw.Flush()
	case "add":
		req := apiwire.PutGroupRequest{Folder: folder, Name: *name}
		if *cc != "" {
			req.ContainerConfig = json.RawMessage(*cc)
		}
		var g apiwire.Group
		if err := c.Do(ctx, http.MethodPost, "/v1/groups", req, &g); err != nil {
			return err
		}
		return enc.Encode(g)
	case "grants":
		if positional == nil {
			positional = []string{}
		}
		var out any
		if err := c.Do(ctx, http.MethodPut, "/v1/groups/"+url.PathEscape(folder)+"/grants", apiwire.GrantsRequest{Rules: positional}, &out); err != nil {
			return err
		}
		return enc.Encode(out)
	case "remove":
		return groupsRemove(ctx, c, folder, *yes, *asJSON, os.Stdout)
	}
	return unknownVerb(fs, verb)
}

// groupsRemove says what removing folder's group does to its folder, runs, routes, tasks
// and descendants, and removes it only when yes; without yes nothing changes. A group that
// cannot be removed now (groups below it, a run queued or running) is refused either way,
// saying why.
func groupsRemove(ctx context.Context, c *apiwire.Client, folder string, yes, asJSON bool, stdout io.Writer) error {
	var g apiwire.GroupRemoval
	path := "/v1/groups/" + url.PathEscape(folder)
	if yes {
		if err := c.Do(ctx, http.MethodDelete, path, apiwire.RemoveGroupRequest{By: "cli:" + userName()}, &g); err != nil {
			return err
		}
	} else if err := c.Do(ctx, http.MethodGet, path+"/removal", nil, &g); err != nil {
		return err
	}
	if asJSON {
		if err := indentedJSON(stdout).Encode(g); err != nil {
			return err
		}
	} else {
		head := "Removing group %s would do this:"
		switch {
		case g.Removed:
			head = "Removed group %s:"
		case g.Blocked != "":
			head = "Removing group %s, once it can be, would do this:"
		}
		fmt.Fprintf(stdout, head+"\n", safeLine(g.Folder))
		for _, e := range g.Effects {
			fmt.Fprintf(stdout, "  - %s\n", safeLine(e))
		}
	}
	switch {
	case g.Blocked != "":
		return fmt.Errorf("group %s cannot be removed now: %s; nothing was removed", g.Folder, g.Blocked)
	case !g.Removed && !asJSON:
		fmt.Fprintf(stdout, "Nothing was removed: run `arizukod groups remove %s --yes` to remove it.\n", safeLine(g.Folder))
	}
	return nil
}

// cmdRoutes manages the operator's routes: the first layer of routing, consulted before any
// group's (ipc/ROUTES.md).
func cmdRoutes(ctx context.Context, args []string) error {
	fs := newFlags("routes", "[list [--json] | add TARGET --seq N --match EXPR | delete ID]")
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "list: print the routes as JSON")
	seq := fs.Int64("seq", 0, "add: the route's order among the operator's routes (lower is tried first)")
	match := fs.String("match", "", `add: key=glob terms over platform, room, chat_jid, sender, verb; "" matches every message`)
	verb, operand, rest, err := verbOperand(fs, args, "add", "delete")
	if err != nil {
		return err
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	c := apiwire.NewClient(*socket)
	enc := indentedJSON(os.Stdout)
	switch verb {
	case "list":
		var out struct{ Routes []apiwire.Route }
		if err := c.Do(ctx, http.MethodGet, "/v1/routes", nil, &out); err != nil {
			return err
		}
		if *asJSON {
			return enc.Encode(out.Routes)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tOWNER\tSEQ\tMATCH\tTARGET")
		for _, r := range out.Routes {
			owner := r.Owner
			if owner == "" {
				owner = "(operator)"
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", r.ID, safeLine(owner), r.Seq, safeLine(r.Match), safeLine(r.Target))
		}
		return tw.Flush()
	case "add":
		var seqSet, matchSet bool
		fs.Visit(func(f *flag.Flag) {
			seqSet = seqSet || f.Name == "seq"
			matchSet = matchSet || f.Name == "match"
		})
		if !seqSet || !matchSet {
			fmt.Fprintln(fs.Output(), `arizukod routes add: give --seq and --match (--match "" routes every message)`)
			fs.Usage()
			return errUsage
		}
		var r apiwire.Route
		if err := c.Do(ctx, http.MethodPost, "/v1/routes", apiwire.AddRouteRequest{Seq: seq, Match: match, Target: operand}, &r); err != nil {
			return err
		}
		return enc.Encode(r)
	case "delete":
		var r apiwire.Route
		if err := c.Do(ctx, http.MethodDelete, "/v1/routes/"+url.PathEscape(operand), nil, &r); err != nil {
			return unknownID(err, "route", operand, "arizukod routes")
		}
		return enc.Encode(r)
	}
	return unknownVerb(fs, verb)
}

// verbOperand splits a command's arguments into its verb ("list" when the first argument is
// a flag or missing), the operand that the verbs in needOperand take (an ID or a folder), and
// the rest; a missing operand is a usage error.
func verbOperand(fs *flag.FlagSet, args []string, needOperand ...string) (verb, operand string, rest []string, err error) {
	verb, rest = "list", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		verb, rest = args[0], args[1:]
	}
	if slices.Contains(needOperand, verb) {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			fmt.Fprintf(fs.Output(), "arizukod %s %s: give what it acts on, as the usage shows\n", fs.Name(), verb)
			fs.Usage()
			return "", "", nil, errUsage
		}
		operand, rest = rest[0], rest[1:]
	}
	return verb, operand, rest, nil
}

// unknownVerb is the usage error of a verb a command does not have.
func unknownVerb(fs *flag.FlagSet, verb string) error {
	if verb == "" || strings.HasPrefix(verb, "-") {
		fmt.Fprintf(fs.Output(), "arizukod %s: give a verb first\n", fs.Name())
	} else {
		fmt.Fprintf(fs.Output(), "arizukod %s: unknown verb %q\n", fs.Name(), verb)
	}
	fs.Usage()
	return errUsage
}
