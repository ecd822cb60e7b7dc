package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/store"
)

// TestChatOwnRowsOnly: `arizukod chat --folder side` neither shows nor acknowledges a row
// of another group to the same chat (main's notice that it parked); `chat --folder main`
// shows it and acknowledges it.
func TestChatOwnRowsOnly(t *testing.T) {
	ctx := context.Background()
	socket, st := cliDaemon(t, t.TempDir(), okHealth{})
	if _, err := st.UpsertGroup(ctx, store.Group{Folder: "side"}); err != nil {
		t.Fatal(err)
	}
	jid := "cli:" + userName()
	row, err := st.AppendOutbox(ctx, store.OutboxItem{Folder: "main", Kind: store.OutboxNotice, Target: jid, Content: "The agent is paused: boom"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		folder, stdout string
		state          store.OutboxState
	}{
		{"side", "", store.OutboxPending},
		{"main", "notice: The agent is paused: boom\n", store.OutboxDelivered},
	} {
		var stdout, stderr bytes.Buffer
		if err := runChat(ctx, []string{"--folder", tt.folder, "--socket", socket}, strings.NewReader(""), &stdout, &stderr); err != nil {
			t.Fatalf("chat --folder %s: %v (%s)", tt.folder, err, stderr.String())
		}
		if stdout.String() != tt.stdout {
			t.Errorf("chat --folder %s printed %q, want %q", tt.folder, stdout.String(), tt.stdout)
		}
		got, err := st.GetOutbox(ctx, row.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != tt.state {
			t.Errorf("after chat --folder %s main's notice is %s, want %s", tt.folder, got.State, tt.state)
		}
	}
}

// TestChatEndOfInput: Ctrl-D on an idle chat in a terminal ends it at once, not after
// the outbox's long poll (25 s).
func TestChatEndOfInput(t *testing.T) {
	socket, _ := cliDaemon(t, t.TempDir(), okHealth{})
	term := startTerminal(t, daemontest.Binary(t), socket, "main")
	term.waitFor(t, "Talking to main as cli:")
	// Let the idle long poll start before the end of the input.
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	term.write(t, "\x04")
	if code := term.wait(t); code != 0 {
		t.Errorf("Ctrl-D: exit %d, want 0\n%q", code, term.output())
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Ctrl-D took %s to end an idle chat, want at once", took)
	}
}

// TestChatSpinnerAfterReply: after a reply the spinner does not draw again what chat saw
// before it (a quick turn's run still "queued"); it shows again when chat looks again and
// a run is still under way, its time counted from the first line.
func TestChatSpinnerAfterReply(t *testing.T) {
	var out bytes.Buffer
	p := &chatPrinter{stdout: &out, infoW: &out, tty: true}
	p.status("main: run r_1 queued")
	p.reply("main", apiwire.OutboxRow{Kind: "reply", Content: "hi"})
	p.mu.Lock()
	p.frame++
	p.draw()
	p.mu.Unlock()
	_, after, _ := strings.Cut(out.String(), "hi\n")
	if strings.Contains(after, "queued") {
		t.Errorf("after the reply the terminal shows %q, want no stale spinner line", after)
	}
	since := p.since
	p.status("main: run r_2 running")
	if !strings.Contains(out.String(), "run r_2 running") || p.since != since {
		t.Errorf("the spinner after the next look: %q since %v, want it drawn, counted from %v", out.String(), p.since, since)
	}
}
