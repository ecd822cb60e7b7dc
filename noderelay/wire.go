// Package noderelay carries a turn's sockets from the node its Kubernetes Pod runs on to
// the central arizukod, where they are served. Unix sockets do not cross hosts: on every
// node `arizukod node` (Node, a DaemonSet) watches the Pods of its own node that carry the
// annotation io.arizuko.ipc (a group's IPC slug), serves the sockets the agent expects
// (contract.RouterSocket, ModelSocket, EgressSocket and the group's sidecars) in
// <node ipc dir>/<slug>/, which the Pod mounts at contract.IPCDir, mirrors the central's
// input/ (steering messages and the _close sentinel) into it, and relays every connection
// byte for byte over TLS 1.3 with client certificates to the central's relay listener
// (Server), which connects it to the real socket in DATA_DIR/ipc/<slug>/ once the
// Kubernetes API says that slug's Pod is on the node the connection comes from; a
// connection made while the central is away (restarting, or not serving the turn's sockets
// yet) waits for it up to Node.Retry, so a restart of the central is not seen by a turn. The relay's
// CA (OpenCA) lives in the central's data directory; a node gets a certificate and key
// signed by it (IssueNode), never the CA's key. The model key never leaves the central's
// model gateway: a node only pipes bytes.
//
// It owns the relay's wire, its certificates, the node's IPC directories and the listener;
// it must not touch the store, the engines, the queue or a turn: what a socket serves is
// the central's business, and which Pod runs a turn is the engine's.
package noderelay

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
)

// Annotation is the annotation of a turn Pod naming its group's IPC slug (the base name
// of DATA_DIR/ipc/<slug>): the node serves that slug's sockets for the Pod.
const Annotation = "io.arizuko.ipc"

// ServerName is the DNS name in the central's certificate, which nodes check whatever
// address they reach the central by.
const ServerName = "arizukod-relay"

// The operations a node asks for.
const (
	opConnect = "connect" // relay one connection to one socket
	opWatch   = "watch"   // stream the slug's sidecar sockets and input files
)

// maxHeader bounds the one JSON line a connection starts with, both ways.
const maxHeader = 4 << 10

// ErrRefused is wrapped by the error of a connection the central refused.
var ErrRefused = errors.New("relay refused")

// header is the first line a node sends.
type header struct {
	Op     string `json:"op"`
	Node   string `json:"node"`
	Slug   string `json:"slug"`
	Socket string `json:"socket,omitempty"`
}

// answer is the central's first line: empty Error is yes.
type answer struct {
	Error string `json:"error,omitempty"`
}

// writeLine writes v as one JSON line.
func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readLine reads one JSON line of at most max bytes into v.
func readLine(r *bufio.Reader, max int, v any) error {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > max {
			return fmt.Errorf("line longer than %d bytes", max)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(line)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// CheckSlug says whether slug names a group's IPC directory: a folder's
// groupfolder.ContainerSlug, so never a path.
func CheckSlug(slug string) error {
	f, err := groupfolder.ParseSlug(slug)
	if err != nil {
		return fmt.Errorf("slug %q: %w", slug, err)
	}
	if f.ContainerSlug() != slug {
		return fmt.Errorf("slug %q: not a folder's slug", slug)
	}
	return nil
}

// CheckSocket says whether name is a socket a turn has: router.sock, model.sock,
// egress.sock, or sidecars/<name>.sock with a sidecar's name. Nothing else of a wire ever reaches a path.
func CheckSocket(name string) error {
	switch name {
	case contract.RouterSocket, contract.ModelSocket, contract.EgressSocket:
		return nil
	}
	if rest, ok := strings.CutPrefix(name, contract.SidecarDir+"/"); ok {
		if base, ok := strings.CutSuffix(rest, ".sock"); ok && checkSidecar(base) == nil {
			return nil
		}
	}
	return fmt.Errorf("socket %q: not one of %s, %s, %s or %s/<name>.sock", name,
		contract.RouterSocket, contract.ModelSocket, contract.EgressSocket, contract.SidecarDir)
}

// checkSidecar checks a sidecar's name, the base of its socket, by the sidecars' own rule:
// [a-z0-9][a-z0-9_]*, at most 32 bytes (sidecar.MaxNameLen).
func checkSidecar(name string) error {
	if name == "" || len(name) > 32 {
		return fmt.Errorf("sidecar name %q: 1 to 32 bytes", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && c == '_') {
			return fmt.Errorf("sidecar name %q: names are [a-z0-9][a-z0-9_]*", name)
		}
	}
	return nil
}

// checkInputName says whether name can be a file of the input directory the node mirrors:
// one component, not hidden.
func checkInputName(name string) error {
	if name == "" || len(name) > 128 || strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") {
		return fmt.Errorf("input file %q: not a plain name", name)
	}
	return nil
}

// pipe copies a to b and br (what b reads, buffered) to a until both directions end,
// passing each end on as a half-close, then closes both.
func pipe(a, b net.Conn, br io.Reader) {
	done := make(chan struct{}, 2)
	half := func(dst net.Conn, src io.Reader) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go half(b, a)
	go half(a, br)
	<-done
	<-done
	a.Close()
	b.Close()
}
