package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/contract"
)

const inboxSynopsis = "add FOLDER --message TEXT [--sender JID] [--chat JID] | route --message TEXT [--chat JID] [--sender JID] [--platform P] [--room R] [--verb V]"

func cmdInbox(ctx context.Context, args []string) error {
	return runInbox(ctx, args, os.Stdout)
}

// runInbox is `arizukod inbox`: add puts a message into a group's inbox
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
	c := api.NewClient(*socket)
	var out any
	var err error
	if verb == "add" {
		req := api.InboxRequest{Messages: []contract.Message{{Role: "user", Content: *message}}, SenderJID: *sender, ChatJID: *chat}
		err = c.Do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(folder)+"/messages", req, &out)
	} else {
		req := api.InboundMessage{Platform: *platform, Room: *room, ChatJID: *chat, Sender: *sender, Verb: *verbFlag, Content: *message}
		err = c.Do(ctx, http.MethodPost, "/v1/messages", req, &out)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
