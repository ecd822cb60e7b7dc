package mountsec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrNoAllowlist is returned by LoadAllowlist when the file does not exist:
// no allowlist means no additional mounts.
var ErrNoAllowlist = errors.New("no mount allowlist, so no additional mounts are allowed")

// ErrBadAllowlist is wrapped by every other LoadAllowlist/ParseAllowlist error.
var ErrBadAllowlist = errors.New("invalid mount allowlist")

// MaxAllowlistSize bounds the allowlist file.
const MaxAllowlistSize = 1 << 20

// SystemAllowlistPath is the system service's allowlist.
const SystemAllowlistPath = "/etc/arizuko/mount-allowlist.json"

// DefaultAllowlistPath returns SystemAllowlistPath for the system service and
// $XDG_CONFIG_HOME/pub/arizuko/mount-allowlist.json (normally
// ~/.config/pub/arizuko/mount-allowlist.json) for a user service.
func DefaultAllowlistPath(system bool) (string, error) {
	if system {
		return SystemAllowlistPath, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("mountsec: user allowlist path: %w", err)
	}
	return filepath.Join(dir, "pub", "arizuko", "mount-allowlist.json"), nil
}

// AllowedRoot is one allowlist entry. Real is the root's path with every
// symlink resolved; mounts are judged against Real.
type AllowedRoot struct {
	Path           string `json:"path"`
	AllowReadWrite bool   `json:"allowReadWrite"`
	Description    string `json:"description"`
	Real           string `json:"-"`
}

// Allowlist is a loaded, checked allowlist. Use LoadAllowlist or ParseAllowlist.
type Allowlist struct {
	Source          string        // file it came from
	Roots           []AllowedRoot // in file order
	NonMainReadOnly bool          // defaults to true when the file omits it
	Patterns        []string      // the file's blockedPatterns (built-ins apply too)

	home      string
	patterns  []pattern
	contains  []pattern  // anchored locations a mount may not contain
	protected [][]string // folded components of protected paths
}

// Options are the service's facts an allowlist is judged with.
type Options struct {
	// Home is the service user's home, used to expand "~". Empty means
	// os.UserHomeDir(); when that fails too, paths starting with "~" are
	// rejected (rule home-unknown).
	Home string
	// Protected paths (arizukod's data directory, its app directory) can
	// never be mounted, nor anything inside them or containing them. The
	// allowlist file's own directory is always protected.
	Protected []string
}

type allowlistFile struct {
	AllowedRoots    *[]AllowedRoot `json:"allowedRoots"`
	BlockedPatterns []string       `json:"blockedPatterns"`
	NonMainReadOnly *bool          `json:"nonMainReadOnly"`
}

// LoadAllowlist reads and checks the allowlist at path. A missing file gives
// ErrNoAllowlist. The file must not be writable by group or others, and must
// be owned by the service user or root.
func LoadAllowlist(path string, opt Options) (*Allowlist, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("mountsec: %s: %w", path, ErrNoAllowlist)
	}
	if err != nil {
		return nil, fmt.Errorf("mountsec: %w: %w", ErrBadAllowlist, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("mountsec: %w: %w", ErrBadAllowlist, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("mountsec: %w: %s is not a regular file", ErrBadAllowlist, path)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("mountsec: %w: %s is writable by group or others (mode %#o)", ErrBadAllowlist, path, st.Mode().Perm())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("mountsec: %w: %s is owned by uid %d, not the service user or root", ErrBadAllowlist, path, sys.Uid)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxAllowlistSize+1))
	if err != nil {
		return nil, fmt.Errorf("mountsec: %w: %s: %w", ErrBadAllowlist, path, err)
	}
	if len(data) > MaxAllowlistSize {
		return nil, fmt.Errorf("mountsec: %w: %s is larger than %d bytes", ErrBadAllowlist, path, MaxAllowlistSize)
	}
	if abs, err := filepath.Abs(path); err == nil {
		opt.Protected = append(append([]string(nil), opt.Protected...), filepath.Dir(abs))
	}
	return ParseAllowlist(data, path, opt)
}

// ParseAllowlist checks an allowlist held in memory; source names it in errors.
// Unknown fields are rejected. Every root must exist; it is resolved through
// symlinks and judged by its real path.
func ParseAllowlist(data []byte, source string, opt Options) (*Allowlist, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("mountsec: %w: %s: %s", ErrBadAllowlist, source, fmt.Sprintf(format, args...))
	}
	var file allowlistFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, bad("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("unexpected data after the JSON object")
	}
	if file.AllowedRoots == nil {
		return nil, bad("allowedRoots is missing (write [] to allow no roots)")
	}
	a := &Allowlist{Source: source, NonMainReadOnly: true, Patterns: file.BlockedPatterns}
	if file.NonMainReadOnly != nil {
		a.NonMainReadOnly = *file.NonMainReadOnly
	}
	home, err := serviceHome(opt.Home)
	if err != nil {
		return nil, bad("%v", err)
	}
	a.home = home
	if err := a.compile(file.BlockedPatterns); err != nil {
		return nil, bad("%v", err)
	}
	for _, p := range opt.Protected {
		if err := a.protect(p); err != nil {
			return nil, bad("%v", err)
		}
	}
	for i, r := range *file.AllowedRoots {
		real, rej := a.checkRoot(r.Path)
		if rej != nil {
			return nil, bad("allowedRoots[%d] %q: rule %s: %s", i, r.Path, rej.Rule, rej.Detail)
		}
		r.Real = real
		a.Roots = append(a.Roots, r)
	}
	return a, nil
}

func serviceHome(home string) (string, error) {
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", nil
		}
		home = h
	}
	if !filepath.IsAbs(home) || strings.IndexByte(home, 0) >= 0 {
		return "", fmt.Errorf("home directory %q is not an absolute path", home)
	}
	return filepath.Clean(home), nil
}

func (a *Allowlist) compile(user []string) error {
	add := func(src string, builtin bool) error {
		p, err := compilePattern(src, a.home, builtin)
		if err != nil {
			return err
		}
		a.patterns = append(a.patterns, p)
		switch {
		case p.anchored:
			a.contains = append(a.contains, p)
		case len(p.parts) > 1 && a.home != "":
			for _, h := range realAndLexical(a.home) {
				a.contains = append(a.contains, pattern{src: p.src, builtin: builtin, anchored: true,
					parts: append(fold(components(h)), p.parts...)})
			}
		}
		return nil
	}
	for _, src := range builtinBlocked {
		if err := add(src, true); err != nil {
			return err
		}
	}
	for i, src := range user {
		if err := add(src, false); err != nil {
			return fmt.Errorf("blockedPatterns[%d]: %w", i, err)
		}
	}
	if a.home != "" {
		for _, h := range realAndLexical(a.home) {
			a.contains = append(a.contains, pattern{src: "the service user's home " + h, builtin: true, anchored: true,
				parts: append(fold(components(h)), "*")})
		}
	}
	return nil
}

// protect adds path (as written and resolved) to the protected paths.
func (a *Allowlist) protect(path string) error {
	if !filepath.IsAbs(path) || strings.IndexByte(path, 0) >= 0 {
		return fmt.Errorf("protected path %q is not absolute", path)
	}
	for _, p := range realAndLexical(filepath.Clean(path)) {
		a.protected = append(a.protected, fold(components(p)))
	}
	return nil
}

// realAndLexical returns path and, when it differs, path with symlinks resolved.
func realAndLexical(path string) []string {
	out := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		out = append(out, real)
	}
	return out
}

// checkRoot applies the path rules to an allowlist root and resolves it.
func (a *Allowlist) checkRoot(raw string) (string, *RejectError) {
	req := MountRequest{HostPath: raw}
	p, rej := a.expand(req)
	if rej != nil {
		return "", rej
	}
	if rej := a.checkBlocked(req, p, "root"); rej != nil {
		return "", rej
	}
	real, rej := resolve(req, p)
	if rej != nil {
		return "", rej
	}
	if rej := a.checkBlocked(req, real, "root's real path"); rej != nil {
		return "", rej
	}
	st, err := os.Stat(real)
	if err != nil || !st.IsDir() {
		return "", reject(req, RuleFileType, "%s is not a directory", real)
	}
	return real, nil
}

// Home returns the home directory "~" expands to ("" when unknown).
func (a *Allowlist) Home() string { return a.home }
