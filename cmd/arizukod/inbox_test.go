package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/store"

	_ "modernc.org/sqlite"
)

// stillQueue runs nothing: the inbox commands only write to the store.
type stillQueue struct{}

func (stillQueue) Wake()                                                   {}
func (stillQueue) Kill(string) bool                                        { return false }
func (stillQueue) Steer(context.Context, string, []contract.Message) error { return nil }
func (stillQueue) Ended(string) (<-chan struct{}, func())                  { return nil, func() {} }

type okHealth struct{}

func (okHealth) Health(context.Context) apiwire.HealthReport {
	return apiwire.HealthReport{Status: "ok"}
}

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

	var apiErr *apiwire.Error
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

// TestInboxDrop: `inbox drop` takes a parked folder's failing message out of its inbox,
// kept in the store as dropped with who and when; the folder runs its next message.
// Dropping it again is a 409, an unknown message a 404, a missing id a usage error.
func TestInboxDrop(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	socket, st := cliDaemon(t, dir, okHealth{})
	ids, err := st.AppendInbox(ctx, "main",
		store.InboxMessage{Role: "user", Content: "fails every time", Source: store.SourceAPI},
		store.InboxMessage{Role: "user", Content: "the next one", Source: store.SourceAPI})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Park(ctx, "main", "exit 126"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runInbox(ctx, []string{"drop", fmt.Sprint(ids[0]), "--folder", "main", "--socket", socket}, &out); err != nil {
		t.Fatalf("inbox drop: %v", err)
	}
	pending, err := st.PendingInbox(ctx, "main", 0)
	if err != nil || len(pending) != 1 || pending[0].ID != ids[1] {
		t.Errorf("pending after the drop: %+v %v, want the next message alone", pending, err)
	}
	if c, err := st.GetCursor(ctx, "main"); err != nil || c.ParkedReason != "" || c.Retries != 0 {
		t.Errorf("cursor after the drop: %+v %v, want unparked", c, err)
	}
	if folders, err := st.PendingFolders(ctx); err != nil || len(folders) != 1 {
		t.Errorf("pending folders after the drop: %v %v, want main", folders, err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "arizukod.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var by string
	var at int64
	err = db.QueryRowContext(ctx, `SELECT dropped_by, dropped_at FROM inbox WHERE id = ?`, ids[0]).Scan(&by, &at)
	if err != nil || by != "cli:"+userName() || at == 0 {
		t.Errorf("the dropped message: by %q at %d (%v), want kept with who and when", by, at, err)
	}
	var apiErr *apiwire.Error
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"drop", fmt.Sprint(ids[0]), "--folder", "main"}, http.StatusConflict},
		{[]string{"drop", "999999", "--folder", "main"}, http.StatusNotFound},
		{[]string{"drop", "x", "--folder", "main"}, http.StatusBadRequest},
	} {
		err := runInbox(ctx, append(tt.args, "--socket", socket), io.Discard)
		if !errors.As(err, &apiErr) || apiErr.Code != tt.code {
			t.Errorf("inbox %v: %v, want HTTP %d", tt.args, err, tt.code)
		}
	}
	for _, args := range [][]string{{"drop"}, {"drop", "1"}} {
		if err := runInbox(ctx, append(args, "--socket", socket), io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("inbox %v: %v, want a usage error", args, err)
		}
	}
}
