package mountsec

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeAllowlist(t *testing.T, dir, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, "mount-allowlist.json")
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadAllowlist(t *testing.T) {
	home := t.TempDir()
	mustMkdir(t, filepath.Join(home, "projects"))
	cfg := t.TempDir()
	p := writeAllowlist(t, cfg, `{"allowedRoots":[{"path":"~/projects","allowReadWrite":true,"description":"code"}],"blockedPatterns":["secret*"]}`, 0o600)
	a, err := LoadAllowlist(p, Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if !a.NonMainReadOnly {
		t.Error("nonMainReadOnly must default to true")
	}
	if a.Source != p || len(a.Roots) != 1 || a.Roots[0].Real != filepath.Join(home, "projects") || !a.Roots[0].AllowReadWrite ||
		a.Roots[0].Description != "code" || a.Home() != home || len(a.Patterns) != 1 {
		t.Errorf("loaded %+v", a)
	}
	// The allowlist's own directory is protected.
	mustMkdir(t, filepath.Join(home, "projects", "x"))
	b, err := LoadAllowlist(writeAllowlist(t, filepath.Join(home, "projects", "x"), `{"allowedRoots":[{"path":"~/projects"}]}`, 0o644), Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Validate(MountRequest{HostPath: "~/projects/x"}, true); RuleOf(err) != RuleProtected {
		t.Errorf("allowlist dir mountable: %v", err)
	}
	if _, err := b.Validate(MountRequest{HostPath: "~/projects"}, true); RuleOf(err) != RuleProtected {
		t.Errorf("parent of allowlist dir mountable: %v", err)
	}
}

func TestLoadAllowlistMissing(t *testing.T) {
	_, err := LoadAllowlist(filepath.Join(t.TempDir(), "none.json"), Options{})
	if !errors.Is(err, ErrNoAllowlist) || !strings.Contains(err.Error(), "no additional mounts") || !strings.Contains(err.Error(), "none.json") {
		t.Errorf("missing allowlist: %v", err)
	}
}

func TestLoadAllowlistFileChecks(t *testing.T) {
	dir := t.TempDir()
	p := writeAllowlist(t, dir, `{"allowedRoots":[]}`, 0o666)
	if _, err := LoadAllowlist(p, Options{Home: dir}); !errors.Is(err, ErrBadAllowlist) || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("world-writable allowlist: %v", err)
	}
	if _, err := LoadAllowlist(dir, Options{Home: dir}); !errors.Is(err, ErrBadAllowlist) {
		t.Errorf("directory as allowlist: %v", err)
	}
	big := writeAllowlist(t, t.TempDir(), `{"allowedRoots":[]}`+strings.Repeat(" ", MaxAllowlistSize), 0o600)
	if _, err := LoadAllowlist(big, Options{Home: dir}); !errors.Is(err, ErrBadAllowlist) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("huge allowlist: %v", err)
	}
	if os.Geteuid() == 0 {
		q := writeAllowlist(t, t.TempDir(), `{"allowedRoots":[]}`, 0o600)
		if err := os.Chown(q, 31337, 31337); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadAllowlist(q, Options{Home: dir}); !errors.Is(err, ErrBadAllowlist) || !strings.Contains(err.Error(), "owned by uid 31337") {
			t.Errorf("foreign-owned allowlist: %v", err)
		}
	}
}

func TestParseAllowlistErrors(t *testing.T) {
	home := t.TempDir()
	mustMkdir(t, filepath.Join(home, "projects"))
	mustMkdir(t, filepath.Join(home, ".ssh"))
	if err := os.WriteFile(filepath.Join(home, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"evil-root": ".ssh", "proc-root": "/proc", "dangling": "nothing"} {
		if err := os.Symlink(target, filepath.Join(home, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, json, want string
	}{
		{"unknown top-level field", `{"allowedRoots":[],"blockedPaterns":[]}`, `unknown field "blockedPaterns"`},
		{"unknown root field", `{"allowedRoots":[{"path":"~/projects","allowRW":true}]}`, `unknown field "allowRW"`},
		{"missing roots", `{"blockedPatterns":[]}`, "allowedRoots is missing"},
		{"null", `null`, "allowedRoots is missing"},
		{"not json", `allowedRoots: []`, "invalid character"},
		{"trailing data", `{"allowedRoots":[]} {}`, "unexpected data"},
		{"wrong type", `{"allowedRoots":[],"nonMainReadOnly":"yes"}`, "nonMainReadOnly"},
		{"relative root", `{"allowedRoots":[{"path":"projects"}]}`, "rule not-absolute"},
		{"missing root", `{"allowedRoots":[{"path":"~/nope"}]}`, "rule host-path-missing"},
		{"root is a file", `{"allowedRoots":[{"path":"~/file"}]}`, "is not a directory"},
		{"root is blocked", `{"allowedRoots":[{"path":"~/.ssh"}]}`, "rule blocked-pattern"},
		{"root is a symlink to a blocked dir", `{"allowedRoots":[{"path":"~/evil-root"}]}`, "rule blocked-pattern: root's real path"},
		{"root is a symlink to /proc", `{"allowedRoots":[{"path":"~/proc-root"}]}`, "rule blocked-pattern"},
		{"root is a dangling symlink", `{"allowedRoots":[{"path":"~/dangling"}]}`, "rule host-path-missing"},
		{"root with dotdot", `{"allowedRoots":[{"path":"~/projects/../.ssh"}]}`, "rule dot-dot"},
		{"root with trailing slash", `{"allowedRoots":[{"path":"~/projects/"}]}`, "rule non-canonical"},
		{"root non-ascii", `{"allowedRoots":[{"path":"~/prоjects"}]}`, "rule non-ascii"},
		{"bad glob", `{"allowedRoots":[],"blockedPatterns":["[x"]}`, "syntax error in pattern"},
		{"empty pattern", `{"allowedRoots":[],"blockedPatterns":[""]}`, "blockedPatterns[0]: empty pattern"},
		{"match-all pattern", `{"allowedRoots":[],"blockedPatterns":["/"]}`, "matches everything"},
		{"dotdot pattern", `{"allowedRoots":[],"blockedPatterns":["a/../b"]}`, "'..'"},
		{"tilde-user pattern", `{"allowedRoots":[],"blockedPatterns":["~bob/x"]}`, "only ~/"},
		{"non-ascii pattern", `{"allowedRoots":[],"blockedPatterns":["séçret"]}`, "printable ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAllowlist([]byte(tc.json), "/etc/arizuko/mount-allowlist.json", Options{Home: home})
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrBadAllowlist) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "/etc/arizuko/mount-allowlist.json") {
				t.Errorf("error %q, want ErrBadAllowlist naming the file and %q", err, tc.want)
			}
		})
	}
}

func TestDefaultAllowlistPath(t *testing.T) {
	if p, err := DefaultAllowlistPath(true); err != nil || p != "/etc/arizuko/mount-allowlist.json" {
		t.Errorf("system: %q, %v", p, err)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/home/svc")
	if p, err := DefaultAllowlistPath(false); err != nil || p != "/home/svc/.config/pub/arizuko/mount-allowlist.json" {
		t.Errorf("user: %q, %v", p, err)
	}
}

func TestPatternMatching(t *testing.T) {
	for _, tc := range []struct {
		pat, path string
		blocks    bool
		contains  bool
	}{
		{".ssh", "/home/u/.ssh", true, false},
		{".ssh", "/home/u/.ssh/x", true, false},
		{".ssh", "/home/u/.sshx", false, false},
		{".env.*", "/a/.env.local", true, false},
		{".env.*", "/a/.env", false, false},
		{"*.pem", "/a/b/Cert.PEM", true, false},
		{".config/gh", "/home/u/.config/gh/hosts.yml", true, false},
		{".config/gh", "/home/u/.config/x/gh", false, false},
		{"/run", "/run/podman/podman.sock", true, false},
		{"/run", "/srv/run", false, false},
		{"/var/lib/docker", "/var/lib", false, true},
		{"/var/lib/docker", "/var/lib2", false, false},
		{"/var/lib/docker", "/", false, true},
		{"/tmp/ssh-*", "/tmp", false, true},
		{"/tmp/ssh-*", "/tmp/ssh-abc/agent.1", true, false},
		{"/data", "/data2", false, false},
	} {
		p, err := compilePattern(tc.pat, "/home/u", true)
		if err != nil {
			t.Fatal(err)
		}
		folded := fold(components(tc.path))
		if got := p.blocks(folded); got != tc.blocks {
			t.Errorf("%q blocks %q = %v", tc.pat, tc.path, got)
		}
		if got := p.contains(folded); got != tc.contains {
			t.Errorf("%q contained by %q = %v", tc.pat, tc.path, got)
		}
	}
	for _, src := range BuiltinBlockedPatterns() {
		if _, err := compilePattern(src, "/home/u", true); err != nil {
			t.Errorf("built-in %q: %v", src, err)
		}
	}
}

// BuiltinBlockedPatterns returns the patterns that always apply, on top of the
// allowlist's own blockedPatterns. A pattern without '/' matches any single path component; a
// relative pattern with '/' matches any run of consecutive components; a
// pattern starting with '/' matches the path's leading components (the path
// is that location or inside it). Each component is a filepath.Match glob,
// compared case-insensitively.
func BuiltinBlockedPatterns() []string { return slices.Clone(builtinBlocked) }
