package mountsec

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzValidate: no request panics, and an accepted one never yields a host
// path outside an allowed root, holding a blocked component, overlapping a
// protected path, or holding a symlink; the container path stays below
// ExtraMountDir; read-write only as the allowlist permits.
func FuzzValidate(f *testing.F) {
	fx := newFixture(f, true)
	for _, s := range []string{
		"projects/webapp", "projects/ssh-link", "projects/escape", "projects/chain1", ".ssh/id_rsa",
		"projects/../.ssh", "projects/inner-link", "docs-link/a", "docs-link/out", "projects/.SSH",
		"projects/webapp/", "projects//webapp", "projects/cafe", "arizuko-data", "projects/notes.txt",
	} {
		for mode := byte(0); mode < 3; mode++ {
			f.Add(mode, s, "", byte(0), true)
			f.Add(mode, s, "x/../y", byte(2), false)
		}
	}
	f.Add(byte(0), "/etc/shadow", "/etc", byte(1), true)
	f.Add(byte(0), "/proc/self/root", "a//b", byte(2), true)
	f.Fuzz(func(t *testing.T, mode byte, host, container string, ro byte, isRoot bool) {
		switch mode % 3 {
		case 1:
			host = "~/" + host
		case 2:
			host = fx.home + "/" + host
		}
		req := MountRequest{HostPath: host, ContainerPath: container}
		switch ro % 3 {
		case 1:
			req.ReadOnly = boolp(true)
		case 2:
			req.ReadOnly = boolp(false)
		}
		m, err := fx.a.Validate(req, isRoot)
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) || !errors.Is(err, ErrMountRejected) || re.Rule == "" {
				t.Fatalf("error without a rule: %v", err)
			}
			return
		}
		root := fx.a.rootFor(m.HostPath)
		if root == nil || root.Path != m.Root {
			t.Fatalf("accepted %q outside every root", m.HostPath)
		}
		if rej := fx.a.checkBlocked(req, m.HostPath, "accepted"); rej != nil {
			t.Fatalf("accepted a blocked path: %v", rej)
		}
		if rej := fx.a.checkContains(req, m.HostPath); rej != nil {
			t.Fatalf("accepted a protected/containing path: %v", rej)
		}
		if real, err := filepath.EvalSymlinks(m.HostPath); err != nil || real != m.HostPath {
			t.Fatalf("host path %q is not real: %q %v", m.HostPath, real, err)
		}
		if !strings.HasPrefix(m.ContainerPath, ExtraMountDir+"/") || filepath.Clean(m.ContainerPath) != m.ContainerPath ||
			m.ContainerPath != ExtraMountDir+"/"+m.Name || strings.Contains(m.ContainerPath, "/..") {
			t.Fatalf("container path %q escapes %s", m.ContainerPath, ExtraMountDir)
		}
		if !m.ReadOnly && (req.ReadOnly == nil || *req.ReadOnly || !root.AllowReadWrite || (!isRoot && fx.a.NonMainReadOnly)) {
			t.Fatalf("read-write granted for %+v (root %+v)", req, root)
		}
		for i := 0; i < len(m.HostPath); i++ {
			if c := m.HostPath[i]; c < 0x20 || c >= 0x7f {
				t.Fatalf("accepted a non-ASCII or control byte in %q", m.HostPath)
			}
		}
	})
}

// FuzzParseEnvFile: never panics; every error names its line; accepted names
// are valid; what WriteEnvFile writes reads back unchanged.
func FuzzParseEnvFile(f *testing.F) {
	for _, s := range []string{
		"A=1", "export B='x y'", "C=\"a\\nb\"", "# c\nD=e # f", "E='it'\\''s'", "F", "G='", "H=\"\\\"",
		"=x", "I=a\x00", "\xef\xbb\xbfJ=k\r\n", "K= #c", "L='a'b",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		vars, err := ParseEnvFile(data)
		if err != nil {
			if !errors.Is(err, ErrEnvFile) || !strings.Contains(err.Error(), "line ") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		for k := range vars {
			if !validEnvName(k) {
				t.Fatalf("invalid name %q accepted", k)
			}
		}
		p := filepath.Join(dir, "env")
		if err := WriteEnvFile(p, vars); err != nil {
			for _, v := range vars {
				if strings.ContainsAny(v, "\x00\r\n") {
					return
				}
			}
			t.Fatalf("WriteEnvFile: %v", err)
		}
		back, err := ReadEnvFile(p)
		if err != nil {
			t.Fatalf("reading back: %v", err)
		}
		if len(back) != len(vars) {
			t.Fatalf("round trip lost variables")
		}
		for k, v := range vars {
			if back[k] != v {
				t.Fatalf("round trip changed %s", k)
			}
		}
	})
}
