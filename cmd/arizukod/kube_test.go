package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestKubeNodeCert: kube node-cert gives a node a client certificate of the relay CA it
// makes once in the data directory, as a Secret or as files, and never the CA's key; its
// mistakes and node's say what to do.
func TestKubeNodeCert(t *testing.T) {
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "arizukod.toml")
	if err := os.WriteFile(cfg, []byte("data_dir = \""+data+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"kube"}, 2, "usage: arizukod kube node-cert"},
		{[]string{"kube", "certs"}, 2, `unknown subcommand "certs"`},
		{[]string{"kube", "node-cert", "--config", cfg}, 2, "give --node"},
		{[]string{"kube", "node-cert", "--config", cfg, "--node", "Node_1"}, 1, "--node: node name \"Node_1\""},
		{[]string{"node"}, 2, "give --central"},
		{[]string{"node", "--central", "c:1", "--ipc-dir", "rel", "--cert-dir", "d", "--node", "n"}, 1, "an absolute path"},
		{[]string{"node", "--central", "c:1", "--ipc-dir", "/x", "--cert-dir", t.TempDir(), "--node", "n"}, 1, "make it with `arizukod kube node-cert`"},
	} {
		_, stderr, code := runCLI(t, c.args)
		if code != c.code || !strings.Contains(stderr, c.says) {
			t.Errorf("arizukod %s: exit %d, %q; want exit %d saying %q", strings.Join(c.args, " "), code, stderr, c.code, c.says)
		}
	}

	stdout, stderr, code := runCLI(t, []string{"kube", "node-cert", "--config", cfg, "--node", "node-1"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var s corev1.Secret
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("not a Secret: %v\n%s", err, stdout)
	}
	if s.Kind != "Secret" || s.Namespace != "arizuko" || s.Name != "arizuko-node-relay" || s.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret %s %s/%s %s", s.Kind, s.Namespace, s.Name, s.Type)
	}
	caKey, err := os.ReadFile(filepath.Join(data, "relay-ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(data, "relay-ca.key")); fi.Mode().Perm() != 0o600 {
		t.Errorf("relay-ca.key mode %v", fi.Mode().Perm())
	}
	kb, _ := pem.Decode(caKey)
	for name, v := range s.Data {
		if strings.Contains(string(v), string(pem.EncodeToMemory(kb))) {
			t.Errorf("the CA's key is in the Secret's %s", name)
		}
	}
	pair, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.Data["ca.crt"])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || leaf.Subject.CommonName != "arizukod node node-1" {
		t.Errorf("certificate %q: %v", leaf.Subject.CommonName, err)
	}

	// Files instead, from the same CA.
	out := filepath.Join(t.TempDir(), "relay")
	if _, stderr, code := runCLI(t, []string{"kube", "node-cert", "--config", cfg, "--node", "*", "--out", out}); code != 0 {
		t.Fatalf("--out: exit %d: %s", code, stderr)
	}
	ca, _ := os.ReadFile(filepath.Join(out, "ca.crt"))
	if string(ca) != string(s.Data["ca.crt"]) {
		t.Errorf("a second CA was made")
	}
	if fi, err := os.Stat(filepath.Join(out, "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key: %v %v", fi, err)
	}
}
