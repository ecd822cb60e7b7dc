package mountsec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateAttacks(t *testing.T) {
	fx := newFixture(t, true)
	long := "~/projects/" + strings.Repeat("a/", 2100) + "x"
	rw := boolp(false)
	for _, tc := range []struct {
		name string
		req  MountRequest
		root bool
		want Rule
	}{
		// Blocked names at any depth, in the requested path.
		{"ssh dir", MountRequest{HostPath: "~/.ssh"}, true, RuleBlocked},
		{"id_rsa leaf", MountRequest{HostPath: "~/.ssh/id_rsa"}, true, RuleBlocked},
		{"ssh in the middle", MountRequest{HostPath: "~/projects/.ssh/sub/deeper"}, true, RuleBlocked},
		{"case trick .SSH", MountRequest{HostPath: "~/projects/webapp/.SSH"}, true, RuleBlocked},
		{"case trick .Aws", MountRequest{HostPath: "~/.Aws"}, true, RuleBlocked},
		{"trailing dot .ssh.", MountRequest{HostPath: "~/projects/webapp/.ssh."}, true, RuleBlocked},
		{"dotenv", MountRequest{HostPath: "~/projects/webapp/.env"}, true, RuleBlocked},
		{"dotenv variant", MountRequest{HostPath: "~/projects/webapp/.env.production"}, true, RuleBlocked},
		{"git credentials", MountRequest{HostPath: "~/projects/.git-credentials"}, true, RuleBlocked},
		{"id_ed25519", MountRequest{HostPath: "~/projects/id_ed25519"}, true, RuleBlocked},
		{"pem key file", MountRequest{HostPath: "~/projects/key.pem"}, true, RuleBlocked},
		{"kube config", MountRequest{HostPath: "~/.kube/config"}, true, RuleBlocked},
		{"gcloud config run", MountRequest{HostPath: "~/.config/gcloud"}, true, RuleBlocked},
		{"gh tokens", MountRequest{HostPath: "~/.config/gh"}, true, RuleBlocked},
		{"podman auth", MountRequest{HostPath: "~/.config/containers/auth.json"}, true, RuleBlocked},
		{"arizuko user config", MountRequest{HostPath: "~/.config/pub/arizuko"}, true, RuleBlocked},
		{"allowlist pattern secret*", MountRequest{HostPath: "~/projects/secrets"}, true, RuleBlocked},
		{"allowlist pattern case", MountRequest{HostPath: "~/projects/SecretStuff"}, true, RuleBlocked},
		{"allowlist anchored pattern", MountRequest{HostPath: "~/work/vendor/x"}, true, RuleBlocked},
		{"parent of an allowlist anchored pattern", MountRequest{HostPath: "~/work"}, true, RuleContainsBlocked},
		{"allowlist relative run", MountRequest{HostPath: "~/projects/build/cache/x"}, true, RuleBlocked},
		{"etc shadow", MountRequest{HostPath: "/etc/shadow"}, true, RuleBlocked},
		{"proc", MountRequest{HostPath: "/proc/self/root"}, true, RuleBlocked},
		{"docker socket", MountRequest{HostPath: "/var/run/docker.sock"}, true, RuleBlocked},
		{"podman socket", MountRequest{HostPath: "/run/podman/podman.sock"}, true, RuleBlocked},
		{"engine storage", MountRequest{HostPath: "/var/lib/containers/storage"}, true, RuleBlocked},
		// Symlinks: judged by the real path.
		{"symlink into .ssh", MountRequest{HostPath: "~/projects/ssh-link"}, true, RuleBlocked},
		{"symlink to a key file", MountRequest{HostPath: "~/projects/ssh-key-link", ContainerPath: "k"}, true, RuleBlocked},
		{"hard-to-see chain to credentials", MountRequest{HostPath: "~/projects/chain1", ContainerPath: "c"}, true, RuleBlocked},
		{"symlink to /proc", MountRequest{HostPath: "~/projects/proc-link"}, true, RuleBlocked},
		{"symlink out of the root", MountRequest{HostPath: "~/projects/escape"}, true, RuleOutsideRoots},
		{"below a symlink out of the root", MountRequest{HostPath: "~/projects/escape/x"}, true, RuleOutsideRoots},
		{"symlinked root, link out", MountRequest{HostPath: "~/docs-link/out"}, true, RuleOutsideRoots},
		{"symlink to /etc", MountRequest{HostPath: "~/projects/etc-link"}, true, RuleContainsBlocked},
		{"symlink to data2", MountRequest{HostPath: "~/projects/data2-link"}, true, RuleOutsideRoots},
		{"symlink to protected data dir", MountRequest{HostPath: "~/projects/data-link"}, true, RuleProtected},
		{"ascii link to non-ascii dir", MountRequest{HostPath: "~/projects/cafe"}, true, RuleNonASCII},
		{"symlink loop", MountRequest{HostPath: "~/projects/loop1"}, true, RuleUnresolvable},
		{"dangling symlink", MountRequest{HostPath: "~/projects/dangling"}, true, RuleHostPathMissing},
		// Outside every root.
		{"prefix trick data2 vs data", MountRequest{HostPath: "$B/data2/x"}, true, RuleOutsideRoots},
		{"plain outside", MountRequest{HostPath: "$B/outside/x"}, true, RuleOutsideRoots},
		{"missing", MountRequest{HostPath: "~/projects/missing"}, true, RuleHostPathMissing},
		// Too broad.
		{"filesystem root", MountRequest{HostPath: "/", ContainerPath: "r"}, true, RuleContainsBlocked},
		{"whole home", MountRequest{HostPath: "~", ContainerPath: "h"}, true, RuleContainsBlocked},
		{"home's config dir", MountRequest{HostPath: "~/.config"}, true, RuleContainsBlocked},
		{"etc", MountRequest{HostPath: "/etc"}, true, RuleContainsBlocked},
		{"tmp with agent sockets", MountRequest{HostPath: "/tmp"}, true, RuleContainsBlocked},
		{"protected data dir", MountRequest{HostPath: "~/arizuko-data"}, true, RuleProtected},
		{"inside protected data dir", MountRequest{HostPath: "~/arizuko-data/groups"}, true, RuleProtected},
		// Form of the host path.
		{"empty host path", MountRequest{HostPath: ""}, true, RuleHostPathEmpty},
		{"relative host path", MountRequest{HostPath: "projects/webapp"}, true, RuleNotAbsolute},
		{"tilde of another user", MountRequest{HostPath: "~root/.bashrc"}, true, RuleTildeUser},
		{"dotdot in host path", MountRequest{HostPath: "~/projects/../.ssh"}, true, RuleDotDot},
		{"dotdot climbing out", MountRequest{HostPath: "~/projects/webapp/src/../../../../etc"}, true, RuleDotDot},
		{"dot in host path", MountRequest{HostPath: "~/projects/./webapp"}, true, RuleNonCanonical},
		{"trailing slash", MountRequest{HostPath: "~/projects/webapp/"}, true, RuleNonCanonical},
		{"double slash", MountRequest{HostPath: "~/projects//webapp"}, true, RuleNonCanonical},
		{"leading double slash", MountRequest{HostPath: "//etc/passwd"}, true, RuleNonCanonical},
		{"NUL in host path", MountRequest{HostPath: "~/projects/web\x00app"}, true, RuleNUL},
		{"newline in host path", MountRequest{HostPath: "~/projects/web\napp"}, true, RuleControlChar},
		{"colon breaks -v syntax", MountRequest{HostPath: "~/projects/webapp:/etc:rw"}, true, RuleUnsafeChar},
		{"comma breaks --mount syntax", MountRequest{HostPath: "~/projects/a,dst=/etc"}, true, RuleUnsafeChar},
		{"backslash", MountRequest{HostPath: "~/projects/a\\b"}, true, RuleUnsafeChar},
		{"cyrillic look-alike .ѕsh", MountRequest{HostPath: "~/projects/.ѕsh"}, true, RuleNonASCII},
		{"fullwidth look-alike", MountRequest{HostPath: "~/projects/ｗebapp"}, true, RuleNonASCII},
		{"combining accent (NFD)", MountRequest{HostPath: "~/projects/cafe\u0301"}, true, RuleNonASCII},
		{"PATH_MAX exceeded", MountRequest{HostPath: long}, true, RuleTooLong},
		{"NAME_MAX exceeded", MountRequest{HostPath: "~/projects/" + strings.Repeat("n", 256)}, true, RuleTooLong},
		// File types.
		{"unix socket", MountRequest{HostPath: "~/projects/sock"}, true, RuleFileType},
		{"fifo", MountRequest{HostPath: "~/projects/fifo"}, true, RuleFileType},
		{"hard-linked file", MountRequest{HostPath: "~/projects/hardlink.txt", ContainerPath: "h"}, true, RuleHardLink},
		// Container path.
		{"absolute container path", MountRequest{HostPath: "~/projects/webapp", ContainerPath: "/etc"}, true, RuleContainerAbsolute},
		{"container path escaping extra", MountRequest{HostPath: "~/projects/webapp", ContainerPath: "../../root"}, true, RuleContainerDotDot},
		{"container path dotdot in the middle", MountRequest{HostPath: "~/projects/webapp", ContainerPath: "a/../../x"}, true, RuleContainerDotDot},
		{"container path empty component", MountRequest{HostPath: "~/projects/webapp", ContainerPath: "a//b"}, true, RuleContainerNonCanonical},
		{"container path dot", MountRequest{HostPath: "~/projects/webapp", ContainerPath: "./a"}, true, RuleContainerNonCanonical},
		{"container path trailing slash", MountRequest{HostPath: "~/projects/webapp", ContainerPath: "a/"}, true, RuleContainerNonCanonical},
		{"container path with space", MountRequest{HostPath: "~/projects/webapp", ContainerPath: "a b"}, true, RuleContainerCharset},
		{"container path hidden", MountRequest{HostPath: "~/projects/webapp", ContainerPath: ".bashrc"}, true, RuleContainerCharset},
		{"container path tilde", MountRequest{HostPath: "~/projects/webapp", ContainerPath: "~"}, true, RuleContainerCharset},
		{"container path NUL", MountRequest{HostPath: "~/projects/webapp", ContainerPath: "a\x00b"}, true, RuleNUL},
		{"container path too long", MountRequest{HostPath: "~/projects/webapp", ContainerPath: strings.Repeat("a", 256)}, true, RuleContainerTooLong},
		{"container path too deep", MountRequest{HostPath: "~/projects/webapp", ContainerPath: "a/b/c/d/e/f/g/h/i"}, true, RuleContainerTooLong},
		{"default name with a space", MountRequest{HostPath: "~/projects/My Dir"}, true, RuleContainerCharset},
		// Read-write.
		{"non-main group asks read-write", MountRequest{HostPath: "~/projects/webapp", ReadOnly: rw}, false, RuleNonMainReadOnly},
		{"root disallows read-write", MountRequest{HostPath: "$B/data/d", ReadOnly: rw}, true, RuleRootReadOnly},
		{"root disallows read-write, non-main", MountRequest{HostPath: "$B/data/d", ReadOnly: rw}, false, RuleRootReadOnly},
		{"home root is read-only", MountRequest{HostPath: "~/other", ReadOnly: rw}, true, RuleRootReadOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.HostPath = fx.path(req.HostPath)
			m, err := fx.a.Validate(req, tc.root)
			if err == nil {
				t.Fatalf("accepted: %+v", m)
			}
			if !errors.Is(err, ErrMountRejected) {
				t.Fatalf("error %v does not wrap ErrMountRejected", err)
			}
			if got := RuleOf(err); got != tc.want {
				t.Fatalf("rule %s, want %s: %v", got, tc.want, err)
			}
			if !strings.Contains(err.Error(), "rule "+string(tc.want)) {
				t.Errorf("message does not name the rule: %v", err)
			}
			if m != (Mount{}) {
				t.Errorf("rejected request returned a mount: %+v", m)
			}
		})
	}
}

func TestValidateAllowed(t *testing.T) {
	fx := newFixture(t, true)
	rw, ro := boolp(false), boolp(true)
	proj := filepath.Join(fx.home, "projects")
	for _, tc := range []struct {
		name string
		req  MountRequest
		root bool
		want Mount
	}{
		{"default read-only, default name", MountRequest{HostPath: "~/projects/webapp"}, false,
			Mount{Name: "webapp", HostPath: proj + "/webapp", ContainerPath: "/workspace/extra/webapp", ReadOnly: true, Root: "~/projects"}},
		{"read-write for the root group", MountRequest{HostPath: "~/projects/webapp", ContainerPath: "web", ReadOnly: rw}, true,
			Mount{Name: "web", HostPath: proj + "/webapp", ContainerPath: "/workspace/extra/web", ReadOnly: false, Root: "~/projects"}},
		{"explicit read-only for a non-main group", MountRequest{HostPath: "~/projects/webapp", ContainerPath: "apps/web-1.0", ReadOnly: ro}, false,
			Mount{Name: "apps/web-1.0", HostPath: proj + "/webapp", ContainerPath: "/workspace/extra/apps/web-1.0", ReadOnly: true, Root: "~/projects"}},
		{"the root itself", MountRequest{HostPath: "~/projects"}, true,
			Mount{Name: "projects", HostPath: proj, ContainerPath: "/workspace/extra/projects", ReadOnly: true, Root: "~/projects"}},
		{"a regular file", MountRequest{HostPath: "~/projects/notes.txt"}, true,
			Mount{Name: "notes.txt", HostPath: proj + "/notes.txt", ContainerPath: "/workspace/extra/notes.txt", ReadOnly: true, Root: "~/projects"}},
		{"a symlink inside the root is mounted by its real path", MountRequest{HostPath: "~/projects/inner-link", ContainerPath: "src"}, true,
			Mount{Name: "src", HostPath: proj + "/webapp/src", ContainerPath: "/workspace/extra/src", ReadOnly: true, Root: "~/projects"}},
		{"a symlinked root judged by its real path", MountRequest{HostPath: "~/docs-link/a", ReadOnly: rw}, true,
			Mount{Name: "a", HostPath: fx.base + "/realdocs/a", ContainerPath: "/workspace/extra/a", ReadOnly: false, Root: "~/docs-link"}},
		{"the symlinked root's real path directly", MountRequest{HostPath: "$B/realdocs/a", ContainerPath: "docs"}, false,
			Mount{Name: "docs", HostPath: fx.base + "/realdocs/a", ContainerPath: "/workspace/extra/docs", ReadOnly: true, Root: "~/docs-link"}},
		{"absolute path under a read-only root", MountRequest{HostPath: "$B/data/d", ContainerPath: "datasets"}, false,
			Mount{Name: "datasets", HostPath: fx.base + "/data/d", ContainerPath: "/workspace/extra/datasets", ReadOnly: true, Root: fx.base + "/data"}},
		{"under the home root, not the data dir", MountRequest{HostPath: "~/arizuko-data2"}, false,
			Mount{Name: "arizuko-data2", HostPath: fx.home + "/arizuko-data2", ContainerPath: "/workspace/extra/arizuko-data2", ReadOnly: true, Root: "~"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.HostPath = fx.path(req.HostPath)
			tc.want.RequestedPath = req.HostPath
			m, err := fx.a.Validate(req, tc.root)
			if err != nil {
				t.Fatal(err)
			}
			if m != tc.want {
				t.Errorf("got  %+v\nwant %+v", m, tc.want)
			}
			if err := Recheck(m); err != nil {
				t.Errorf("Recheck: %v", err)
			}
		})
	}
}

func TestNonMainReadWriteWhenAllowed(t *testing.T) {
	fx := newFixture(t, false)
	m, err := fx.a.Validate(MountRequest{HostPath: "~/projects/webapp", ReadOnly: boolp(false)}, false)
	if err != nil || m.ReadOnly {
		t.Fatalf("non-main rw with nonMainReadOnly off: %+v, %v", m, err)
	}
	if _, err := fx.a.Validate(MountRequest{HostPath: fx.base + "/data/d", ReadOnly: boolp(false)}, false); RuleOf(err) != RuleRootReadOnly {
		t.Errorf("read-only root still wins: %v", err)
	}
}

func TestNoAllowlist(t *testing.T) {
	var a *Allowlist
	_, err := a.Validate(MountRequest{HostPath: "/srv/x"}, true)
	if RuleOf(err) != RuleNoAllowlist || !strings.Contains(err.Error(), "no additional mounts") {
		t.Errorf("nil allowlist: %v", err)
	}
	mounts, rejs := ValidateAll(nil, []MountRequest{{HostPath: "/a"}, {HostPath: "/b"}}, true)
	if len(mounts) != 0 || len(rejs) != 2 || rejs[1].Index != 1 || rejs[1].Err.Rule != RuleNoAllowlist {
		t.Errorf("ValidateAll(nil) = %v, %v", mounts, rejs)
	}
}

func TestValidateAll(t *testing.T) {
	fx := newFixture(t, true)
	reqs := []MountRequest{
		{HostPath: "~/projects/webapp", ContainerPath: "web"},
		{HostPath: "~/.ssh", ContainerPath: "keys"},
		{HostPath: "~/projects/notes.txt", ContainerPath: "web"},
		{HostPath: "~/docs-link/a", ContainerPath: "web/docs"},
		{HostPath: "$B/data/d", ContainerPath: "data"},
		{HostPath: "~/projects", ContainerPath: "Data"},
	}
	for i := range reqs {
		reqs[i].HostPath = fx.path(reqs[i].HostPath)
	}
	mounts, rejs := ValidateAll(fx.a, reqs, true)
	var names []string
	for _, m := range mounts {
		names = append(names, m.Name)
	}
	if strings.Join(names, ",") != "web,data,Data" {
		t.Errorf("accepted %q", names)
	}
	want := map[int]Rule{1: RuleBlocked, 2: RuleContainerConflict, 3: RuleContainerConflict}
	if len(rejs) != len(want) {
		t.Fatalf("rejections %+v", rejs)
	}
	for _, r := range rejs {
		if want[r.Index] != r.Err.Rule || r.Request != reqs[r.Index] {
			t.Errorf("rejection %d: %v", r.Index, r.Err)
		}
	}
}

func TestRecheckCatchesSwappedLink(t *testing.T) {
	fx := newFixture(t, true)
	swap := filepath.Join(fx.home, "projects/swap")
	m, err := fx.a.Validate(MountRequest{HostPath: "~/projects/swap/real", ContainerPath: "s"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := Recheck(m); err != nil {
		t.Fatalf("unchanged mount: %v", err)
	}
	// The directory is replaced by a link to a blocked location after validation.
	if err := os.Rename(filepath.Join(swap, "real"), filepath.Join(swap, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(fx.home, ".ssh"), filepath.Join(swap, "real")); err != nil {
		t.Fatal(err)
	}
	if err := Recheck(m); RuleOf(err) != RuleChanged || !strings.Contains(err.Error(), "now resolves to") {
		t.Errorf("swapped leaf: %v", err)
	}
	// A parent component is swapped instead.
	m2, err := fx.a.Validate(MountRequest{HostPath: "~/projects/swap/elsewhere", ContainerPath: "e"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(swap, swap+"-old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(swap+"-old", swap); err != nil {
		t.Fatal(err)
	}
	if err := Recheck(m2); RuleOf(err) != RuleChanged {
		t.Errorf("swapped parent: %v", err)
	}
	// Replaced by a fifo, and removed.
	if err := Recheck(Mount{HostPath: filepath.Join(fx.home, "projects/fifo")}); RuleOf(err) != RuleChanged {
		t.Errorf("fifo: %v", err)
	}
	if err := Recheck(Mount{HostPath: filepath.Join(fx.home, "projects/gone")}); RuleOf(err) != RuleChanged {
		t.Errorf("gone: %v", err)
	}
	if err := Recheck(Mount{HostPath: "relative"}); RuleOf(err) != RuleChanged {
		t.Errorf("relative: %v", err)
	}
}

func TestHomeUnknown(t *testing.T) {
	a, err := ParseAllowlist([]byte(`{"allowedRoots":[]}`), "x.json", Options{Home: "/nonexistent-home-for-test"})
	if err != nil {
		t.Fatal(err)
	}
	a.home = ""
	if _, err := a.Validate(MountRequest{HostPath: "~/x"}, true); RuleOf(err) != RuleHomeUnknown {
		t.Errorf("got %v", err)
	}
	if _, err := a.Validate(MountRequest{HostPath: "/srv"}, true); RuleOf(err) != RuleOutsideRoots || !strings.Contains(err.Error(), "no roots") {
		t.Errorf("got %v", err)
	}
}

// RuleOf returns the rule of a *RejectError in err's chain, or "".
func RuleOf(err error) Rule {
	var re *RejectError
	if errors.As(err, &re) {
		return re.Rule
	}
	return ""
}
