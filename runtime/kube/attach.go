package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/runtime/engine"
)

// Attach connects to the Pod's stdin, stdout and stderr through the attach subresource
// (WebSocket, SPDY where the server or a proxy refuses the upgrade), once its container
// runs: it returns at once, and the stream follows when the container is up. The end of
// the stream is the end of the turn; Inspect and Wait learn it (streamEnd).
func (e *Engine) Attach(ctx context.Context, id string) (*engine.Attachment, error) {
	if e.rest == nil {
		return nil, errors.New("kubernetes: attach needs a server (this engine has a client only)")
	}
	exec, err := e.attacher(id, &corev1.PodAttachOptions{Container: ContainerName, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	sctx, cancel := context.WithCancel(ctx)
	end := &streamEnd{done: make(chan struct{})}
	e.mu.Lock()
	e.attached[id] = end
	e.mu.Unlock()
	tail := &tailWriter{w: outW}
	go func() {
		_, err := e.waitRunning(sctx, id)
		if err == nil {
			err = exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: tail, Stderr: errW})
		}
		end.complete = err == nil && tail.endsWithMarker()
		end.at = time.Now()
		close(end.done)
		if err == nil {
			err = io.EOF
		}
		inR.CloseWithError(fmt.Errorf("the attach stream of pod %s ended: %w", id, err))
		outW.CloseWithError(err)
		errW.CloseWithError(err)
	}()
	copyOut := func(stdout, stderr io.Writer) error {
		var wg sync.WaitGroup
		wg.Go(func() { io.Copy(stderr, errR) })
		_, err := io.Copy(stdout, outR)
		wg.Wait()
		return err
	}
	closeFn := func() error {
		cancel()
		inR.Close()
		outR.Close()
		errR.Close()
		return nil
	}
	return engine.NewAttachment(inW, copyOut, closeFn), nil
}

// attacher is the executor of the Pod's attach subresource with opts: WebSocket, SPDY
// where the server or a proxy refuses the upgrade.
func (e *Engine) attacher(id string, opts *corev1.PodAttachOptions) (remotecommand.Executor, error) {
	req := e.client.CoreV1().RESTClient().Post().Namespace(e.cfg.Namespace).Resource("pods").Name(id).SubResource("attach").
		VersionedParams(opts, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(e.rest, "GET", req.URL().String())
	if err != nil {
		return nil, fmt.Errorf("kubernetes: attach to pod %s: %w", id, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(e.rest, "POST", req.URL())
	if err != nil {
		return nil, fmt.Errorf("kubernetes: attach to pod %s: %w", id, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: attach to pod %s: %w", id, err)
	}
	return exec, nil
}

// stdinCloseWait bounds the attach that closes an adopted Pod's stdin.
const stdinCloseWait = 10 * time.Second

// closeStdin closes the stdin of a Pod this engine never attached to, once it runs: an
// attach that sends nothing and goes. The Pod's stdin is one-shot (StdinOnce): a previous
// central's attach that ended closed it already, and then this changes nothing; a central
// that went before its attach left it open and empty, and the agent would wait on it until
// the run's timeout: now it reads EOF and ends, and its turn, whose input was never sent,
// is run again.
func (e *Engine) closeStdin(ctx context.Context, id string) {
	if e.rest == nil {
		return
	}
	p, err := e.waitRunning(ctx, id)
	if err != nil || p == nil || container(p) == nil || container(p).State.Running == nil {
		return
	}
	if c := podContainer(p); c == nil || !c.Stdin {
		return
	}
	exec, err := e.attacher(id, &corev1.PodAttachOptions{Container: ContainerName, Stdin: true})
	if err != nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, stdinCloseWait)
	defer cancel()
	exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: strings.NewReader("")})
}

// podContainer is the spec of the Pod's agent container.
func podContainer(p *corev1.Pod) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == ContainerName {
			return &p.Spec.Containers[i]
		}
	}
	return nil
}

// tailWriter passes writes on and keeps the last bytes, to tell whether the output ended
// with the contract's end marker.
type tailWriter struct {
	w    io.Writer
	mu   sync.Mutex
	tail []byte
}

const tailKeep = 2 * len(contract.EndMarker)

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.tail = append(t.tail, p[max(0, len(p)-tailKeep):]...)
	if len(t.tail) > tailKeep {
		t.tail = t.tail[len(t.tail)-tailKeep:]
	}
	t.mu.Unlock()
	return t.w.Write(p)
}

// endsWithMarker says whether the output's last line is the end marker.
func (t *tailWriter) endsWithMarker() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := bytes.TrimRight(t.tail, "\r\n \t")
	if !bytes.HasSuffix(s, []byte(contract.EndMarker)) {
		return false
	}
	before := s[:len(s)-len(contract.EndMarker)]
	return len(before) == 0 || before[len(before)-1] == '\n'
}
