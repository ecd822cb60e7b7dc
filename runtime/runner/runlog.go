package runner

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"time"
)

// writeLog writes groups/<folder>/logs/container-<unix_ms>.log (ms: the turn's stamp): header, events, exit,
// duration and the tail of stderr. Secrets are redacted.
func (tr *turnRun) writeLog() {
	f, err := tr.r.cfg.Layout.CreateLog(tr.t.Folder, fmt.Sprintf("container-%d.log", tr.stamp.UnixMilli()))
	if err != nil {
		tr.log.Warn("run log", "err", err)
		return
	}
	defer f.Close()
	res := tr.res
	var b bytes.Buffer
	fmt.Fprintf(&b, "run: %s\nfolder: %s\ncontainer: %s\nimage: %s\nengine: %s %s\nstarted: %s\nduration: %s\nexit: %d\nstatus: %s\nfailure: %s\n",
		res.RunID, tr.t.Folder, res.Container, tr.r.cfg.Image, tr.r.info().Name, tr.r.info().Version,
		tr.started.UTC().Format(time.RFC3339Nano), res.Duration.Round(time.Millisecond), res.ExitCode, res.Output.Status, res.Failure)
	if res.Output.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", res.Output.Error)
	}
	fmt.Fprintf(&b, "stdout: %d bytes\n\n-- events --\n%s\n\n-- stderr (last %d bytes) --\n%s\n", res.StdoutBytes, strings.Join(tr.events, "\n"), maxStderrKept, res.Stderr)
	// Everything in it, the events' engine errors included, is redacted as one text.
	if _, err := f.Write([]byte(tr.r.cfg.Redact(b.String()))); err != nil {
		tr.log.Warn("run log", "err", err)
	}
	res.LogFile = f.Name()
}

// tailBuffer keeps the last maxStderrKept bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - maxStderrKept; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// lineSplitter feeds stderr to the tail buffer and, line by line, to a callback.
type lineSplitter struct {
	onLine func(string)
	tail   *tailBuffer
	redact func(string) string
	line   []byte
}

func (l *lineSplitter) Write(p []byte) (int, error) {
	l.tail.Write(p)
	if l.onLine == nil {
		return len(p), nil
	}
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(l.line) < 4096 {
				l.line = append(l.line, rest[:min(len(rest), 4096-len(l.line))]...)
			}
			break
		}
		if len(l.line) < 4096 {
			l.line = append(l.line, rest[:min(i, 4096-len(l.line))]...)
		}
		l.onLine(l.redact(string(l.line)))
		l.line = l.line[:0]
		rest = rest[i+1:]
	}
	return len(p), nil
}
