package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/arizuko/arizukod/api/apiwire"
)

// cmdGroupsProject is `arizukod groups project`: give a group a git repository to work on
// through its own branch, show it, take it away.
func cmdGroupsProject(ctx context.Context, args []string) error {
	fs := newFlags("groups project", "set FOLDER PATH [--json] | show FOLDER [--json] | clear FOLDER [--discard] [--json]")
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	discard := fs.Bool("discard", false, "clear: drop what the group's worktree holds uncommitted (and its commits, if they cannot be taken into the repository)")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return unknownVerb(fs, "")
	}
	verb, folder, rest, err := verbOperand(fs, args, "set", "show", "clear")
	if err != nil {
		return err
	}
	var path string
	if verb == "set" {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			fmt.Fprintln(fs.Output(), "arizukod groups project set: give the repository's path after the folder")
			fs.Usage()
			return errUsage
		}
		path, rest = rest[0], rest[1:]
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	c := apiwire.NewClient(*socket)
	at := "/v1/groups/" + url.PathEscape(folder) + "/project"
	var info apiwire.Project
	switch verb {
	case "set":
		err = c.Do(ctx, http.MethodPut, at, apiwire.ProjectRequest{Path: path}, &info)
	case "show":
		err = c.Do(ctx, http.MethodGet, at, nil, &info)
	case "clear":
		if *discard {
			at += "?discard=true"
		}
		err = c.Do(ctx, http.MethodDelete, at, nil, &info)
	default:
		return unknownVerb(fs, verb)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return indentedJSON(os.Stdout).Encode(info)
	}
	printProject(os.Stdout, verb, info)
	return nil
}

func printProject(w io.Writer, verb string, info apiwire.Project) {
	switch verb {
	case "clear":
		fmt.Fprintf(w, "group %s no longer works on %s; its branch %s stays:\n  git -C %s log %s\n",
			safeLine(info.Folder), safeLine(info.Repo), safeLine(info.Branch), shellQuote(info.Repo), shellQuote(info.Branch))
		return
	case "set":
		made := "its branch"
		if info.Created {
			made = "a new branch at HEAD,"
		}
		fmt.Fprintf(w, "group %s works on %s, on %s %s, at %s in its turns\n", safeLine(info.Folder), safeLine(info.Repo), made, safeLine(info.Branch), safeLine(info.Target))
	default:
		fmt.Fprintf(w, "group %s works on %s, on branch %s, at %s in its turns\n", safeLine(info.Folder), safeLine(info.Repo), safeLine(info.Branch), safeLine(info.Target))
	}
	fmt.Fprintf(w, "its commits, after each turn:\n  git -C %s log %s\n  git -C %s merge %s\n", shellQuote(info.Repo), shellQuote(info.Branch), shellQuote(info.Repo), shellQuote(info.Branch))
}
