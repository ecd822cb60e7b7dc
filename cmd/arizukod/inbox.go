package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
)

const inboxSynopsis = "list --folder F [--limit N] [--json] | drop ID --folder F | add FOLDER --message TEXT [--sender JID] [--chat JID] | route --message TEXT [--chat JID] [--sender JID] [--platform P] [--room R] [--verb V]"

func cmdInbox(ctx context.Context, args []string) error {
	return runInbox(ctx, args, os.Stdout)
}

// runInbox is `arizukod inbox`: list shows what waits in a group's inbox and why
// (GET /v1/groups/{folder}/messages); add puts a message into a group's inbox
// (POST /v1/groups/{folder}/messages); route hands one to the routes as a chat gateway
// would (POST /v1/messages). Both print the daemon's answer as JSON: the folder and the
// message ids.
func runInbox(ctx context.Context, args []string, stdout io.Writer) error {
	verb := ""
	if len(args) > 0 {
		verb, args = args[0], args[1:]
	}
	fs := newFlags("inbox", inboxSynopsis)
	socket := socketFlag(fs)
	switch verb {
	case "list":
		return inboxList(ctx, fs, socket, args, stdout)
	case "drop":
		return inboxDrop(ctx, fs, socket, args, stdout)
	}
	message := fs.String("message", "", "the message's text (required)")
	sender := fs.String("sender", "", "who wrote it, e.g. tg:123456")
	chat := fs.String("chat", "", "the chat it was written in, e.g. tg:-5075870332: where the turn's replies go")
	var folder string
	var platform, room, verbFlag *string
	switch verb {
	case "add":
		if len(args) == 0 || args[0] == "" || args[0][0] == '-' {
			fmt.Fprintln(fs.Output(), "arizukod inbox add: give the group's folder first, e.g. inbox add main --message TEXT")
			fs.Usage()
			return errUsage
		}
		folder, args = args[0], args[1:]
	case "route":
		platform = fs.String("platform", "", "the chat platform, e.g. telegram")
		room = fs.String("room", "", "the room")
		verbFlag = fs.String("verb", "", "how the message addresses the bot, e.g. mention")
	case "-h", "-help", "--help", "help":
		fs.Usage()
		return flag.ErrHelp
	default:
		return unknownVerb(fs, verb)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *message == "" {
		return errors.New("--message: required: give the message's text")
	}
	c := apiwire.NewClient(*socket)
	var out any
	var err error
	if verb == "add" {
		req := apiwire.InboxRequest{Messages: []contract.Message{{Role: "user", Content: *message}}, SenderJID: *sender, ChatJID: *chat}
		err = c.Do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(folder)+"/messages", req, &out)
	} else {
		req := apiwire.InboundMessage{Platform: *platform, Room: *room, ChatJID: *chat, Sender: *sender, Verb: *verbFlag, Content: *message}
		err = c.Do(ctx, http.MethodPost, "/v1/messages", req, &out)
		var apiErr *apiwire.Error
		if errors.As(err, &apiErr) && apiErr.Code == http.StatusUnprocessableEntity {
			err = fmt.Errorf("%w\n  a message reaches a group through a route: `arizukod routes add main --seq 1000 --match ''` sends every message to main (`arizukod routes` lists them), or `arizukod inbox add main --message TEXT` skips the routes", err)
		}
	}
	if err != nil {
		return err
	}
	enc := indentedJSON(stdout)
	return enc.Encode(out)
}

// inboxDrop drops one pending message of a folder: it stays in the store as dropped by
// this user, and no turn gets it.
func inboxDrop(ctx context.Context, fs *flag.FlagSet, socket *string, args []string, stdout io.Writer) error {
	folder := fs.String("folder", "", "the group whose message to drop (required)")
	if len(args) == 0 || args[0] == "" || args[0][0] == '-' {
		fmt.Fprintln(fs.Output(), "arizukod inbox drop: give the message's id first, e.g. inbox drop 12 --folder main (`arizukod inbox list --folder main` shows the ids)")
		fs.Usage()
		return errUsage
	}
	id, args := args[0], args[1:]
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *folder == "" {
		fmt.Fprintln(fs.Output(), "arizukod inbox drop: give --folder, e.g. --folder main")
		fs.Usage()
		return errUsage
	}
	var out any
	path := "/v1/groups/" + url.PathEscape(*folder) + "/messages/" + url.PathEscape(id) + "/drop"
	if err := apiwire.NewClient(*socket).Do(ctx, http.MethodPost, path, apiwire.DropRequest{By: "cli:" + userName()}, &out); err != nil {
		return err
	}
	return indentedJSON(stdout).Encode(out)
}

// inboxList prints a folder's inbox: the cursor's state (parked and why, a retry waiting)
// and the messages past it.
func inboxList(ctx context.Context, fs *flag.FlagSet, socket *string, args []string, stdout io.Writer) error {
	folder := fs.String("folder", "", "the group whose inbox to show (required)")
	limit := fs.Int("limit", 100, "at most this many pending messages, oldest first")
	asJSON := fs.Bool("json", false, "print the inbox as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *folder == "" {
		fmt.Fprintln(fs.Output(), "arizukod inbox list: give --folder, e.g. --folder main")
		fs.Usage()
		return errUsage
	}
	var in apiwire.Inbox
	path := "/v1/groups/" + url.PathEscape(*folder) + "/messages?limit=" + strconv.Itoa(*limit)
	if err := apiwire.NewClient(*socket).Do(ctx, http.MethodGet, path, nil, &in); err != nil {
		return err
	}
	if *asJSON {
		enc := indentedJSON(stdout)
		return enc.Encode(in)
	}
	name := safeLine(in.Folder)
	switch {
	case in.ParkedReason != "":
		fmt.Fprintf(stdout, "%s is parked since %s: %s\nFix that, then run `arizukod unpark --folder %s`.\n", name, safeLine(in.ParkedAt),
			safeText(in.ParkedReason, "    "), name)
	case in.NextAttemptAt != "":
		fmt.Fprintf(stdout, "%s retries at %s (failed %d times: %s)\n", name, safeLine(in.NextAttemptAt), in.Retries, safeText(in.LastError, "    "))
	}
	fmt.Fprintf(stdout, "%s: %d pending after message %d\n", name, len(in.Pending), in.LastDoneID)
	if len(in.Pending) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tCHAT\tSENDER\tCREATED\tCONTENT")
	for _, m := range in.Pending {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", m.ID, safeLine(m.Source), dash(m.ChatJID), dash(m.SenderJID), safeLine(m.CreatedAt), clip(m.Content, 60))
	}
	return tw.Flush()
}
