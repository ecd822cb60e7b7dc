package agentimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// writeTgz writes an npm-like tarball holding files (name -> content).
func writeTgz(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(content))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	p := filepath.Join(t.TempDir(), "pkg.tgz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWithClaude(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // "" for an error
	}{
		{"the binary among the package's files", map[string]string{"package/package.json": "{}", "package/claude": "ELF..."}, "ELF..."},
		{"no binary", map[string]string{"package/package.json": "{}"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			var size int64
			err := withClaude(writeTgz(t, tc.files), func(n int64, r io.Reader) error {
				b, err := io.ReadAll(r)
				got, size = string(b), n
				return err
			})
			if tc.want == "" {
				if err == nil {
					t.Fatalf("withClaude found a binary %q in a package without one", got)
				}
				return
			}
			if err != nil || got != tc.want || size != int64(len(tc.want)) {
				t.Fatalf("withClaude = %q (size %d), %v; want %q", got, size, err, tc.want)
			}
		})
	}
}
