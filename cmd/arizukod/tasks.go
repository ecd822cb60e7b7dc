package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/arizuko/arizukod/api/apiwire"
)

// cmdTasks shows and steers the tasks agents scheduled (GET /v1/tasks, POST
// /v1/tasks/{id}/pause|resume|cancel).
func cmdTasks(ctx context.Context, args []string) error {
	fs := newFlags("tasks", "[list [--folder F] [--state S] [--json] | show ID | pause ID | resume ID | cancel ID]")
	socket := socketFlag(fs)
	folder := fs.String("folder", "", "list: only the tasks of this folder")
	state := fs.String("state", "", "list: only tasks in this state: active, paused or completed")
	asJSON := fs.Bool("json", false, "list: print the tasks as JSON (the other verbs always print JSON)")
	verbs := []string{"show", "pause", "resume", "cancel"}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch {
		case args[0] != "list" && !slices.Contains(verbs, args[0]):
			fmt.Fprintf(fs.Output(), "arizukod tasks: %q is not list, show, pause, resume or cancel\n", args[0])
			fs.Usage()
			return errUsage
		case args[0] != "list" && (len(args) < 2 || strings.HasPrefix(args[1], "-")):
			fmt.Fprintf(fs.Output(), "arizukod tasks %s: give the task's id (`arizukod tasks` lists them)\n", args[0])
			fs.Usage()
			return errUsage
		}
	}
	verb, id, rest, err := verbOperand(fs, args, verbs...)
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
		q := url.Values{}
		if *folder != "" {
			q.Set("folder", *folder)
		}
		if *state != "" {
			q.Set("state", *state)
		}
		var out struct{ Tasks []apiwire.Task }
		if err := c.Do(ctx, http.MethodGet, "/v1/tasks?"+q.Encode(), nil, &out); err != nil {
			return err
		}
		if *asJSON {
			return enc.Encode(out.Tasks)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tFOLDER\tSTATE\tSCHEDULE\tNEXT RUN\tLAST RUN\tPROMPT")
		for _, t := range out.Tasks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%s\t%s\n", safeLine(t.ID), safeLine(t.Folder), safeLine(t.State), safeLine(t.ScheduleKind),
				safeLine(t.Schedule), dash(t.NextRunAt), dash(t.LastRunID), clip(t.Prompt, 50))
		}
		return tw.Flush()
	case "show", "pause", "resume", "cancel":
		method, path := http.MethodGet, "/v1/tasks/"+url.PathEscape(id)
		if verb != "show" {
			method, path = http.MethodPost, path+"/"+verb
		}
		var t apiwire.Task
		if err := c.Do(ctx, method, path, nil, &t); err != nil {
			return unknownID(err, "task", id, "arizukod tasks")
		}
		return enc.Encode(t)
	}
	return nil
}

// dash is s made safe for a table cell (safeLine), or "-" for a cell with nothing in it.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return safeLine(s)
}

// clip shortens s to one line of at most n runes for a table cell, its runs of white space
// made one space and its controls shown (safeLine).
func clip(s string, n int) string {
	s = safeLine(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// unknownID is err, or, when it is the daemon's 404 for the id of a kind of thing, that
// said with the command that lists them (the daemon's message names its API path).
func unknownID(err error, kind, id, list string) error {
	var apiErr *apiwire.Error
	if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound && apiErr.Field == "id" {
		return fmt.Errorf("no %s %q: `%s` lists them", kind, id, list)
	}
	return err
}
