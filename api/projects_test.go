package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/api/apiwire"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/project"
	"github.com/arizuko/arizukod/store"
)

// projectsManager serves the API's projects with a real manager.
type projectsManager struct{ m *project.Manager }

func (p projectsManager) SetProject(ctx context.Context, folder, path string) (project.Info, error) {
	return p.m.Set(ctx, folder, path)
}

func (p projectsManager) ClearProject(ctx context.Context, folder string, discard bool) (project.Info, error) {
	return p.m.Clear(ctx, folder, discard)
}

func (p projectsManager) GetProject(ctx context.Context, folder string) (project.Info, error) {
	return p.m.Get(ctx, folder)
}

// TestProjectAPI: PUT, GET and DELETE /v1/groups/{folder}/project with a real manager,
// store, allowlist and git repository: each mistake is a 4xx naming the field, or a 409
// for a state of the repository, and changes nothing.
func TestProjectAPI(t *testing.T) {
	srv, st := messagesServer(t)
	base, _ := filepath.EvalSymlinks(t.TempDir())
	repo := filepath.Join(base, "code", "app")
	os.MkdirAll(repo, 0o755)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "first"}, {"branch", "arizuko/taken"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=op", "GIT_AUTHOR_EMAIL=op@x", "GIT_COMMITTER_NAME=op", "GIT_COMMITTER_EMAIL=op@x")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	allow, err := mountsec.ParseAllowlist([]byte(fmt.Sprintf(`{"allowedRoots":[{"path":%q}]}`, filepath.Join(base, "code"))), "allowlist",
		mountsec.Options{Home: base, Protected: []string{filepath.Join(base, "data")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpsertGroup(context.Background(), store.Group{Folder: "taken"}); err != nil {
		t.Fatal(err)
	}
	path := "/v1/groups/main/project"
	if code, body := serve(t, srv, http.MethodGet, path, ""); code != http.StatusNotFound {
		t.Errorf("without projects on the server: %d %s", code, body)
	}
	srv.Projects = projectsManager{&project.Manager{Dir: filepath.Join(base, "data", "projects"), Store: st, Allowlist: allow, Logger: slog.New(slog.DiscardHandler)}}
	for _, c := range []struct {
		name, method, path, body string
		code                     int
		field, says              string
	}{
		{"no path", http.MethodPut, path, `{}`, 400, "path", "required"},
		{"unknown field", http.MethodPut, path, `{"path":"/x","branch":"b"}`, 400, "branch", ""},
		{"outside the allowlist", http.MethodPut, path, `{"path":"/etc"}`, 400, "path", "rejected by rule"},
		{"not a repository", http.MethodPut, path, fmt.Sprintf(`{"path":%q}`, filepath.Join(base, "code")), 400, "path", "not a git repository"},
		{"unknown group", http.MethodPut, "/v1/groups/nobody/project", fmt.Sprintf(`{"path":%q}`, repo), 404, "folder", "unknown group"},
		{"bad folder", http.MethodPut, "/v1/groups/Main/project", fmt.Sprintf(`{"path":%q}`, repo), 400, "folder", ""},
		{"a branch not the group's", http.MethodPut, "/v1/groups/taken/project", fmt.Sprintf(`{"path":%q}`, repo), 409, "", "is not the group's"},
		{"no project to show", http.MethodGet, path, "", 404, "folder", "has no project"},
		{"no project to clear", http.MethodDelete, path, "", 404, "folder", "has no project"},
		{"discard not a boolean", http.MethodDelete, path + "?discard=maybe", "", 400, "discard", ""},
	} {
		code, body := serve(t, srv, c.method, c.path, c.body)
		var e struct{ Error, Field string }
		json.Unmarshal([]byte(body), &e)
		if code != c.code || e.Field != c.field || !strings.Contains(e.Error, c.says) {
			t.Errorf("%s: %d %s, want %d naming %q saying %q", c.name, code, body, c.code, c.field, c.says)
		}
	}
	if _, err := os.Stat(filepath.Join(base, "data", "projects")); !os.IsNotExist(err) {
		t.Errorf("refused requests made the projects directory: %v", err)
	}
	code, body := serve(t, srv, http.MethodPut, path, fmt.Sprintf(`{"path":%q}`, repo))
	var info apiwire.Project
	if json.Unmarshal([]byte(body), &info); code != 200 || info.Branch != "arizuko/main" || !info.Created || info.Target != "/workspace/project" {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if code, body := serve(t, srv, http.MethodGet, path, ""); code != 200 || !strings.Contains(body, repo) {
		t.Errorf("GET: %d %s", code, body)
	}
	if code, body := serve(t, srv, http.MethodDelete, path, ""); code != 200 {
		t.Errorf("DELETE: %d %s", code, body)
	}
}
