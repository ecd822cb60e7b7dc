package turn_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/runtime/engine"
	"github.com/arizuko/arizukod/sidecar"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

func TestContainerConfigSidecars(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      string // a part of the error; empty: valid
		names     []string
	}{
		{"fields", `{"sidecars":[{"name":"echo","image":"localhost/echo:1","command":["-v"],"env":{"API_KEY":"k"},"memory":"64m","cpus":0.5,"network":"none"}]}`, "", []string{"echo"}},
		{"quadlet", `{"sidecars":[{"name":"weather","quadlet":"[Container]\nImage=localhost/weather\nNetwork=none\n"}]}`, "", []string{"weather"}},
		{"two", `{"memory":"512m","sidecars":[{"name":"a","image":"i"},{"name":"b","image":"i"}]}`, "", []string{"a", "b"}},
		{"unknown field", `{"sidecars":[{"name":"a","image":"i","privileged":true}]}`, `unknown field "privileged"`, nil},
		{"bad name", `{"sidecars":[{"name":"A-1","image":"i"}]}`, `sidecars[0]: bad sidecar config: name "A-1"`, nil},
		{"twice", `{"sidecars":[{"name":"a","image":"i"},{"name":"a","image":"i"}]}`, `sidecars[1]: bad sidecar config: name "a" is used twice`, nil},
		{"volume", `{"sidecars":[{"name":"a","quadlet":"[Container]\nImage=i\nVolume=/:/host\n"}]}`, "Volume is not allowed", nil},
		{"unsupported key", `{"sidecars":[{"name":"a","quadlet":"[Container]\nImage=i\nSecret=s\n"}]}`, "unsupported keys: Container.Secret", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := turn.ParseContainerConfig([]byte(tc.raw), nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, turn.ErrBadContainerConfig)):
				t.Fatalf("error %v, want ErrBadContainerConfig with %q", err, tc.want)
			}
			if got := sidecar.Names(c.Sidecars); tc.want == "" && strings.Join(got, ",") != strings.Join(tc.names, ",") {
				t.Fatalf("names %v, want %v", got, tc.names)
			}
		})
	}
}

// groupStore is a store with one group.
type groupStore struct{ g store.Group }

func (s groupStore) GetGroup(_ context.Context, folder string) (*store.Group, error) {
	if folder != s.g.Folder {
		return nil, store.ErrNotFound
	}
	return &s.g, nil
}
func (groupStore) GetSession(context.Context, string) (string, error)  { return "", nil }
func (groupStore) GetGrants(context.Context, string) ([]string, error) { return []string{"*"}, nil }

// TestBuildListsSidecars: the turn's settings.json has an mcpServers entry per sidecar.
func TestBuildListsSidecars(t *testing.T) {
	data := t.TempDir()
	layout, err := groupfolder.NewLayout(data)
	if err != nil {
		t.Fatal(err)
	}
	b := &turn.Builder{Layout: layout, Store: groupStore{store.Group{Folder: "main",
		ContainerConfig: []byte(`{"sidecars":[{"name":"echo","image":"localhost/echo:1"},{"name":"search","image":"localhost/search:1"}]}`)}}}
	if _, err := b.Build(context.Background(), turn.Request{RunID: "r1", Folder: "main", Messages: []contract.Message{{Role: "user", Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	settings, err := os.ReadFile(filepath.Join(data, "claude", "main", "home", ".claude", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"echo", "search"} {
		if !strings.Contains(string(settings), `"UNIX-CONNECT:`+sidecar.ContainerSocket(name)+`"`) {
			t.Errorf("settings.json has no entry for %s:\n%s", name, settings)
		}
	}
}

// TestBuildNetwork: whatever the store holds, a turn gets a network by the rule of
// engine.CheckNetwork with the builder's list, or the build fails naming the field.
func TestBuildNetwork(t *testing.T) {
	for _, tc := range []struct {
		stored, want string // want "" means refused
	}{
		{`{}`, "none"},
		{`{"network":"slirp"}`, "slirp4netns"},
		{`{"network":"agents"}`, "agents"},
		{`{"network":"host"}`, ""},
		{`{"network":"container:abc"}`, ""},
		{`{"network":"ns:/proc/1/ns/net"}`, ""},
		{`{"network":"lab"}`, ""},
	} {
		layout, err := groupfolder.NewLayout(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		b := &turn.Builder{Layout: layout, Networks: []string{"agents"}, Limits: engine.Limits{Network: "none"},
			Store: groupStore{store.Group{Folder: "main", ContainerConfig: []byte(tc.stored)}}}
		tn, err := b.Build(context.Background(), turn.Request{RunID: "r1", Folder: "main", Messages: []contract.Message{{Role: "user", Content: "hi"}}})
		var ce *turn.ConfigError
		switch {
		case tc.want != "" && (err != nil || tn.Limits.Network != tc.want):
			t.Errorf("%s: %q, %v; want network %q", tc.stored, tn.Limits.Network, err, tc.want)
		case tc.want == "" && (!errors.As(err, &ce) || ce.Field != "network"):
			t.Errorf("%s: %v (network %q); want a ConfigError of field network", tc.stored, err, tn.Limits.Network)
		}
	}
}

// TestBuildRuntime: a turn's runtime is its group's, else the daemon's limits.runtime; a
// stored runtime the operator no longer allows fails the build, naming the field.
func TestBuildRuntime(t *testing.T) {
	for _, tc := range []struct {
		stored, def string
		allowed     []string
		want        string // the turn's runtime; "-" refused
	}{
		{`{}`, "", nil, ""},
		{`{}`, "runsc", []string{"runsc"}, "runsc"},
		{`{"runtime":"runsc"}`, "", []string{"runsc"}, "runsc"},
		{`{"runtime":"runc"}`, "runsc", []string{"runc", "runsc"}, "runc"},
		{`{"runtime":"runsc"}`, "", []string{"runc"}, "-"},
	} {
		layout, err := groupfolder.NewLayout(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		b := &turn.Builder{Layout: layout, Runtimes: tc.allowed, Limits: engine.Limits{Network: "none", Runtime: tc.def},
			Store: groupStore{store.Group{Folder: "main", ContainerConfig: []byte(tc.stored)}}}
		tn, err := b.Build(context.Background(), turn.Request{RunID: "r1", Folder: "main", Messages: []contract.Message{{Role: "user", Content: "hi"}}})
		var ce *turn.ConfigError
		switch {
		case tc.want == "-" && (!errors.As(err, &ce) || ce.Field != "runtime"):
			t.Errorf("%s allowing %v: %v; want a ConfigError of field runtime", tc.stored, tc.allowed, err)
		case tc.want != "-" && (err != nil || tn.Limits.Runtime != tc.want):
			t.Errorf("%s default %q: %q, %v; want runtime %q", tc.stored, tc.def, tn.Limits.Runtime, err, tc.want)
		}
	}
}
