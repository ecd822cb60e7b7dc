package main

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/contract"
)

// TestRootlessEgressCredentials: on rootless Podman, served as the unprivileged user, a
// group's agent reaches a loopback HTTPS server with its own test CA only through the
// egress proxy, holding a placeholder that the proxy swaps for the token the server
// checks; the token is nowhere in the container.
func TestRootlessEgressCredentials(t *testing.T) {
	d := newRootlessDaemon(t, "http://127.0.0.1:1")
	secret := "ghp_rootless" + strconv.FormatInt(time.Now().UnixNano(), 36)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "token ok")
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	d.write("test-ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	creds := filepath.Join(d.base, "credentials")
	if err := os.Mkdir(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(creds, d.uid, d.gid)
	d.write("credentials/github", secret+"\n")
	d.env = []string{"SSL_CERT_FILE=" + filepath.Join(d.base, "test-ca.pem")}
	_, stop := d.serve(d.unlimited(d.conf + fmt.Sprintf("credentials_dir = %q\n", creds)))
	defer stop()
	var g apiwire.Group
	cc := fmt.Sprintf(`{"egress": [%q], "credentials": [{"env": "GH_TOKEN", "credential": "github", "hosts": [%q], "send": "bearer"}]}`, addr, addr)
	if err := d.c.Do(d.ctx, http.MethodPost, "/v1/groups", apiwire.PutGroupRequest{Folder: "cred", ContainerConfig: json.RawMessage(cc)}, &g); err != nil {
		t.Fatal(err)
	}
	turn := func(msg string) map[string]any {
		t.Helper()
		r, err := d.c.CreateRun(d.ctx, apiwire.CreateRunRequest{Folder: "cred", Messages: []contract.Message{{Content: msg}}})
		if err == nil {
			r, err = d.c.WaitRun(d.ctx, r.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
		var a map[string]any
		if json.Unmarshal([]byte(r.Result), &a) != nil {
			t.Fatalf("%s: %s %s %q %q", msg, r.State, r.Status, r.Result, r.Error)
		}
		return a
	}
	if a := turn("fetch-auth GH_TOKEN " + srv.URL + "/user"); a["status"] != float64(200) || a["body"] != "token ok" {
		t.Errorf("the bound host through the rootless daemon's proxy: %v", a)
	}
	if a := turn("scan " + secret); a["hits"] != nil {
		t.Errorf("the token is inside the container: %v", a["hits"])
	}
}
