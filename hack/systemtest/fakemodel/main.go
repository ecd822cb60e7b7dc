// Command fakemodel serves the scripted Messages API of internal/fakemodel on a loopback
// port, for hack/systemtest.sh: the daemon of the booted system reaches it as its model
// upstream, so that real turns report real usage (tokens) through the model gateway. It
// prints its base URL on stdout and serves until it is killed. It owns nothing of the
// daemon.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/arizuko/arizukod/internal/fakemodel"
)

func main() {
	s := fakemodel.Start()
	fmt.Println(s.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	s.Close()
}
