package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/store"
)

// stillQueue runs nothing: the inbox commands only write to the store.
type stillQueue struct{}

func (stillQueue) Wake()                                                   {}
func (stillQueue) Kill(string) bool                                        { return false }
func (stillQueue) Steer(context.Context, string, []contract.Message) error { return nil }
func (stillQueue) Ended(string) (<-chan struct{}, func())                  { return nil, func() {} }

type okHealth struct{}

func (okHealth) Health(context.Context) api.HealthReport { return api.HealthReport{Status: "ok"} }

// TestInboxCommand: `inbox add` and `inbox route` reach the daemon's API over its socket
// and the inbox keeps the chat and sender given on the command line; mistakes are usage
// errors or the daemon's error naming the field.
func TestInboxCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.UpsertGroup(ctx, store.Group{Folder: "main"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddRoute(ctx, store.Route{Seq: 1, Match: "platform=telegram", Target: "main"}); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.New(st, stillQueue{}, okHealth{}, slog.New(slog.NewTextHandler(io.Discard, nil)))}
	go srv.Serve(ln)
	defer srv.Close()

	for _, args := range [][]string{
		{"add", "main", "--message", "posted", "--chat", "tg:-100", "--sender", "tg:1"},
		{"route", "--message", "routed", "--platform", "telegram", "--chat", "tg:-200", "--sender", "tg:2"},
	} {
		var out bytes.Buffer
		if err := runInbox(ctx, append(args, "--socket", socket), &out); err != nil {
			t.Fatalf("inbox %v: %v", args, err)
		}
		var answer struct {
			Folder string  `json:"folder"`
			IDs    []int64 `json:"ids"`
		}
		if err := json.Unmarshal(out.Bytes(), &answer); err != nil || answer.Folder != "main" || len(answer.IDs) != 1 {
			t.Errorf("inbox %v printed %s (%v)", args, out.Bytes(), err)
		}
	}
	pending, err := st.PendingInbox(ctx, "main", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 || pending[0].ChatJID != "tg:-100" || pending[0].SenderJID != "tg:1" ||
		pending[1].ChatJID != "tg:-200" || pending[1].SenderJID != "tg:2" || pending[1].Source != store.SourceRoute {
		t.Errorf("inbox after the commands: %+v", pending)
	}

	var apiErr *api.Error
	for _, tt := range []struct {
		args  []string
		check func(error) bool
	}{
		{[]string{}, func(err error) bool { return errors.Is(err, errUsage) }},
		{[]string{"drop"}, func(err error) bool { return errors.Is(err, errUsage) }},
		{[]string{"add"}, func(err error) bool { return errors.Is(err, errUsage) }},
		{[]string{"add", "main", "--platform", "x", "--message", "m"}, func(err error) bool { return errors.Is(err, errUsage) }},
		{[]string{"--help"}, func(err error) bool { return errors.Is(err, flag.ErrHelp) }},
		{[]string{"add", "main"}, func(err error) bool { return err != nil && !errors.Is(err, errUsage) }},
		{[]string{"add", "main", "--message", "m", "--chat", "tg:\t1"}, func(err error) bool {
			return errors.As(err, &apiErr) && apiErr.Code == http.StatusBadRequest && apiErr.Field == "chatJid"
		}},
	} {
		err := runInbox(ctx, append(tt.args, "--socket", socket), io.Discard)
		if !tt.check(err) {
			t.Errorf("inbox %v: %v", tt.args, err)
		}
	}
	if after, _ := st.PendingInbox(ctx, "main", 0); len(after) != 2 {
		t.Errorf("refused commands stored messages: %+v", after)
	}
}
