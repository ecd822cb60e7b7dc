package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/term"

	"github.com/arizuko/arizukod/logging"
	"github.com/arizuko/arizukod/noderelay"
)

// cmdNode is `arizukod node`, run on every Kubernetes node (a DaemonSet): it serves the
// sockets of the node's turn Pods in their hostPath IPC directories and relays each
// connection to the central arizukod (noderelay).
func cmdNode(ctx context.Context, args []string) error {
	fs := newFlags("node", "--central HOST:PORT --ipc-dir DIR --cert-dir DIR [--node NAME] [--namespace NS] [--kubeconfig FILE]")
	central := fs.String("central", "", "the central arizukod's relay address ([kubernetes] relay_listen), host:port (required)")
	ipcDir := fs.String("ipc-dir", "", "the node's IPC directory, [kubernetes] node_ipc_dir of the central (required)")
	certDir := fs.String("cert-dir", "", "where `arizukod kube node-cert` put ca.crt, tls.crt and tls.key: the Secret's mount (required)")
	node := fs.String("node", os.Getenv("NODE_NAME"), "this node's name, as Pods' spec.nodeName says it (default $NODE_NAME)")
	namespace := fs.String("namespace", "arizuko", "the namespace of the turn Pods")
	kubeconfig := fs.String("kubeconfig", "", "a kubeconfig (default: the in-cluster service account, else $KUBECONFIG)")
	debug := fs.Bool("debug", false, "log debug messages")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"central", *central}, {"ipc-dir", *ipcDir}, {"cert-dir", *certDir}, {"node", *node}} {
		if f.v == "" {
			fmt.Fprintf(fs.Output(), "arizukod node: give --%s (the DaemonSet of contrib/kubernetes/ sets them all)\n", f.name)
			fs.Usage()
			return errUsage
		}
	}
	if !filepath.IsAbs(*ipcDir) {
		return fmt.Errorf("--ipc-dir %q: an absolute path, the hostPath the turn Pods mount", *ipcDir)
	}
	var pems [3][]byte
	for i, name := range []string{"ca.crt", "tls.crt", "tls.key"} {
		b, err := os.ReadFile(filepath.Join(*certDir, name))
		if err != nil {
			return fmt.Errorf("--cert-dir: %w (make it with `arizukod kube node-cert`)", err)
		}
		pems[i] = b
	}
	conf, err := noderelay.NodeTLS(pems[0], pems[1], pems[2])
	if err != nil {
		return fmt.Errorf("--cert-dir %s: %w", *certDir, err)
	}
	cs, err := noderelay.Client(*kubeconfig)
	if err != nil {
		return err
	}
	opts := logging.Options{Identifier: "arizukod-node", Stderr: os.Stderr, Terminal: term.IsTerminal(int(os.Stderr.Fd()))}
	if *debug {
		opts.Level = levelDebug
	}
	log := logging.New(opts)
	n := &noderelay.Node{Name: *node, Dir: *ipcDir, Central: *central, TLS: conf, Log: log}
	turns := make(chan []noderelay.Turn, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- noderelay.WatchNode(ctx, cs, *namespace, *node, turns)
		cancel()
	}()
	log.Info("arizukod node serving", "node", *node, "ipc_dir", *ipcDir, "central", *central, "namespace", *namespace)
	runErr := n.Run(ctx, turns)
	cancel()
	return errors.Join(runErr, <-watchErr)
}
