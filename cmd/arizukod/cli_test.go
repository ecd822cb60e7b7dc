package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api"
	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/store"
)

// cliFixture is the API over a real store on a unix socket, with the groups main and
// main/research registered and a queue that runs nothing: what the client commands talk to.
type cliFixture struct {
	st     *store.Store
	socket string
}

func newCLIFixture(t *testing.T) cliFixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "arizukod.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, g := range []store.Group{{Folder: "main"}, {Folder: "main/research", Parent: "main"}} {
		if _, err := st.UpsertGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	socket := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.New(st, stillQueue{}, okHealth{}, slog.New(slog.NewTextHandler(io.Discard, nil)))}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	// The default --socket in the usage text: the user service's, the same on every host.
	t.Setenv("ARIZUKO_MODE", "user")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("LISTEN_ADDR", "")
	return cliFixture{st: st, socket: socket}
}

// run runs `arizukod args...` in this process as main would and returns its exit status
// and what it wrote, with the fixture's socket path written as $SOCKET.
func (fx cliFixture) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	files := [2]*os.File{}
	for i := range files {
		f, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		files[i] = f
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = files[0], files[1]
	code = runMain(context.Background(), args)
	os.Stdout, os.Stderr = oldOut, oldErr
	var out [2]string
	for i, f := range files {
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		out[i] = strings.ReplaceAll(string(b), fx.socket, "$SOCKET")
	}
	return code, out[0], out[1]
}

// TestCLIGolden: the new client commands' usage and their answers to mistakes, the
// command line's and the daemon's, as golden files (go test -run TestCLIGolden -update).
func TestCLIGolden(t *testing.T) {
	fx := newCLIFixture(t)
	s := "--socket=" + fx.socket
	for _, c := range []struct {
		name string
		args []string
	}{
		{"chat-help", []string{"chat", "--help"}},
		{"chat-no-folder", []string{"chat", s}},
		{"chat-unknown-flag", []string{"chat", "--folder", "main", "--verbose", s}},
		{"chat-argument", []string{"chat", "--folder", "main", "hello", s}},
		{"chat-unknown-group", []string{"chat", "--folder", "nope", s}},
		{"chat-no-daemon", []string{"chat", "--folder", "main", "--socket", "/nonexistent/arizukod.sock"}},
		{"outbox-help", []string{"outbox", "--help"}},
		{"outbox-bad-verb", []string{"outbox", "send", s}},
		{"outbox-ack-no-ids", []string{"outbox", "ack", s}},
		{"outbox-ack-bad-id", []string{"outbox", "ack", "12x", s}},
		{"outbox-ack-unknown", []string{"outbox", "ack", "999", "--lease", "L", s}},
		{"outbox-ack-no-lease", []string{"outbox", "ack", "1", s}},
		{"outbox-show-lease", []string{"outbox", "show", "1", "--lease", "L", s}},
		{"outbox-retry-two", []string{"outbox", "retry", "1", "2", s}},
		{"outbox-fail-no-error", []string{"outbox", "fail", "1", "--lease", "L", s}},
		{"outbox-show-with-filter", []string{"outbox", "show", "1", "--folder", "main", s}},
		{"outbox-show-unknown", []string{"outbox", "show", "999", s}},
		{"outbox-follow-state", []string{"outbox", "--follow", "--state", "all", s}},
		{"outbox-state-pending", []string{"outbox", "--state", "pending", s}},
		{"outbox-bad-folder", []string{"outbox", "--folder", "../x", s}},
		{"tasks-help", []string{"tasks", "--help"}},
		{"tasks-bad-verb", []string{"tasks", "delete", "t_1", s}},
		{"tasks-pause-no-id", []string{"tasks", "pause", s}},
		{"tasks-show-unknown", []string{"tasks", "show", "t_nope", s}},
		{"tasks-pause-unknown", []string{"tasks", "pause", "nosuch", s}},
		{"routes-delete-unknown", []string{"routes", "delete", "999", s}},
		{"tasks-bad-state", []string{"tasks", "--state", "done", s}},
		{"unpark-help", []string{"unpark", "--help"}},
		{"unpark-no-folder", []string{"unpark", s}},
		{"unpark-unknown-group", []string{"unpark", "--folder", "nope", s}},
		{"inbox-list-no-folder", []string{"inbox", "list", s}},
		{"inbox-list-message-flag", []string{"inbox", "list", "--folder", "main", "--message", "x", s}},
		{"inbox-list-unknown-group", []string{"inbox", "list", "--folder", "nope", s}},
		{"inbox-route-no-route", []string{"inbox", "route", "--platform", "telegram", "--chat", "tg:-100", "--sender", "tg:1", "--message", "hi", s}},
		{"groups-remove-no-folder", []string{"groups", "remove", "--yes", s}},
		{"groups-remove-unknown-group", []string{"groups", "remove", "nope", s}},
		{"groups-remove-descendants", []string{"groups", "remove", "main", s}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := fx.run(t, c.args...)
			got := "exit " + strconv.Itoa(code) + "\n-- stdout --\n" + stdout + "-- stderr --\n" + stderr
			golden := filepath.Join("testdata", "cli", c.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestCLIGolden -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("arizukod %s:\n%s\nwant (%s):\n%s", strings.Join(c.args, " "), got, golden, want)
			}
		})
	}
}

// TestCLICommands: groups, runs, tasks, unpark, inbox list and outbox do what they say against the API,
// in their tables and with --json.
func TestCLICommands(t *testing.T) {
	fx := newCLIFixture(t)
	ctx := context.Background()
	s := "--socket=" + fx.socket
	ok := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := fx.run(t, append(args, s)...)
		if code != 0 {
			t.Fatalf("arizukod %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		}
		return stdout
	}

	var groups []apiwire.Group
	if err := json.Unmarshal([]byte(ok("groups", "--json")), &groups); err != nil || len(groups) != 2 || groups[1].Folder != "main/research" {
		t.Errorf("groups --json: %+v %v", groups, err)
	}
	if out := ok("runs", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("runs --json with no runs: %q", out)
	}

	task, err := fx.st.CreateTask(ctx, store.Task{Folder: "main/research", Prompt: "summarise the news", ScheduleKind: store.ScheduleInterval,
		ScheduleExpr: "3600000", State: store.TaskActive, NextRunAt: time.Now().Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	if out := ok("tasks"); !strings.Contains(out, task.ID) || !strings.Contains(out, "interval 3600000") || !strings.Contains(out, "summarise the news") {
		t.Errorf("tasks:\n%s", out)
	}
	for _, c := range []struct{ verb, state string }{{"pause", "paused"}, {"resume", "active"}, {"cancel", "completed"}} {
		var got apiwire.Task
		if err := json.Unmarshal([]byte(ok("tasks", c.verb, task.ID)), &got); err != nil || got.State != c.state {
			t.Errorf("tasks %s: %+v %v", c.verb, got, err)
		}
	}
	var tasks []apiwire.Task
	if err := json.Unmarshal([]byte(ok("tasks", "--folder", "main/research", "--state", "completed", "--json")), &tasks); err != nil || len(tasks) != 1 {
		t.Errorf("tasks --json: %+v %v", tasks, err)
	}

	if _, err := fx.st.AppendInbox(ctx, "main", store.InboxMessage{ChatJID: "tg:-100", SenderJID: "tg:1", Role: "user", Content: "are you there?", Source: store.SourceRoute}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.st.Park(ctx, "main", "image localhost/agent:9 not found"); err != nil {
		t.Fatal(err)
	}
	if out := ok("inbox", "list", "--folder", "main"); !strings.Contains(out, "main is parked since") ||
		!strings.Contains(out, "image localhost/agent:9 not found") || !strings.Contains(out, "arizukod unpark --folder main") ||
		!strings.Contains(out, "are you there?") || !strings.Contains(out, "tg:-100") {
		t.Errorf("inbox list:\n%s", out)
	}
	var in apiwire.Inbox
	if err := json.Unmarshal([]byte(ok("inbox", "list", "--folder", "main", "--json")), &in); err != nil || len(in.Pending) != 1 || in.ParkedReason == "" {
		t.Errorf("inbox list --json: %+v %v", in, err)
	}
	if out := ok("unpark", "--folder", "main"); out != "main unparked (it was parked for: image localhost/agent:9 not found); its pending messages run now\n" {
		t.Errorf("unpark: %q", out)
	}
	if c, _ := fx.st.GetCursor(ctx, "main"); c.Parked() {
		t.Errorf("still parked after unpark: %+v", c)
	}
	if out := ok("unpark", "--folder", "main"); out != "main was not parked; its inbox runs as usual\n" {
		t.Errorf("unpark again: %q", out)
	}

	var ids []int64
	for _, it := range []store.OutboxItem{
		{Folder: "main", Kind: store.OutboxReply, Target: "tg:-100", Content: "first"},
		{Folder: "main/research", Kind: store.OutboxMessage, Target: "tg:-200", Content: "second"},
	} {
		row, err := fx.st.AppendOutbox(ctx, it)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, row.ID)
	}
	var rows []apiwire.OutboxRow
	if err := json.Unmarshal([]byte(ok("outbox", "--json")), &rows); err != nil || len(rows) != 2 || rows[0].State != "pending" || rows[0].Attempts != 0 {
		t.Errorf("outbox --json lists without leasing: %+v %v", rows, err)
	}
	if out := ok("outbox", "--folder", "main/research"); !strings.Contains(out, "second") || strings.Contains(out, "first") {
		t.Errorf("outbox --folder main/research:\n%s", out)
	}
	// A gateway leased the first row; ack takes its lease's token.
	first, err := fx.st.LeaseOutbox(ctx, store.OutboxFilter{Folder: "main"}, store.LeasePolicy{Visibility: time.Minute, MaxAttempts: 5})
	if err != nil || len(first.Items) != 1 {
		t.Fatalf("lease: %+v %v", first, err)
	}
	if code, _, stderr := fx.run(t, "outbox", "ack", strconv.FormatInt(ids[0], 10), "--lease", "someone-else", s); code != 1 || !strings.Contains(stderr, "409") || !strings.Contains(stderr, "someone-else") {
		t.Errorf("outbox ack with another lease: exit %d, stderr %q", code, stderr)
	}
	if out := ok("outbox", "ack", strconv.FormatInt(ids[0], 10), "--lease", first.Token); strings.TrimSpace(out) != "{\n  \"acked\": 1\n}" {
		t.Errorf("outbox ack: %q", out)
	}
	if err := json.Unmarshal([]byte(ok("outbox", "--state", "delivered", "--json")), &rows); err != nil || len(rows) != 1 || rows[0].ID != ids[0] {
		t.Errorf("outbox --state delivered: %+v %v", rows, err)
	}
	// The second row fails once with one attempt allowed: parked, then retried.
	policy := store.LeasePolicy{Visibility: time.Minute, MaxAttempts: 1}
	second, err := fx.st.LeaseOutbox(ctx, store.OutboxFilter{}, policy)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fx.st.FailOutbox(ctx, second.Token, ids[1], "telegram: chat not found", 0, policy); err != nil {
		t.Fatal(err)
	}
	if out := ok("outbox", "--state", "parked"); !strings.Contains(out, "parked") || !strings.Contains(out, "telegram: chat not found") {
		t.Errorf("outbox --state parked:\n%s", out)
	}
	var row shownRow
	if err := json.Unmarshal([]byte(ok("outbox", "retry", strconv.FormatInt(ids[1], 10))), &row); err != nil || row.State != "pending" || row.Attempts != 0 {
		t.Errorf("outbox retry: %+v %v", row, err)
	}
	if second, err = fx.st.LeaseOutbox(ctx, store.OutboxFilter{}, policy); err != nil || len(second.Items) != 1 {
		t.Fatalf("lease after retry: %+v %v", second, err)
	}
	if err := json.Unmarshal([]byte(ok("outbox", "fail", strconv.FormatInt(ids[1], 10), "--lease", second.Token, "--error", "rate limited")), &row); err != nil || row.LastError != "rate limited" {
		t.Errorf("outbox fail: %+v %v", row, err)
	}
	if err := json.Unmarshal([]byte(ok("outbox", "show", strconv.FormatInt(ids[1], 10))), &row); err != nil || row.ID != ids[1] || row.Content != "second" {
		t.Errorf("outbox show: %+v %v", row, err)
	}

	// --follow leases the pending row, prints it and acks it; it ends with its context.
	fctx, cancel := context.WithCancel(ctx)
	var out strings.Builder
	done := make(chan error, 1)
	go func() { done <- runOutbox(fctx, []string{"--follow", "--json", s}, &out) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := fx.st.GetOutbox(ctx, ids[1])
		if err != nil {
			t.Fatal(err)
		}
		if got.State == store.OutboxDelivered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("--follow did not ack row %d: %+v", ids[1], got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("outbox --follow: %v", err)
	}
	var followed apiwire.OutboxRow
	if err := json.Unmarshal([]byte(out.String()), &followed); err != nil || followed.ID != ids[1] {
		t.Errorf("outbox --follow printed %q (%v)", out.String(), err)
	}
}

// TestCLIHostileText: what an agent or a chat user wrote reaches the terminal with its
// controls shown, never acting on it: a reply holding ESC[2J (clear the screen), OSC 52 (set
// the clipboard), a C1 CSI and a forged "main: " line, printed by chat and by outbox,
// inbox, tasks and unpark. --json carries the text exactly.
func TestCLIHostileText(t *testing.T) {
	fx := newCLIFixture(t)
	ctx := context.Background()
	s := "--socket=" + fx.socket
	const hostile = "hi\x1b[2J\x1b]52;c;ZXZpbA==\x07 there\r\nmain: forged line\nnotice: fake \u009b31mred\x1b[H"
	chat := "cli:" + userName()
	if _, err := fx.st.AppendOutbox(ctx, store.OutboxItem{Folder: "main", Kind: store.OutboxReply, Target: chat, Content: hostile}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.st.AppendInbox(ctx, "main", store.InboxMessage{ChatJID: "tg:\x1b[2J", Role: "user", Content: hostile, Source: store.SourceRoute}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.st.Park(ctx, "main", hostile); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.st.CreateTask(ctx, store.Task{Folder: "main", Prompt: hostile, ScheduleKind: store.ScheduleInterval,
		ScheduleExpr: "3600000", State: store.TaskActive, NextRunAt: time.Now().Add(time.Hour).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	safe := func(what, out string) {
		t.Helper()
		if bad := terminalControl(out); bad != "" {
			t.Errorf("%s prints %s:\n%q", what, bad, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "main: forged") || strings.HasPrefix(l, "notice: fake") {
				t.Errorf("%s prints the forged line %q as a line of its own:\n%q", what, l, out)
			}
		}
	}

	// chat prints the chat's pending reply, acks it and ends with its input.
	var stdout, stderr bytes.Buffer
	if err := runChat(ctx, []string{"--folder", "main", s}, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("chat: %v\n%s", err, stderr.String())
	}
	if want := `hi\x1b[2J\x1b]52;c;ZXZpbA==\x07 there` + "\n  main: forged line\n  notice: fake \\u009b31mred\\x1b[H\n"; stdout.String() != want {
		t.Errorf("chat printed %q, want %q", stdout.String(), want)
	}
	safe("chat", stdout.String()+stderr.String())

	for _, args := range [][]string{
		{"outbox"}, {"inbox", "list", "--folder", "main"}, {"tasks"}, {"unpark", "--folder", "main"},
	} {
		code, out, errOut := fx.run(t, append(args, s)...)
		if code != 0 {
			t.Fatalf("arizukod %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		if !strings.Contains(out, `\x1b[2J`) {
			t.Errorf("arizukod %s does not show the escape:\n%s", strings.Join(args, " "), out)
		}
		safe("arizukod "+strings.Join(args, " "), out+errOut)
	}

	// --json is exact: the text decodes as it was written, and its bytes act on nothing.
	code, out, _ := fx.run(t, "outbox", "--json", s)
	var rows []apiwire.OutboxRow
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 1 || rows[0].Content != hostile {
		t.Fatalf("outbox --json: exit %d %v %+v", code, err, rows)
	}
	safe("outbox --json", out)
	// Each --follow its own chat: a long poll that ends with its caller may still lease.
	for i, asJSON := range []bool{false, true} {
		target := "tg:" + strconv.Itoa(i)
		row, err := fx.st.AppendOutbox(ctx, store.OutboxItem{Folder: "main", Kind: store.OutboxReply, Target: target, Content: hostile})
		if err != nil {
			t.Fatal(err)
		}
		fctx, cancel := context.WithCancel(ctx)
		var b syncBuffer
		done := make(chan error, 1)
		args := []string{"--follow", "--chat", target, s}
		if asJSON {
			args = append(args, "--json")
		}
		go func() { done <- runOutbox(fctx, args, &b) }()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if got, err := fx.st.GetOutbox(ctx, row.ID); err != nil || got.State == store.OutboxDelivered {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("outbox --follow did not ack row %d: printed %q", row.ID, b.String())
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		safe("outbox --follow", b.String())
		if asJSON {
			var got apiwire.OutboxRow
			if err := json.Unmarshal([]byte(b.String()), &got); err != nil || got.Content != hostile {
				t.Errorf("outbox --follow --json: %q %v", got.Content, err)
			}
		} else if !strings.Contains(b.String(), "\n  main: forged line\n") {
			t.Errorf("outbox --follow printed %q", b.String())
		}
	}
}

// syncBuffer is a bytes.Buffer a command writes in one goroutine while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
