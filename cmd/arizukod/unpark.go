package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"

	"github.com/arizuko/arizukod/api/apiwire"
)

// cmdUnpark lets a parked group's inbox run again (POST /v1/groups/{folder}/unpark) once
// the reason it was parked for is fixed.
func cmdUnpark(ctx context.Context, args []string) error {
	fs := newFlags("unpark", "--folder F [--json]")
	socket := socketFlag(fs)
	folder := fs.String("folder", "", "the group whose inbox to unpark (required)")
	asJSON := fs.Bool("json", false, "print the daemon's answer as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *folder == "" {
		fmt.Fprintln(fs.Output(), "arizukod unpark: give --folder, e.g. --folder main (`arizukod inbox list --folder F` shows why a folder is parked)")
		fs.Usage()
		return errUsage
	}
	c := apiwire.NewClient(*socket)
	var in apiwire.Inbox
	if err := c.Do(ctx, http.MethodGet, "/v1/groups/"+url.PathEscape(*folder)+"/messages?limit=1", nil, &in); err != nil {
		return err
	}
	var out struct {
		Folder     string `json:"folder"`
		LastDoneID int64  `json:"lastDoneId"`
	}
	if err := c.Do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(*folder)+"/unpark", nil, &out); err != nil {
		return err
	}
	if *asJSON {
		enc := indentedJSON(os.Stdout)
		return enc.Encode(out)
	}
	if in.ParkedReason == "" {
		fmt.Printf("%s was not parked; its inbox runs as usual\n", safeLine(out.Folder))
		return nil
	}
	fmt.Printf("%s unparked (it was parked for: %s); its pending messages run now\n", safeLine(out.Folder), safeText(in.ParkedReason, "    "))
	return nil
}
