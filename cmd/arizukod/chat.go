package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
)

// errInterrupted ends `arizukod chat` on Ctrl-C, after it killed its turns: exit status 130.
var errInterrupted = errors.New("interrupted")

// chatPoll is how often chat looks at its turns while one is under way.
const chatPoll = 250 * time.Millisecond

// chatCutAfter is how long an idle long poll of the outbox has waited before the end of
// the input may cut it short.
const chatCutAfter = 500 * time.Millisecond

// maxLine bounds a line of input: one message, with room in the API's request body.
const maxLine = apiwire.MaxBody / 2

func cmdChat(ctx context.Context, args []string) error {
	return runChat(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

// runChat is `arizukod chat`: a terminal channel through the daemon. Each line read goes
// to the group's inbox from the chat cli:<user>; the queue runs the turn; the replies are
// leased from the outbox stream filtered to that group and that chat, printed and
// acknowledged. At the end
// of the input it waits until its turns ended and their replies were printed. Ctrl-C kills
// the turns it started and exits.
func runChat(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("chat", "--folder F [--socket S]")
	socket := socketFlag(fs)
	folder := fs.String("folder", "", "the group to talk to (required), e.g. main")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *folder == "" {
		fmt.Fprintln(fs.Output(), "arizukod chat: give --folder, e.g. --folder main (`arizukod groups list` shows the groups)")
		fs.Usage()
		return errUsage
	}
	c := apiwire.NewClient(*socket)
	var g apiwire.Group
	if err := c.Do(ctx, http.MethodGet, "/v1/groups/"+url.PathEscape(*folder), nil, &g); err != nil {
		var apiErr *apiwire.Error
		if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
			return fmt.Errorf("group %q is not registered: run `arizukod groups add %s` first", *folder, *folder)
		}
		return err
	}
	ch := &chat{c: c, folder: g.Folder, jid: "cli:" + userName(), runs: map[string]*apiwire.Run{}}
	ch.out = newChatPrinter(stdout, stderr)
	ch.interactive = isTerminal(stdin) && ch.out.tty
	if ch.interactive {
		ch.out.info(fmt.Sprintf("Talking to %s as %s. Ctrl-D ends, Ctrl-C stops a turn and ends.", g.Folder, ch.jid))
	}
	return ch.run(ctx, stdin)
}

// userName is the OS user's name, the <user> of the chat cli:<user>.
func userName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return strconv.Itoa(os.Getuid())
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// chat is one session of `arizukod chat`. Its state belongs to the goroutine in run.
type chat struct {
	c           *apiwire.Client
	folder      string
	jid         string
	interactive bool
	out         *chatPrinter

	outstanding []int64                 // ids of the messages sent whose turn has not ended, ascending
	runs        map[string]*apiwire.Run // the runs answering them, as last seen
	reported    map[string]bool         // what was told of a run: its id (key id) and each state (key id/state)
	inbox       apiwire.Inbox           // the inbox as last seen
	parked      string                  // the inbox's parked reason, once told
	retryAt     string                  // the inbox's next attempt, once told
	failed      bool                    // a turn failed or the inbox is parked
	stopping    bool                    // Ctrl-C: killing the runs
	busy        atomic.Bool             // a turn is under way: the outbox is polled in short steps
}

// lineOrErr is one line of input, or the error that ended reading.
type lineOrErr struct {
	line string
	err  error
}

func (ch *chat) run(ctx context.Context, stdin io.Reader) error {
	ch.reported = map[string]bool{}
	lines := make(chan lineOrErr)
	go readLines(stdin, lines)

	sctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	stream := &chatStream{ch: ch, finish: make(chan struct{}), drained: make(chan struct{}), errc: make(chan error, 1), got: make(chan struct{}, 1)}
	go stream.run(sctx)
	spin := ch.out.spin()
	defer spin()

	tick := time.NewTicker(chatPoll)
	defer tick.Stop()
	eof, finishing := false, false
	for {
		if eof && !finishing && ch.idle() {
			finishing = true
			close(stream.finish)
		}
		select {
		case <-ctx.Done():
			stopStream()
			return ch.interrupt()
		case err := <-stream.errc:
			return err
		case <-stream.drained:
			ch.out.status("")
			if ch.failed {
				return errTurnFailed
			}
			return nil
		case l, ok := <-lines:
			if !ok {
				eof, lines = true, nil
				continue
			}
			if errors.Is(l.err, bufio.ErrTooLong) {
				return fmt.Errorf("read input: a line longer than %d bytes: split it, or put the text in a file in the group's folder and say where", maxLine)
			}
			if l.err != nil {
				return fmt.Errorf("read input: %w", l.err)
			}
			// A message that reached the inbox must be known here, or Ctrl-C could not kill
			// its turn: the send completes even when Ctrl-C comes meanwhile.
			sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			err := ch.send(sendCtx, l.line)
			cancel()
			if err != nil {
				if !ch.interactive || ctx.Err() != nil {
					return err
				}
				ch.out.info("not sent: " + safeText(err.Error(), "    "))
			}
		case <-tick.C:
			if ch.idle() {
				continue
			}
			if err := ch.poll(ctx); err != nil && ctx.Err() == nil {
				return err
			}
		case <-stream.got:
			// A reply often comes with its turn's end: look now rather than at the next tick.
			if err := ch.poll(ctx); err != nil && ctx.Err() == nil {
				return err
			}
		}
	}
}

// readLines sends stdin's lines (blank ones skipped), then closes lines.
func readLines(r io.Reader, lines chan<- lineOrErr) {
	defer close(lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			lines <- lineOrErr{line: sc.Text()}
		}
	}
	if err := sc.Err(); err != nil {
		lines <- lineOrErr{err: err}
	}
}

// send puts one line into the group's inbox from this chat.
func (ch *chat) send(ctx context.Context, line string) error {
	req := apiwire.InboxRequest{Messages: []contract.Message{{Role: "user", Content: line}}, SenderJID: ch.jid, ChatJID: ch.jid}
	var out struct {
		IDs []int64 `json:"ids"`
	}
	if err := ch.c.Do(ctx, http.MethodPost, "/v1/groups/"+url.PathEscape(ch.folder)+"/messages", req, &out); err != nil {
		return err
	}
	ch.outstanding = append(ch.outstanding, out.IDs...)
	ch.busy.Store(true)
	ch.status()
	return nil
}

// idle reports that no message waits for its turn and every run answering one ended.
func (ch *chat) idle() bool {
	return len(ch.outstanding) == 0 && ch.runsEnded()
}

// runsEnded reports that every run answering a message sent ended.
func (ch *chat) runsEnded() bool {
	for _, r := range ch.runs {
		if !final(r.State) {
			return false
		}
	}
	return true
}

// created is when r was queued.
func created(r *apiwire.Run) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, r.CreatedAt)
	return t
}

func final(state string) bool {
	return state == "exited" || state == "error" || state == "killed"
}

// poll looks at the inbox and the runs answering the messages sent: it tells a run's id,
// its failure, a retry or a parked inbox, and forgets the messages whose turn ended. The
// cursor is read before the runs, so a run that ended between two polls is still seen
// before its messages are forgotten.
func (ch *chat) poll(ctx context.Context) error {
	var in apiwire.Inbox
	if err := ch.c.Do(ctx, http.MethodGet, "/v1/groups/"+url.PathEscape(ch.folder)+"/messages?limit=1", nil, &in); err != nil {
		return err
	}
	ch.inbox = in
	if in.ParkedReason == "" {
		ch.parked = ""
	}
	var list struct{ Runs []apiwire.Run }
	if err := ch.c.Do(ctx, http.MethodGet, "/v1/runs?limit=50&folder="+url.QueryEscape(ch.folder), nil, &list); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range list.Runs {
		r := &list.Runs[i]
		seen[r.ID] = true
		if _, tracked := ch.runs[r.ID]; tracked || ch.answers(r) {
			ch.runs[r.ID] = r
		}
	}
	for id, r := range ch.runs {
		if seen[id] || final(r.State) {
			continue
		}
		var fresh apiwire.Run
		if err := ch.c.Do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &fresh); err != nil {
			return err
		}
		ch.runs[id] = &fresh
	}
	ch.report()
	ch.reportRetries()
	n := 0
	for n < len(ch.outstanding) && ch.outstanding[n] <= in.LastDoneID {
		n++
	}
	ch.outstanding = ch.outstanding[n:]
	switch {
	case len(ch.outstanding) == 0:
	case in.ParkedReason != "" && ch.parked != in.ParkedReason:
		ch.parked, ch.failed = in.ParkedReason, true
		ch.out.info(fmt.Sprintf("✗ %s is parked: %s\n  Your message waits in its inbox. Fix that, then run `arizukod unpark --folder %s`.",
			ch.folder, safeText(in.ParkedReason, "    "), ch.folder))
		if ch.interactive {
			ch.outstanding = nil
		}
	case in.ParkedReason == "" && in.NextAttemptAt != "" && ch.retryAt != in.NextAttemptAt:
		ch.retryAt = in.NextAttemptAt
		ch.out.info(fmt.Sprintf("  retrying at %s (attempt %d failed: %s)", safeLine(in.NextAttemptAt), in.Retries, safeText(in.LastError, "    ")))
	}
	if !ch.interactive && in.ParkedReason != "" {
		ch.outstanding = nil
	}
	for id, r := range ch.runs {
		if final(r.State) && !ch.answers(r) {
			delete(ch.runs, id)
		}
	}
	ch.busy.Store(!ch.idle())
	ch.status()
	return nil
}

// answers reports whether r is an inbox run over one of the messages sent.
func (ch *chat) answers(r *apiwire.Run) bool {
	if r.InboxLast == 0 {
		return false
	}
	for _, id := range ch.outstanding {
		if id >= r.InboxFirst && id <= r.InboxLast {
			return true
		}
	}
	return false
}

// report tells each run answering this chat once: its id when seen (without a terminal)
// and how it failed when it did.
func (ch *chat) report() {
	runs := make([]*apiwire.Run, 0, len(ch.runs))
	for _, r := range ch.runs {
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b *apiwire.Run) int { return cmp.Or(created(a).Compare(created(b)), cmp.Compare(a.ID, b.ID)) })
	for _, r := range runs {
		id := safeLine(r.ID)
		key := r.ID + "/" + r.State
		if ch.reported[key] {
			continue
		}
		// Without a terminal the run's id is told once, also when the turn was over before
		// chat first saw it (a quick turn can end between two looks).
		if !ch.out.tty && !ch.reported[r.ID] {
			ch.out.info("run " + id)
		}
		ch.reported[r.ID], ch.reported[key] = true, true
		if !final(r.State) {
			continue
		}
		switch {
		case r.State == "killed" && ch.stopping:
			ch.out.info("killed run " + id)
		case r.State == "killed":
			ch.failed = true
			ch.out.info(fmt.Sprintf("✗ run %s was killed", id))
		case r.Status != "ok":
			ch.failed = true
			why := r.Error
			if why == "" {
				why = "no error given"
			}
			class := ""
			if r.Failure != "" {
				class = " (" + safeLine(r.Failure) + ")"
			}
			ch.out.info(fmt.Sprintf("✗ run %s failed%s: %s\n  `arizukod runs show %s` has the details.", id, class, safeText(why, "    "), id))
		}
	}
}

// reportRetries tells, for each run under way, each new failure of the model upstream
// that its agent retries.
func (ch *chat) reportRetries() {
	for _, r := range ch.runs {
		why := upstreamError(*r)
		if why == "" || final(r.State) || ch.reported[r.ID+"/model:"+why] {
			continue
		}
		ch.reported[r.ID+"/model:"+why] = true
		ch.out.info(retryingNote(r.ID, why))
	}
}

// status sets the spinner's line from the newest run under way.
func (ch *chat) status() {
	var cur *apiwire.Run
	for _, r := range ch.runs {
		if !final(r.State) && (cur == nil || created(r).After(created(cur))) {
			cur = r
		}
	}
	switch {
	case cur != nil && ch.stopping:
		ch.out.status(fmt.Sprintf("%s: stopping run %s", ch.folder, safeLine(cur.ID)))
	case cur != nil:
		ch.out.status(fmt.Sprintf("%s: run %s %s", ch.folder, safeLine(cur.ID), safeLine(cur.State)))
	case len(ch.outstanding) > 0:
		ch.out.status(ch.folder + ": waiting for a turn")
	default:
		ch.out.status("")
	}
}

// interrupt kills what runs for this chat: every run answering a message sent, until the
// messages are handled (a killed turn's messages count as handled) or nothing more can be
// done. A second Ctrl-C gives up at once.
func (ch *chat) interrupt() error {
	ch.stopping = true
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()
	killed := map[string]bool{}
	for {
		if err := ch.poll(ctx); err != nil {
			return fmt.Errorf("interrupted, and could not check the turns: %w (`arizukod runs list --folder %s` shows them)", err, ch.folder)
		}
		for id, r := range ch.runs {
			if final(r.State) || killed[id] {
				continue
			}
			var after apiwire.Run
			err := ch.c.Do(ctx, http.MethodDelete, "/v1/runs/"+url.PathEscape(id), nil, &after)
			var apiErr *apiwire.Error
			if err != nil && !(errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict) {
				return fmt.Errorf("interrupted, and could not kill run %s: %w (try `arizukod runs kill %s`)", id, err, id)
			}
			killed[id] = true
		}
		switch {
		case ch.idle() || ch.parked != "":
			return errInterrupted
		case ch.inbox.NextAttemptAt != "" && ch.runsEnded():
			return fmt.Errorf("interrupted; your message waits in the inbox of %s for a retry at %s: `arizukod inbox list --folder %s` shows it",
				ch.folder, ch.inbox.NextAttemptAt, ch.folder)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted; gave up waiting for the turns to end (`arizukod runs list --folder %s` shows them)", ch.folder)
		case <-time.After(chatPoll):
		}
	}
}

// chatStream leases the chat's rows from the outbox, prints and acknowledges them. Once
// finish is closed, a lease asked after that which comes back empty means every reply of
// the ended turns was printed: it closes drained.
type chatStream struct {
	ch      *chat
	finish  chan struct{}
	drained chan struct{}
	errc    chan error
	got     chan struct{} // a row was printed
}

func (s *chatStream) run(ctx context.Context) {
	for {
		finishing := false
		select {
		case <-s.finish:
			finishing = true
		default:
		}
		wait := 25 * time.Second
		switch {
		case finishing:
			// The ended turns' rows were written with their ends: nothing to wait for.
			wait = 0
		case s.ch.busy.Load() || !s.ch.interactive:
			wait = 2 * time.Second
		}
		// Only this group's rows to this chat: another group's rows (a notice that it
		// parked) belong to another consumer, and are neither shown nor taken here.
		// The end of the input cuts an idle long poll short: what is left is one lease
		// that does not wait. A poll is cut only once it has waited a while: the daemon
		// answers at once when rows wait, and a poll cut after it leased rows would leave
		// them to come again only after the visibility timeout.
		lctx, cancel := context.WithCancel(ctx)
		if !finishing {
			asked := time.Now()
			go func() {
				select {
				case <-s.finish:
				case <-lctx.Done():
					return
				}
				select {
				case <-time.After(time.Until(asked.Add(chatCutAfter))):
					cancel()
				case <-lctx.Done():
				}
			}()
		}
		lease, err := s.ch.c.LeaseOutbox(lctx, apiwire.OutboxQuery{Folder: s.ch.folder, Chat: s.ch.jid, Wait: wait})
		cut := lctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return
		}
		if cut {
			continue
		}
		var apiErr *apiwire.Error
		if errors.As(err, &apiErr) && (apiErr.Code == http.StatusNotFound || apiErr.Code == http.StatusMethodNotAllowed) {
			s.errc <- fmt.Errorf("the daemon has no outbox stream (GET /v1/outbox: %w): it is older than this arizukod; restart it with this version", err)
			return
		}
		if err != nil {
			s.errc <- fmt.Errorf("outbox: %w", err)
			return
		}
		rows := lease.Items
		ids := make([]int64, 0, len(rows))
		for _, r := range rows {
			s.ch.out.reply(s.ch.folder, r)
			ids = append(ids, r.ID)
		}
		if len(ids) > 0 {
			if _, err := s.ch.c.AckOutbox(ctx, lease.Lease, ids...); err != nil {
				if ctx.Err() == nil {
					s.errc <- fmt.Errorf("outbox: acknowledge %v: %w", ids, err)
				}
				return
			}
			select {
			case s.got <- struct{}{}:
			default:
			}
		}
		if finishing && len(rows) == 0 {
			close(s.drained)
			return
		}
	}
}

// chatPrinter writes replies to stdout and what chat tells about its turns to stdout on a
// terminal (between the replies), else to stderr; on a terminal it draws a spinner line
// while a turn is under way and clears it before anything else is written.
type chatPrinter struct {
	mu      sync.Mutex
	stdout  io.Writer
	infoW   io.Writer
	tty     bool
	line    string // the spinner's text; "" when none
	since   time.Time
	frame   int
	drawn   bool
	started bool
}

func newChatPrinter(stdout, stderr io.Writer) *chatPrinter {
	p := &chatPrinter{stdout: stdout, infoW: stderr, tty: isTerminal(stdout)}
	if p.tty {
		p.infoW = stdout
	}
	return p
}

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// spin draws the spinner until the returned stop is called (on a terminal).
func (p *chatPrinter) spin() (stop func()) {
	if !p.tty {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.mu.Lock()
				p.frame++
				p.draw()
				p.mu.Unlock()
			}
		}
	}()
	return func() {
		cancel()
		<-done
		p.mu.Lock()
		p.clear()
		p.mu.Unlock()
	}
}

func (p *chatPrinter) clear() {
	if p.drawn {
		fmt.Fprint(p.stdout, "\r\033[K")
		p.drawn = false
	}
}

func (p *chatPrinter) draw() {
	if p.line == "" {
		p.clear()
		return
	}
	fmt.Fprintf(p.stdout, "\r\033[K%s %s · %s", spinnerFrames[p.frame%len(spinnerFrames)], p.line,
		time.Since(p.since).Round(time.Second))
	p.drawn = true
}

// status sets the spinner's text; "" stops it.
func (p *chatPrinter) status(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if line != "" && !p.started {
		p.since, p.started = time.Now(), true
	}
	if line == "" {
		p.started = false
	}
	p.line = line
	if p.tty {
		p.draw()
	}
}

// info writes one line about the turns.
func (p *chatPrinter) info(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintln(p.infoW, line)
	if p.tty {
		p.draw()
	}
}

// reply writes one delivered row: its content, a document's name and path, a notice
// marked as one. On a terminal each reply is labelled with the group. The agent's text
// shows its control characters (safeText) and its lines after the first are indented
// beyond the label, so that none passes for another reply, a notice or a line of chat's.
func (p *chatPrinter) reply(folder string, r apiwire.OutboxRow) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	label, shown := "", ""
	if p.tty {
		label, shown = folder+": ", "\033[1m"+folder+":\033[0m "
	}
	if r.Kind == "notice" {
		label, shown = label+"notice: ", shown+"notice: "
	}
	text := r.Content
	if r.Kind == "document" {
		text = strings.TrimSpace(text + "\n" + fmt.Sprintf("[document %s: %s]", r.DocName, r.DocPath))
	}
	indent := strings.Repeat(" ", max(2, utf8.RuneCountInString(label)))
	fmt.Fprintln(p.stdout, shown+safeText(text, indent))
	// The spinner's line is what the last look at the runs saw, from before this reply
	// (a run still "queued" when its turn was quick): it shows again once chat looked
	// again and a run is still under way.
	p.line = ""
}
