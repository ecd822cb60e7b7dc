package daemon_test

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arizuko/arizukod/internal/daemontest"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/internal/fakemodel"
)

// authLog keeps every Authorization header a test server got.
type authLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *authLog) add(v string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, v)
}

func (l *authLog) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.seen, "\n")
}

// tokenServer is a loopback HTTPS server with its own test CA (written to caFile, which
// the daemon trusts by SSL_CERT_FILE) that answers 200 only to "Authorization: Bearer
// secret" (or Basic with secret as the password), and 401 otherwise.
func tokenServer(t *testing.T, secret string, next http.Handler) (*httptest.Server, *authLog, string) {
	t.Helper()
	log := &authLog{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r.Header.Get("Authorization"))
		_, pass, basic := r.BasicAuth()
		if r.Header.Get("Authorization") != "Bearer "+secret && !(basic && pass == secret) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		if next != nil {
			next.ServeHTTP(w, r)
			return
		}
		fmt.Fprint(w, "token ok")
	}))
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "test-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv, log, caFile
}

// secretNowhere fails when secret is in any file of the daemon's directory (its data
// directory with the store and the groups' logs, its stderr) but the env file the operator
// gave it, or in its journal.
func secretNowhere(t *testing.T, d *daemontest.Daemon, secret string) {
	t.Helper()
	for _, root := range []string{d.Dir, d.DataDir} {
		filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() || p == filepath.Join(d.Dir, "env") {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(secret)) {
				t.Errorf("the secret is in %s", p)
			}
			return nil
		})
	}
	es, err := daemontest.Journal("_PID=" + strconv.Itoa(d.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		for k, v := range e {
			if strings.Contains(v, secret) {
				t.Errorf("the secret is in the journal: %s of %q", k, e["MESSAGE"])
			}
		}
	}
}

// TestEgressCredentials runs turns of the example agent, with network none, that reach a
// loopback HTTPS server only through the egress proxy: the group's container holds a
// placeholder of GH_TOKEN, the proxy sends the real token to the bound host only (which
// checks it), refuses the placeholder sent anywhere else, and a group without the
// binding cannot use it. The token is in no container file or variable, no file of the
// daemon, and not in its journal.
func TestEgressCredentials(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) { testEgressCredentials(t, e) })
	}
}

func testEgressCredentials(t *testing.T, e enginetest.Engine) {
	daemontest.JournalOn(t)
	secret := "ghp_" + daemontest.RandHex(16)
	bound, boundLog, caFile := tokenServer(t, secret, nil)
	boundAddr := strings.TrimPrefix(bound.URL, "https://")
	var plainLog authLog
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainLog.add(r.Header.Get("Authorization"))
	}))
	defer plain.Close()
	plainAddr := strings.TrimPrefix(plain.URL, "http://")

	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "github"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The daemon verifies the bound host against the test's CA, by SSL_CERT_FILE.
	d := daemontest.New(t, daemontest.Config{Engine: e, Env: []string{"SSL_CERT_FILE=" + caFile},
		TOML: fmt.Sprintf("[model]\ncredentials_dir = %q\n", creds)})
	d.Start(t)
	d.PutGroup(t, "main", fmt.Sprintf(`{"egress": [%q, %q], "credentials": [{"env": "GH_TOKEN", "credential": "github", "hosts": [%q], "send": "bearer"}]}`,
		boundAddr, plainAddr, boundAddr))
	d.PutGroup(t, "other", fmt.Sprintf(`{"egress": [%q]}`, boundAddr))

	// The bound host gets the real token in place of the placeholder.
	if a := agentAnswer(t, d.Turn(t, "main", "fetch-auth GH_TOKEN "+bound.URL+"/user")); a["status"] != float64(200) || a["body"] != "token ok" {
		t.Errorf("the bound host: %v", a)
	}
	if got := boundLog.all(); got != "Bearer "+secret {
		t.Errorf("the bound host saw %q", got)
	}
	// The container has a placeholder, and the token nowhere: no variable, no file.
	if a := agentAnswer(t, d.Turn(t, "main", "scan arizuko-placeholder-")); fmt.Sprint(a["hits"]) != "[env:GH_TOKEN]" {
		t.Errorf("the placeholder in the container: %v", a["hits"])
	}
	if a := agentAnswer(t, d.Turn(t, "main", "scan "+secret)); a["hits"] != nil {
		t.Errorf("the token is inside the container: %v", a["hits"])
	}
	// The CA's certificate is there, read-only; its key is not, and stays the daemon's.
	if a := agentAnswer(t, d.Turn(t, "main", "scan BEGIN CERTIFICATE")); fmt.Sprint(a["hits"]) != "[/etc/arizuko/egress-ca.pem]" {
		t.Errorf("certificates in the container: %v", a["hits"])
	}
	if a := agentAnswer(t, d.Turn(t, "main", "scan PRIVATE KEY")); a["hits"] != nil {
		t.Errorf("a private key is inside the container: %v", a["hits"])
	}
	if fi, err := os.Stat(filepath.Join(d.DataDir, "egress-ca.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the CA key file: %v", err)
	}
	// The placeholder sent to another host is refused, and logged; that host sees nothing.
	if a := agentAnswer(t, d.Turn(t, "main", "fetch-auth GH_TOKEN "+plain.URL+"/steal")); a["status"] != float64(403) || !strings.Contains(fmt.Sprint(a["body"]), "placeholder of GH_TOKEN") {
		t.Errorf("the placeholder to another host: %v", a)
	}
	if got := plainLog.all(); got != "" {
		t.Errorf("another host saw %q", got)
	}
	daemontest.WaitJournal(t, 5*time.Second, daemontest.HasMessage("egress refused a credential placeholder sent to a host it is not bound to"), "_PID="+strconv.Itoa(d.Pid()))
	// A group without the binding has the host as a plain tunnel: its agent's TLS is to
	// the host itself, and its request carries no token.
	n := len(boundLog.all())
	if a := agentAnswer(t, d.Turn(t, "other", "fetch-auth GH_TOKEN "+bound.URL+"/user")); a["status"] == float64(200) {
		t.Errorf("a group without the binding: %v", a)
	}
	if got := boundLog.all()[n:]; strings.Contains(got, secret) {
		t.Errorf("a turn without the binding sent the token: %q", got)
	}
	// A binding whose file is missing fails the turn, saying which.
	d.PutGroup(t, "missing", fmt.Sprintf(`{"egress": [%q], "credentials": [{"env": "GH_TOKEN", "credential": "nothere", "hosts": [%q], "send": "bearer"}]}`, boundAddr, boundAddr))
	r := d.Turn(t, "missing", "noop")
	t.Logf("a binding without its file: %s %s %q", r.State, r.Status, r.Error)
	if r.Status == "ok" || !strings.Contains(r.Error, "containerConfig.credentials (GH_TOKEN)") || !strings.Contains(r.Error, "nothere") {
		t.Errorf("a binding without its file: %s %s %q", r.State, r.Status, r.Error)
	}
	secretNowhere(t, d, secret)
}

// scanShell defines the shell function scan PATTERN, which counts the lines matching
// PATTERN where a secret could be in a container: every process's environment and command
// line, and the files (write the pattern so that it does not match itself).
const scanShell = "scan() { (cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; grep -rsh . /workspace /root /tmp /etc) 2>/dev/null | tr '\\0' '\\n' | grep -c \"$1\"; }; "

// gitServer serves the bare repositories under root by `git http-backend` (git's smart
// HTTP), and answers "token ok" to any other path.
func gitServer(t *testing.T) (http.Handler, string) {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		enginetest.Missing(t, "git: %v", err)
	}
	root := t.TempDir()
	work := filepath.Join(t.TempDir(), "work")
	for _, args := range [][]string{
		{"init", "-q", "--bare", filepath.Join(root, "repo.git")},
		{"init", "-q", work},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "hello from the bound host"},
		{"-C", work, "push", "-q", filepath.Join(root, "repo.git"), "HEAD:refs/heads/main"},
		{"-C", filepath.Join(root, "repo.git"), "symbolic-ref", "HEAD", "refs/heads/main"},
	} {
		if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/repo.git/", &cgi.Handler{Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "token ok") })
	return mux, root
}

// TestClaudeEgressCredentials runs Claude Code in the Claude image, whose Bash tool runs
// curl and `git clone` over HTTPS with the placeholder of GIT_TOKEN as the password, through
// the egress proxy, to a loopback git server that wants the real token: both get in, and
// the token is in no file of the daemon (the session's transcripts included) nor its
// journal.
func TestClaudeEgressCredentials(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) { testClaudeEgressCredentials(t, e) })
	}
}

func testClaudeEgressCredentials(t *testing.T, e enginetest.Engine) {
	daemontest.JournalOn(t)
	secret := "ghp_" + daemontest.RandHex(16)
	repo, _ := gitServer(t)
	srv, srvLog, caFile := tokenServer(t, secret, repo)
	addr := strings.TrimPrefix(srv.URL, "https://")
	command := fmt.Sprintf("export NO_PROXY= no_proxy=; curl -sS -u x-access-token:$GIT_TOKEN %s/api/user; echo; "+
		"git clone -q https://x-access-token:$GIT_TOKEN@%s/repo.git /tmp/repo && git -C /tmp/repo log --format=%%s; "+
		scanShell+"echo secret-lines=$(scan 'gh[p]_') placeholder-lines=$(scan 'GIT_TOKEN=arizuko-placeholde[r]-')", srv.URL, addr)
	fake := fakemodel.Start()
	defer fake.Close()
	fake.Reply = func(r fakemodel.Request) fakemodel.Reply {
		if res, ok := r.ToolResult(); ok {
			return fakemodel.Reply{Text: "tool said: " + res}
		}
		return fakemodel.Reply{ToolUse: &fakemodel.ToolUse{Name: "Bash",
			Input: map[string]any{"command": command, "description": "fetch with the token"}}}
	}
	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "git"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemontest.New(t, daemontest.Config{Engine: e, Claude: true, RunTimeout: "3m",
		EnvFile: "ANTHROPIC_API_KEY=sk-ant-test-" + daemontest.RandHex(16) + "\n",
		Env:     []string{"SSL_CERT_FILE=" + caFile},
		TOML:    fmt.Sprintf("[model]\nupstream = %q\ncredentials_dir = %q\n", fake.URL, creds)})
	d.Start(t)
	d.PutGroup(t, "main", fmt.Sprintf(`{"egress": [%q], "credentials": [{"env": "GIT_TOKEN", "credential": "git", "hosts": [%q], "send": "basic"}]}`, addr, addr))
	start := time.Now()
	r := d.Turn(t, "main", "clone it")
	t.Logf("%s: curl and git clone through the proxy in a Claude Code turn of %s: %q", e.Name, time.Since(start).Round(time.Millisecond), r.Result)
	if r.Status != "ok" || !strings.Contains(r.Result, "token ok") || !strings.Contains(r.Result, "hello from the bound host") || !strings.Contains(r.Result, "secret-lines=0 ") || strings.Contains(r.Result, "placeholder-lines=0") {
		t.Errorf("curl and git clone through the proxy: %s %q %q", r.Status, r.Result, r.Error)
	}
	if got := srvLog.all(); !strings.Contains(got, "Basic ") || strings.Contains(got, "arizuko-placeholder-") {
		t.Errorf("the git server saw:\n%s", got)
	}
	secretNowhere(t, d, secret)
}
