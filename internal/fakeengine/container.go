package fakeengine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/arizuko/arizukod/runtime/engine"
)

// container is one container's life: created, running, exited.
type container struct {
	id      string
	spec    engine.Spec
	script  Script
	created time.Time

	mu       sync.Mutex
	st       engine.State
	attached bool
	stdin    bytes.Buffer
	stdout   bytes.Buffer
	stderr   bytes.Buffer
	signals  []string
	stopSig  string
	stop     chan struct{} // closed by the first SIGTERM or SIGKILL that ends it
	eof      chan struct{} // closed when its stdin is closed
	detached chan struct{} // closed when the attachment is closed
	done     chan struct{} // closed when it exited
}

func newContainer(id string, spec engine.Spec, s Script) *container {
	return &container{id: id, spec: spec, script: s, created: time.Now(), st: engine.State{Status: "created"},
		stop: make(chan struct{}), eof: make(chan struct{}), detached: make(chan struct{}), done: make(chan struct{})}
}

func (c *container) state() engine.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

func (c *container) logs() (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stdout.String(), c.stderr.String()
}

func (c *container) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.Status != "created" {
		return fmt.Errorf("container %s is %s: cannot start it", c.spec.Name, c.st.Status)
	}
	if c.script.StartErr != nil {
		c.st.Error = c.script.StartErr.Error()
		return c.script.StartErr
	}
	c.st.Running, c.st.Status, c.st.StartedAt = true, "running", time.Now()
	go c.play(c.attached)
	return nil
}

// play is the container's process: read the input, print, hang or not, exit.
func (c *container) play(attached bool) {
	s := c.script
	if s.Stdin == StdinRead && attached {
		select {
		case <-c.eof:
		case <-c.detached:
		case <-c.stop:
			c.exit(exitStatus(c.stopSig), false)
			return
		}
	}
	c.mu.Lock()
	c.stdout.WriteString(s.Stdout)
	c.stderr.WriteString(s.Stderr)
	c.mu.Unlock()
	if s.Hang {
		var closed <-chan struct{}
		if s.OnClose != "" {
			closed = fileAppears(closeSentinel(c.spec), c.done)
		}
		select {
		case <-c.stop:
			c.exit(exitStatus(c.stopSig), false)
			return
		case <-closed:
			c.mu.Lock()
			c.stdout.WriteString(s.OnClose)
			c.mu.Unlock()
		}
	}
	if s.OOM {
		c.exit(137, true)
		return
	}
	c.exit(s.ExitCode, false)
}

func (c *container) exit(code int, oom bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.Running, c.st.Status, c.st.ExitCode, c.st.OOMKilled, c.st.FinishedAt = false, "exited", code, oom, time.Now()
	close(c.done)
}

// signal records sig; SIGTERM (unless the script ignores it) and SIGKILL end the
// container.
func (c *container) signal(sig string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.st.Running {
		return fmt.Errorf("can only kill running containers; %s is in state %s", c.spec.Name, c.st.Status)
	}
	c.signals = append(c.signals, sig)
	ends := sig == "SIGKILL" || sig == "SIGTERM" && !(c.script.IgnoreTerm && c.script.Hang)
	if ends && c.stopSig == "" {
		c.stopSig = sig
		close(c.stop)
	}
	return nil
}

// attach connects to the container's streams: stdin as its script reads it, stdout and
// stderr copied once it exited.
func (c *container) attach() *engine.Attachment {
	c.mu.Lock()
	c.attached = true
	c.mu.Unlock()
	var once sync.Once
	closeFn := func() error {
		once.Do(func() { close(c.detached) })
		return nil
	}
	copyOut := func(stdout, stderr io.Writer) error {
		select {
		case <-c.done:
		case <-c.detached:
			return errors.New("use of closed network connection")
		}
		out, errOut := c.logs()
		if _, err := io.WriteString(stdout, out); err != nil {
			return err
		}
		_, err := io.WriteString(stderr, errOut)
		return err
	}
	return engine.NewAttachment(&stdinWriter{c: c}, copyOut, closeFn)
}

// stdinWriter is the container's stdin as its script treats it.
type stdinWriter struct {
	c    *container
	once sync.Once
}

func (w *stdinWriter) Write(p []byte) (int, error) {
	c := w.c
	switch c.script.Stdin {
	case StdinBroken:
		return 0, syscall.EPIPE
	case StdinBlocked:
		<-c.detached
		return 0, errors.New("use of closed network connection")
	}
	select {
	case <-c.done:
		return 0, syscall.EPIPE
	case <-c.eof:
		return 0, errors.New("write after close")
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stdin.Write(p)
}

// Close half-closes stdin: the container reads EOF.
func (w *stdinWriter) Close() error {
	w.once.Do(func() { close(w.c.eof) })
	return nil
}
