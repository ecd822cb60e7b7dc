package daemon

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"github.com/arizuko/arizukod/noderelay"
)

// startRelay listens on [kubernetes] relay_listen for the nodes' relayed connections
// (noderelay) until ctx ends; off when it is empty. The CA is made once in the data
// directory; the Pods are asked of the cluster of [kubernetes] (its kubeconfig, else the
// in-cluster service account) in its namespace.
func (d *Daemon) startRelay(ctx context.Context) error {
	addr := d.cfg.Kubernetes.RelayListen
	if addr == "" {
		return nil
	}
	ca, err := noderelay.OpenCA(d.layout, d.cfg.Instance)
	if err != nil {
		return fmt.Errorf("kubernetes.relay_listen: %w", err)
	}
	conf, err := noderelay.ServerTLS(ca)
	if err != nil {
		return fmt.Errorf("kubernetes.relay_listen: %w", err)
	}
	cs, err := noderelay.Client(d.cfg.Kubernetes.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubernetes.relay_listen: %w", err)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("kubernetes.relay_listen: %w", err)
	}
	s := &noderelay.Server{IPCRoot: filepath.Join(d.cfg.DataDir, "ipc"), TLS: conf,
		Pods: noderelay.NewKubePods(ctx, cs, d.cfg.Kubernetes.Namespace), Log: d.log.With("relay", ln.Addr().String())}
	go func() {
		if err := s.Serve(ctx, ln); err != nil {
			d.log.Error("relay listener stopped", "err", err)
		}
	}()
	d.log.Info("relay listening for the Kubernetes nodes", "addr", ln.Addr().String())
	return nil
}
