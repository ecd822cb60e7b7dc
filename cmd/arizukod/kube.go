package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arizuko/arizukod/config"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/atomicfile"
	"github.com/arizuko/arizukod/noderelay"
)

// cmdKube is `arizukod kube`: what the central gives a Kubernetes cluster's nodes.
func cmdKube(ctx context.Context, args []string) error {
	usage := func() {
		fmt.Fprintln(os.Stderr, "usage: arizukod kube node-cert --node NAME [--config FILE] [--namespace NS] [--secret NAME] [--out DIR]\n\n"+
			"  node-cert  a node's certificate and key for the relay (signed by the central's relay CA), as a Secret manifest or files")
	}
	switch {
	case len(args) == 0:
		usage()
		return errUsage
	case args[0] == "-h" || args[0] == "--help":
		usage()
		return nil
	case args[0] == "node-cert":
		return cmdKubeNodeCert(ctx, args[1:])
	}
	fmt.Fprintf(os.Stderr, "arizukod kube: unknown subcommand %q\n", args[0])
	usage()
	return errUsage
}

// cmdKubeNodeCert writes what a node needs to reach the central's relay: the relay CA's
// certificate, and a client certificate and key for the node. The CA (made once in the
// data directory) never leaves it.
func cmdKubeNodeCert(_ context.Context, args []string) error {
	fs := newFlags("kube node-cert", "--node NAME [--config FILE] [--namespace NS] [--secret NAME] [--out DIR]")
	configPath := fs.String("config", "", "the central daemon's configuration, whose data_dir holds the relay CA (default: as arizukod serve)")
	node := fs.String("node", "", `the node's name (spec.nodeName), or "*" for one certificate every node of the DaemonSet shares (required)`)
	namespace := fs.String("namespace", "arizuko", "the Secret's namespace")
	secret := fs.String("secret", "arizuko-node-relay", "the Secret's name, as the DaemonSet mounts it")
	out := fs.String("out", "", "write ca.crt, tls.crt and tls.key (0600) into this directory instead of a Secret manifest on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *node == "" {
		fmt.Fprintln(fs.Output(), `arizukod kube node-cert: give --node, a node's name (kubectl get nodes) or "*" for every node`)
		fs.Usage()
		return errUsage
	}
	cfg, err := config.Load(serviceMode(), *configPath, os.Getenv)
	if err != nil {
		return err
	}
	layout, err := groupfolder.NewLayout(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	ca, err := noderelay.OpenCA(layout, cfg.Instance)
	if err != nil {
		return err
	}
	nc, err := noderelay.IssueNode(ca, *node)
	if err != nil {
		return fmt.Errorf("--node: %w", err)
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o700); err != nil {
			return err
		}
		for _, f := range []struct {
			name string
			data []byte
			mode os.FileMode
		}{{"ca.crt", nc.CA, 0o644}, {"tls.crt", nc.Cert, 0o644}, {"tls.key", nc.Key, 0o600}} {
			if err := atomicfile.Write(filepath.Join(*out, f.name), f.data, f.mode); err != nil {
				return err
			}
		}
		fmt.Fprintf(os.Stderr, "wrote ca.crt, tls.crt and tls.key for node %s into %s\n", *node, *out)
		return nil
	}
	return indentedJSON(os.Stdout).Encode(noderelay.Secret(nc, *namespace, *secret))
}
