// Package agentimage builds the agent images on the host, without a registry: a Debian
// root filesystem made by debootstrap (cached as a tar), Claude Code's native binary from
// its npm package at a pinned version (checked against the registry's SHA-512 before it is
// used), and the arizuko-claude runner, imported into the engine as one layer.
//
// It owns the cache directory of its downloads; it does not run containers.
package agentimage

import (
	"github.com/arizuko/arizukod/contract"

	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/arizuko/arizukod/internal/atomicfile"
	"github.com/arizuko/arizukod/runtime/engine"
)

// The pinned Claude Code: the native binary's npm package, its version and the registry's
// integrity of its tarball.
const (
	ClaudeVersion   = "2.1.330"
	claudePackage   = "@anthropic-ai/claude-code-linux-x64"
	claudeIntegrity = "sha512-9Gn+V7DtJ8M1nztP9CeDVl9g3RtrepI7rOFTyPRRnZe8D6zebIHKmC7OvBauucuAP0X0k85SDN/LPVZyjsGezQ=="
)

// ClaudeRef is the image BuildClaude makes.
var ClaudeRef = "localhost/arizuko-claude:" + ClaudeVersion

// rootfsPackages are what the agent's tools need beyond minbase: certificates for the
// egress proxy's TLS, git, a shell's usual tools, and socat for the MCP bridges.
var rootfsPackages = []string{"ca-certificates", "git", "socat", "procps", "ripgrep", "less", "curl", "jq"}

// Options configure BuildClaude.
type Options struct {
	// CacheDir holds the rootfs tar and the npm tarball between builds.
	CacheDir string
	// Runner is the arizuko-claude binary (static) to put in the image.
	Runner string
	// Suite and Mirror are debootstrap's (default bookworm, deb.debian.org).
	Suite, Mirror string
	// Registry is the npm registry (default https://registry.npmjs.org).
	Registry string
	Logger   *slog.Logger
	// Ref is the tag to import as (default ClaudeRef): a program that must not replace
	// the image others use, such as bench/, names its own.
	Ref string
}

// Built is what BuildClaude made.
type Built struct {
	Ref      string
	Bytes    int64 // the imported rootfs
	Duration time.Duration
	// Replaced is the image Ref named before the build, which the import left untagged:
	// removed, unless a container still uses it (Replaced.Kept).
	Replaced engine.Replaced
}

// ErrIntegrity: a download's hash is not the pinned one.
var ErrIntegrity = errors.New("integrity check failed")

// BuildClaude makes ClaudeRef on eng.
func BuildClaude(ctx context.Context, eng engine.Engine, o Options) (Built, error) {
	start := time.Now()
	if o.Suite == "" {
		o.Suite = "bookworm"
	}
	if o.Mirror == "" {
		o.Mirror = "http://deb.debian.org/debian"
	}
	if o.Registry == "" {
		o.Registry = "https://registry.npmjs.org"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Ref == "" {
		o.Ref = ClaudeRef
	}
	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		return Built{}, fmt.Errorf("cache directory: %w", err)
	}
	if fi, err := os.Stat(o.Runner); err != nil || !fi.Mode().IsRegular() {
		return Built{}, fmt.Errorf("the arizuko-claude runner %q: not a file (build it with `make build`, or pass --runner)", o.Runner)
	}
	rootfs, err := ensureRootfs(ctx, o)
	if err != nil {
		return Built{}, err
	}
	tgz, err := ensureClaude(ctx, o)
	if err != nil {
		return Built{}, err
	}
	pr, pw := io.Pipe()
	counted := &countingReader{r: pr}
	go func() { pw.CloseWithError(compose(pw, rootfs, tgz, o.Runner)) }()
	changes := []string{
		`ENTRYPOINT ["/usr/local/bin/arizuko-claude"]`,
		"WORKDIR /workspace",
		"ENV PATH=/usr/local/bin:/usr/bin:/bin",
		"ENV HOME=/root",
		"LABEL io.arizuko.claude-version=" + ClaudeVersion,
		// arizuko-claude can be started ahead of its turn (contract.PrepareLabel).
		"LABEL " + contract.PrepareLabel + "=1",
	}
	replaced, err := engine.ImportReplacing(ctx, eng, o.Ref, func() error {
		if err := eng.ImportImage(ctx, o.Ref, counted, changes); err != nil {
			return fmt.Errorf("import %s: %w", o.Ref, err)
		}
		return nil
	})
	if err != nil {
		pr.CloseWithError(err) // the rootfs is not read (further): its writer ends
		return Built{}, err
	}
	return Built{Ref: o.Ref, Bytes: counted.n, Duration: time.Since(start), Replaced: replaced}, nil
}

// ExtractClaude writes the pinned Claude Code's native binary (the very file BuildClaude puts
// in the image) to dst, executable, from the cached npm tarball, downloading and checking
// it first when missing: for running the same Claude Code on the host.
func ExtractClaude(ctx context.Context, o Options, dst string) error {
	if o.Registry == "" {
		o.Registry = "https://registry.npmjs.org"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		return fmt.Errorf("cache directory: %w", err)
	}
	tgz, err := ensureClaude(ctx, o)
	if err != nil {
		return err
	}
	var data []byte
	if err := withClaude(tgz, func(_ int64, r io.Reader) error {
		var err error
		data, err = io.ReadAll(r)
		return err
	}); err != nil {
		return err
	}
	return atomicfile.Write(dst, data, 0o755)
}

// ensureRootfs returns the cached rootfs tar, making it with debootstrap when missing.
func ensureRootfs(ctx context.Context, o Options) (string, error) {
	name := fmt.Sprintf("rootfs-%s-minbase-%s.tar", o.Suite, shortHash(strings.Join(rootfsPackages, ",")))
	path := filepath.Join(o.CacheDir, name)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return "", errors.New("debootstrap is not installed: apt-get install debootstrap (or dnf install debootstrap)")
	}
	dir, err := os.MkdirTemp(o.CacheDir, "rootfs-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	o.Logger.Info("debootstrap: making the image's Debian root filesystem (once; cached)", "suite", o.Suite, "dir", dir)
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", "--include="+strings.Join(rootfsPackages, ","),
		o.Suite, dir, o.Mirror)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tail := out.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return "", fmt.Errorf("debootstrap %s: %w\n%s", o.Suite, err, tail)
	}
	// The image is immutable: package caches and logs only weigh.
	for _, p := range []string{"var/cache/apt/archives", "var/lib/apt/lists", "var/log"} {
		entries, _ := os.ReadDir(filepath.Join(dir, p))
		for _, e := range entries {
			os.RemoveAll(filepath.Join(dir, p, e.Name()))
		}
	}
	tmp := path + ".tmp"
	tarCmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "-C", dir, "-cf", tmp, ".")
	if b, err := tarCmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("tar the rootfs: %w: %s", err, b)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	return path, nil
}

// ensureClaude returns the cached npm tarball of Claude Code's native binary, downloading
// it when missing; either way its SHA-512 must be the pinned one.
func ensureClaude(ctx context.Context, o Options) (string, error) {
	base := strings.TrimPrefix(claudePackage, "@anthropic-ai/")
	path := filepath.Join(o.CacheDir, fmt.Sprintf("%s-%s.tgz", base, ClaudeVersion))
	if err := checkIntegrity(path); err == nil {
		return path, nil
	}
	url := fmt.Sprintf("%s/%s/-/%s-%s.tgz", o.Registry, claudePackage, base, ClaudeVersion)
	o.Logger.Info("downloading Claude Code", "url", url)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := (&http.Client{Timeout: 15 * time.Minute}).Do(req)
	if err != nil {
		return "", fmt.Errorf("download Claude Code %s: %w", ClaudeVersion, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("download Claude Code %s: %s from %s", ClaudeVersion, resp.Status, url)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("download Claude Code %s: %w", ClaudeVersion, err)
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return "", err
	}
	if err := checkIntegrity(path); err != nil {
		os.Remove(path)
		return "", err
	}
	return path, nil
}

func checkIntegrity(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha512.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := "sha512-" + base64.StdEncoding.EncodeToString(h.Sum(nil)); got != claudeIntegrity {
		return fmt.Errorf("%w: %s has %s, want %s", ErrIntegrity, path, got, claudeIntegrity)
	}
	return nil
}

// compose writes the image's rootfs: the cached Debian tree, then Claude Code's binary and
// the runner in /usr/local/bin, and /workspace.
func compose(w io.Writer, rootfs, claudeTgz, runner string) error {
	tw := tar.NewWriter(w)
	rf, err := os.Open(rootfs)
	if err != nil {
		return err
	}
	defer rf.Close()
	tr := tar.NewReader(rf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", rootfs, err)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "./workspace/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	if err := addClaude(tw, claudeTgz); err != nil {
		return err
	}
	if err := addFile(tw, runner, "./usr/local/bin/arizuko-claude"); err != nil {
		return err
	}
	return tw.Close()
}

func addClaude(tw *tar.Writer, tgz string) error {
	return withClaude(tgz, func(size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: "./usr/local/bin/claude", Mode: 0o755, Size: size,
			Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	})
}

// withClaude calls fn with the size and the content of Claude Code's binary in the npm
// tarball tgz.
func withClaude(tgz string, fn func(size int64, r io.Reader) error) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", tgz, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fmt.Errorf("%s has no package/claude", tgz)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tgz, err)
		}
		if h.Name == "package/claude" {
			return fn(h.Size, tr)
		}
	}
}

func addFile(tw *tar.Writer, src, name string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: fi.Size(), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

func shortHash(s string) string {
	sum := sha512.Sum512([]byte(s))
	return fmt.Sprintf("%x", sum[:4])
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
