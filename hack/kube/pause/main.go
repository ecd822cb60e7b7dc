// Command pause is the sandbox ("pause") container of the test host's Kubernetes node: it
// holds a Pod's namespaces open, reaps the children a shared PID namespace hands it, and
// exits on SIGINT or SIGTERM. The node has no registry, so hack/kube/up.sh builds it FROM
// scratch with the test host's Podman and imports it into the node's containerd. It owns
// nothing of arizukod and imports nothing of the module.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited, so none stays a zombie.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
