package daemon_test

import (
	"bufio"
	"crypto/tls"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/noderelay"
)

// TestRelayListener: a daemon with [kubernetes] relay_listen serves the nodes' relay with
// the CA `kube node-cert` signs from the same data directory, asks the cluster where a
// slug's Pod is, and refuses (and logs) a connection without a certificate, or for a slug
// with no turn Pod on the node.
func TestRelayListener(t *testing.T) {
	k := enginetest.KubeCluster(t)
	daemontest.JournalOn(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	d := daemontest.New(t, daemontest.Config{Engine: daemontest.Podman4(t),
		TOML: "[kubernetes]\nrelay_listen = \"" + addr + "\"\n", Env: []string{"KUBECONFIG=" + k.Kubeconfig}})
	d.Start(t)
	certs := filepath.Join(d.Dir, "relay")
	if out, err := exec.Command(d.Bin, "kube", "node-cert", "--config", d.ConfigPath, "--node", k.Node, "--out", certs).CombinedOutput(); err != nil {
		t.Fatalf("kube node-cert: %v\n%s", err, out)
	}
	var pems [3][]byte
	for i, name := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if pems[i], err = os.ReadFile(filepath.Join(certs, name)); err != nil {
			t.Fatal(err)
		}
	}
	conf, err := noderelay.NodeTLS(pems[0], pems[1], pems[2])
	if err != nil {
		t.Fatal(err)
	}
	ask := func(conf *tls.Config, line string) (string, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write([]byte(line + "\n")); err != nil {
			return "", err
		}
		return bufio.NewReader(c).ReadString('\n')
	}
	slug := "nopod" + strconv.Itoa(int(time.Now().UnixNano()%1e6))
	got, err := ask(conf, `{"op":"connect","node":"`+k.Node+`","slug":"`+slug+`","socket":"model.sock"}`)
	if want := `{"error":"no turn Pod of ` + slug + ` on node ` + k.Node + `"}` + "\n"; err != nil || got != want {
		t.Errorf("a slug with no Pod: %q, %v; want %q", got, err, want)
	}
	noCert := conf.Clone()
	noCert.Certificates = nil
	if got, err := ask(noCert, `{"op":"connect","node":"`+k.Node+`","slug":"`+slug+`","socket":"model.sock"}`); err == nil {
		t.Errorf("without a certificate: %q", got)
	}
	// Each refusal is in the journal with its reason.
	pid := "_PID=" + strconv.Itoa(d.Pid())
	daemontest.WaitJournal(t, 10*time.Second, func(es []daemontest.Entry) bool {
		var noPod, noCert bool
		for _, e := range es {
			if e["MESSAGE"] == "relay connection refused" {
				noPod = noPod || e["REASON"] == "no turn Pod of "+slug+" on node "+k.Node && e["SLUG"] == slug
				noCert = noCert || strings.HasPrefix(e["REASON"], "TLS handshake")
			}
		}
		return noPod && noCert
	}, pid)
}
