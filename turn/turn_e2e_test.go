package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/contract"
	"github.com/arizuko/arizukod/groupfolder"
	"github.com/arizuko/arizukod/internal/enginetest"
	"github.com/arizuko/arizukod/mountsec"
	"github.com/arizuko/arizukod/runtime/runner"
	"github.com/arizuko/arizukod/store"
	"github.com/arizuko/arizukod/turn"
)

// fixture is a data dir with a store, an allowlist over two roots and a group whose
// container config asks for additional mounts.
type fixture struct {
	dataDir string
	layout  groupfolder.Layout
	st      *store.Store
	builder *turn.Builder
	roRoot  string
	rwRoot  string
}

// newFixture makes the fixture; mounts builds the group's requests from the two roots.
func newFixture(t *testing.T, mounts func(roRoot, rwRoot string) []mountsec.MountRequest, folder string) *fixture {
	t.Helper()
	base := enginetest.DataDir(t)
	fx := &fixture{dataDir: filepath.Join(base, "data"), roRoot: filepath.Join(base, "docs"), rwRoot: filepath.Join(base, "projects")}
	for _, d := range []string{fx.dataDir, filepath.Join(fx.roRoot, "manual"), filepath.Join(fx.rwRoot, "webapp"), filepath.Join(base, "cfg")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(fx.roRoot, "manual", "README"), []byte("read me"), 0o644)
	allow := filepath.Join(base, "cfg", "mount-allowlist.json")
	body, _ := json.Marshal(map[string]any{
		"allowedRoots": []map[string]any{
			{"path": fx.roRoot, "allowReadWrite": false, "description": "docs"},
			{"path": fx.rwRoot, "allowReadWrite": true, "description": "projects"},
		},
		"nonMainReadOnly": true,
	})
	if err := os.WriteFile(allow, body, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := mountsec.LoadAllowlist(allow, mountsec.Options{Protected: []string{fx.dataDir}})
	if err != nil {
		t.Fatal(err)
	}
	if fx.layout, err = groupfolder.NewLayout(fx.dataDir); err != nil {
		t.Fatal(err)
	}
	if fx.st, err = store.Open(context.Background(), filepath.Join(fx.dataDir, "arizukod.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.st.Close() })
	var reqs []mountsec.MountRequest
	if mounts != nil {
		reqs = mounts(fx.roRoot, fx.rwRoot)
	}
	cc, _ := json.Marshal(turn.ContainerConfig{AdditionalMounts: reqs})
	f, _ := groupfolder.Parse(folder)
	for g := f; ; {
		parent, ok := g.Parent()
		rec := store.Group{Folder: string(g), Parent: string(parent)}
		if g == f {
			rec.ContainerConfig = cc
		}
		defer func(rec store.Group) {
			if _, err := fx.st.UpsertGroup(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
		}(rec)
		if !ok {
			break
		}
		g = parent
	}
	fx.builder = &turn.Builder{Layout: fx.layout, Store: fx.st, Allowlist: a}
	return fx
}

// rwFor asks for read-write, or leaves the mode to the default (read-only).
func rwFor(rw bool) *bool {
	if !rw {
		return nil
	}
	f := false
	return &f
}

// TestAdditionalMountsFromInside mounts the allowed requests for real and checks each one's
// mode from inside the container, on every rootful engine.
func TestAdditionalMountsFromInside(t *testing.T) {
	for _, e := range enginetest.Rootful(t) {
		t.Run(e.Name, func(t *testing.T) {
			eng, info := e.Open(t)
			image := enginetest.EnsureAgentImage(t, e, eng)
			cases := []struct {
				folder string
				wantRW bool // for the rw request under the rw root
			}{{"main", true}, {"main/research", false}}
			for _, c := range cases {
				t.Run(strings.ReplaceAll(c.folder, "/", "_"), func(t *testing.T) {
					fx := newFixture(t, func(ro, rw string) []mountsec.MountRequest {
						return []mountsec.MountRequest{
							{HostPath: filepath.Join(ro, "manual"), ContainerPath: "manual"},
							// A non-main group may not ask for read-write (nonMainReadOnly); it gets the default, read-only.
							{HostPath: filepath.Join(rw, "webapp"), ContainerPath: "webapp", ReadOnly: rwFor(c.wantRW)},
						}
					}, c.folder)
					f, _ := groupfolder.Parse(c.folder)
					tn, err := fx.builder.Build(context.Background(), turn.Request{RunID: "m", Folder: f, Messages: []contract.Message{{Content: "sandbox"}}})
					if err != nil {
						t.Fatalf("Build: %v", err)
					}
					r, err := runner.New(runner.Config{Engine: eng, Info: info, Layout: fx.layout, Image: image, Instance: "mounts-" + filepath.Base(fx.dataDir), Timeout: time.Minute, StopGrace: time.Second})
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					res, err := r.Run(context.Background(), tn)
					if err != nil || res.Output.Status != contract.StatusOK {
						t.Fatalf("run: %v %+v", err, res)
					}
					var s struct {
						Writable map[string]bool `json:"writable"`
						Mounts   []struct {
							Target string `json:"target"`
							Root   string `json:"root"`
							RO     bool   `json:"ro"`
						} `json:"mounts"`
					}
					if err := json.Unmarshal([]byte(res.Output.Result), &s); err != nil {
						t.Fatal(err)
					}
					want := map[string]bool{"/workspace/extra/manual": true, "/workspace/extra/webapp": !c.wantRW}
					for _, m := range s.Mounts {
						if wantRO, ok := want[m.Target]; ok {
							if m.RO != wantRO {
								t.Errorf("%s ro = %v, want %v", m.Target, m.RO, wantRO)
							}
							delete(want, m.Target)
						}
					}
					if len(want) > 0 {
						t.Errorf("mounts missing inside the container: %v", want)
					}
					if s.Writable["/workspace/extra/webapp"] != c.wantRW || s.Writable["/workspace/extra/manual"] {
						t.Errorf("writable: %v", s.Writable)
					}
				})
			}
		})
	}
}

// TestRejectedMountFailsClosed: a rejected mount fails the turn before any container, naming
// the mount and the rule.
func TestRejectedMountFailsClosed(t *testing.T) {
	fx := newFixture(t, func(string, string) []mountsec.MountRequest {
		return []mountsec.MountRequest{{HostPath: "/etc", ContainerPath: "etc"}}
	}, "main")
	_, err := fx.builder.Build(context.Background(), turn.Request{RunID: "x", Folder: "main", Messages: []contract.Message{{Content: "hi"}}})
	if !errors.Is(err, turn.ErrRejectedMount) || !strings.Contains(err.Error(), "/etc") {
		t.Fatalf("want a rejected-mount error naming /etc, got %v", err)
	}
}

// TestNoAllowlistRefusesMounts: without an allowlist every additional mount is refused.
func TestNoAllowlistRefusesMounts(t *testing.T) {
	fx := newFixture(t, func(_, rw string) []mountsec.MountRequest {
		return []mountsec.MountRequest{{HostPath: filepath.Join(rw, "webapp")}}
	}, "main")
	fx.builder.Allowlist = nil
	_, err := fx.builder.Build(context.Background(), turn.Request{RunID: "x", Folder: "main", Messages: []contract.Message{{Content: "hi"}}})
	if !errors.Is(err, turn.ErrRejectedMount) || !strings.Contains(err.Error(), "allowlist") {
		t.Fatalf("want a refusal that says there is no allowlist, got %v", err)
	}
}
