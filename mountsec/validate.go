package mountsec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrMountRejected is wrapped by every *RejectError.
var ErrMountRejected = errors.New("mount rejected")

// ExtraMountDir is where additional mounts land in the container.
const ExtraMountDir = "/workspace/extra"

// Limits on paths.
const (
	PathMax             = 4096 // bytes including the terminating NUL, as Linux PATH_MAX
	NameMax             = 255  // bytes per component
	MaxContainerPathLen = 255
	MaxContainerDepth   = 8
)

// Rule names the check that rejected a mount.
type Rule string

// The rules, roughly in the order Validate applies them.
const (
	RuleNoAllowlist           Rule = "no-allowlist"
	RuleHostPathEmpty         Rule = "host-path-empty"
	RuleNUL                   Rule = "nul-byte"
	RuleTooLong               Rule = "too-long"
	RuleControlChar           Rule = "control-char"
	RuleNonASCII              Rule = "non-ascii"
	RuleUnsafeChar            Rule = "unsafe-char"
	RuleTildeUser             Rule = "tilde-user"
	RuleHomeUnknown           Rule = "home-unknown"
	RuleNotAbsolute           Rule = "not-absolute"
	RuleDotDot                Rule = "dot-dot"
	RuleNonCanonical          Rule = "non-canonical"
	RuleBlocked               Rule = "blocked-pattern"
	RuleHostPathMissing       Rule = "host-path-missing"
	RuleUnresolvable          Rule = "unresolvable"
	RuleContainsBlocked       Rule = "contains-blocked"
	RuleProtected             Rule = "protected-path"
	RuleOutsideRoots          Rule = "outside-allowed-roots"
	RuleFileType              Rule = "unsupported-file-type"
	RuleHardLink              Rule = "hard-linked-file"
	RuleContainerAbsolute     Rule = "container-path-absolute"
	RuleContainerDotDot       Rule = "container-path-dot-dot"
	RuleContainerNonCanonical Rule = "container-path-non-canonical"
	RuleContainerCharset      Rule = "container-path-charset"
	RuleContainerTooLong      Rule = "container-path-too-long"
	RuleContainerConflict     Rule = "container-path-conflict"
	RuleRootReadOnly          Rule = "root-read-only"
	RuleNonMainReadOnly       Rule = "non-main-read-only"
	RuleChanged               Rule = "changed-since-validation"
)

// MountRequest is one entry of a group's container_config additional_mounts.
// ReadOnly nil means read-only. An empty ContainerPath defaults to the host
// path's last component.
type MountRequest struct {
	HostPath      string `json:"host_path"`
	ContainerPath string `json:"container_path"`
	ReadOnly      *bool  `json:"readonly,omitempty"`
}

// Mount is an accepted request. HostPath is the real path (no symlinks) and is
// what the runner must mount, after Recheck.
type Mount struct {
	Name          string `json:"name"`           // container path relative to ExtraMountDir
	HostPath      string `json:"host_path"`      // real, resolved host path
	ContainerPath string `json:"container_path"` // ExtraMountDir/Name
	ReadOnly      bool   `json:"readonly"`
	RequestedPath string `json:"requested_path"` // host path as the group's config wrote it
	Root          string `json:"root"`           // the allowlist root (as written) that admitted it
}

// RejectError says which mount was rejected by which rule, and why. It never
// holds file contents, only paths.
type RejectError struct {
	HostPath      string
	ContainerPath string
	Rule          Rule
	Detail        string
}

func (e *RejectError) Error() string {
	if e.ContainerPath != "" {
		return fmt.Sprintf("mount %q -> %q rejected by rule %s: %s", e.HostPath, e.ContainerPath, e.Rule, e.Detail)
	}
	return fmt.Sprintf("mount %q rejected by rule %s: %s", e.HostPath, e.Rule, e.Detail)
}

// Unwrap makes errors.Is(err, ErrMountRejected) true.
func (e *RejectError) Unwrap() error { return ErrMountRejected }

func reject(req MountRequest, rule Rule, format string, args ...any) *RejectError {
	return &RejectError{HostPath: req.HostPath, ContainerPath: req.ContainerPath, Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// Validate judges one request. isRootGroup is true for the root group (the
// group allowed read-write mounts when nonMainReadOnly is on). A nil
// allowlist rejects everything with rule no-allowlist.
func (a *Allowlist) Validate(req MountRequest, isRootGroup bool) (Mount, error) {
	if a == nil {
		return Mount{}, reject(req, RuleNoAllowlist, "no mount allowlist is configured, so no additional mounts are allowed")
	}
	p, rej := a.expand(req)
	if rej != nil {
		return Mount{}, rej
	}
	if rej := a.checkBlocked(req, p, "path"); rej != nil {
		return Mount{}, rej
	}
	real, rej := resolve(req, p)
	if rej != nil {
		return Mount{}, rej
	}
	if rej := a.checkBlocked(req, real, "real path"); rej != nil {
		return Mount{}, rej
	}
	if rej := a.checkContains(req, real); rej != nil {
		return Mount{}, rej
	}
	root := a.rootFor(real)
	if root == nil {
		return Mount{}, reject(req, RuleOutsideRoots, "real path %s is not under any allowed root (%s)", real, a.rootList())
	}
	if rej := checkFileType(req, real); rej != nil {
		return Mount{}, rej
	}
	name := req.ContainerPath
	if name == "" {
		name = filepath.Base(p)
	}
	if rej := checkContainerPath(req, name); rej != nil {
		return Mount{}, rej
	}
	ro := req.ReadOnly == nil || *req.ReadOnly
	if !ro && !root.AllowReadWrite {
		return Mount{}, reject(req, RuleRootReadOnly, "root %q does not allow read-write mounts", root.Path)
	}
	if !ro && !isRootGroup && a.NonMainReadOnly {
		return Mount{}, reject(req, RuleNonMainReadOnly, "nonMainReadOnly is on and this is not the root group")
	}
	return Mount{
		Name:          name,
		HostPath:      real,
		ContainerPath: ExtraMountDir + "/" + name,
		ReadOnly:      ro,
		RequestedPath: req.HostPath,
		Root:          root.Path,
	}, nil
}

// checkSyntax applies the character and length rules to a host path; what
// says which path it is ("path", "real path").
func checkSyntax(req MountRequest, p, what string) *RejectError {
	if strings.IndexByte(p, 0) >= 0 {
		return reject(req, RuleNUL, "%s contains a NUL byte", what)
	}
	if len(p) >= PathMax {
		return reject(req, RuleTooLong, "%s is %d bytes, limit %d", what, len(p), PathMax-1)
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c < 0x20 || c == 0x7f:
			return reject(req, RuleControlChar, "%s contains control character %q", what, c)
		case c >= 0x80:
			return reject(req, RuleNonASCII, "%s contains a non-ASCII byte; only ASCII paths are accepted (look-alike and normalisation safety)", what)
		case c == ':' || c == ',' || c == '\\':
			return reject(req, RuleUnsafeChar, "%s contains %q, which breaks engine mount syntax", what, c)
		}
	}
	return nil
}

// expand checks the requested host path's form and expands "~".
func (a *Allowlist) expand(req MountRequest) (string, *RejectError) {
	p := req.HostPath
	if p == "" {
		return "", reject(req, RuleHostPathEmpty, "host_path is empty")
	}
	if rej := checkSyntax(req, p, "path"); rej != nil {
		return "", rej
	}
	if strings.HasPrefix(p, "~") {
		if p != "~" && !strings.HasPrefix(p, "~/") {
			return "", reject(req, RuleTildeUser, "only ~ (the service user's home) may be expanded, not ~user")
		}
		if a.home == "" {
			return "", reject(req, RuleHomeUnknown, "the service user's home directory is unknown, so ~ cannot be expanded")
		}
		p = a.home + p[1:]
		if rej := checkSyntax(req, p, "expanded path"); rej != nil {
			return "", rej
		}
	}
	if !filepath.IsAbs(p) {
		return "", reject(req, RuleNotAbsolute, "host path must be absolute or start with ~/")
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", reject(req, RuleDotDot, "'..' is not allowed in a host path")
		}
	}
	if clean := filepath.Clean(p); clean != p {
		return "", reject(req, RuleNonCanonical, "write the path in clean form %q (no '.', '//' or trailing '/')", clean)
	}
	for _, c := range components(p) {
		if len(c) > NameMax {
			return "", reject(req, RuleTooLong, "a path component is %d bytes, limit %d", len(c), NameMax)
		}
	}
	return p, nil
}

// checkBlocked rejects p when any of its components matches a blocked pattern.
func (a *Allowlist) checkBlocked(req MountRequest, p, what string) *RejectError {
	comps := components(p)
	folded := fold(comps)
	for _, pat := range a.patterns {
		if !pat.blocks(folded) {
			continue
		}
		if !pat.anchored && len(pat.parts) == 1 {
			for i, c := range folded {
				if matchPart(pat.parts[0], c) {
					return reject(req, RuleBlocked, "%s component %q matches %s", what, comps[i], pat.describe())
				}
			}
		}
		return reject(req, RuleBlocked, "%s %s matches %s", what, p, pat.describe())
	}
	return nil
}

// checkContains rejects a real path that is protected, inside a protected
// path, or an ancestor of a protected or blocked location.
func (a *Allowlist) checkContains(req MountRequest, real string) *RejectError {
	folded := fold(components(real))
	for _, pat := range a.contains {
		if pat.contains(folded) {
			return reject(req, RuleContainsBlocked, "real path %s contains the location of %s", real, pat.describe())
		}
	}
	for _, prot := range a.protected {
		if within(folded, prot) || within(prot, folded) {
			return reject(req, RuleProtected, "real path %s overlaps the protected path /%s", real, strings.Join(prot, "/"))
		}
	}
	return nil
}

// resolve follows every symlink in p.
func resolve(req MountRequest, p string) (string, *RejectError) {
	real, err := filepath.EvalSymlinks(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", reject(req, RuleHostPathMissing, "%s does not exist (or a symlink in it dangles)", p)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return "", reject(req, RuleTooLong, "%s: %v", p, err)
	case err != nil:
		return "", reject(req, RuleUnresolvable, "%s cannot be resolved: %v", p, err)
	}
	if !filepath.IsAbs(real) || filepath.Clean(real) != real {
		return "", reject(req, RuleUnresolvable, "%s resolves to a non-canonical path", p)
	}
	if rej := checkSyntax(req, real, "real path"); rej != nil {
		return "", rej
	}
	return real, nil
}

// rootFor returns the allowed root with the longest real path containing real.
func (a *Allowlist) rootFor(real string) *AllowedRoot {
	comps := components(real)
	var best *AllowedRoot
	bestLen := -1
	for i := range a.Roots {
		r := &a.Roots[i]
		rc := components(r.Real)
		if within(comps, rc) && len(rc) > bestLen {
			best, bestLen = r, len(rc)
		}
	}
	return best
}

func (a *Allowlist) rootList() string {
	if len(a.Roots) == 0 {
		return "the allowlist has no roots"
	}
	var s []string
	for _, r := range a.Roots {
		s = append(s, r.Real)
	}
	return strings.Join(s, ", ")
}

// checkFileType admits directories and regular files with a single link.
func checkFileType(req MountRequest, real string) *RejectError {
	st, err := os.Lstat(real)
	if err != nil {
		return reject(req, RuleUnresolvable, "%s: %v", real, err)
	}
	switch {
	case st.IsDir():
	case st.Mode().IsRegular():
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
			return reject(req, RuleHardLink, "%s has %d hard links; one of them may be a blocked file", real, sys.Nlink)
		}
	default:
		return reject(req, RuleFileType, "%s is a %v, only directories and regular files can be mounted", real, st.Mode().Type())
	}
	return nil
}

// checkContainerPath checks the path below ExtraMountDir: relative, clean, at
// most MaxContainerDepth components of [A-Za-z0-9_][A-Za-z0-9._-]*.
func checkContainerPath(req MountRequest, name string) *RejectError {
	switch {
	case strings.IndexByte(name, 0) >= 0:
		return reject(req, RuleNUL, "container path contains a NUL byte")
	case len(name) > MaxContainerPathLen:
		return reject(req, RuleContainerTooLong, "container path is %d bytes, limit %d", len(name), MaxContainerPathLen)
	case strings.HasPrefix(name, "/"):
		return reject(req, RuleContainerAbsolute, "container path must be relative to %s", ExtraMountDir)
	}
	segs := strings.Split(name, "/")
	for _, s := range segs {
		if s == ".." {
			return reject(req, RuleContainerDotDot, "'..' is not allowed in a container path")
		}
	}
	for _, s := range segs {
		if s == "" || s == "." {
			return reject(req, RuleContainerNonCanonical, "container path has an empty or '.' component")
		}
	}
	if len(segs) > MaxContainerDepth {
		return reject(req, RuleContainerTooLong, "container path has %d components, limit %d", len(segs), MaxContainerDepth)
	}
	for _, s := range segs {
		for i := 0; i < len(s); i++ {
			c := s[i]
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' ||
				i > 0 && (c == '.' || c == '-')
			if !ok {
				return reject(req, RuleContainerCharset, "container path component %q: use A-Z a-z 0-9 _ (and . - after the first character)", s)
			}
		}
	}
	return nil
}

// Rejection is one rejected request of ValidateAll.
type Rejection struct {
	Index   int // position in the request list
	Request MountRequest
	Err     *RejectError
}

// ValidateAll validates every request and returns the accepted mounts and,
// separately, every rejection with its reason. A request whose container path
// equals, contains or sits inside an earlier accepted mount's is rejected
// (rule container-path-conflict). Callers fail the turn when any request is
// rejected; a nil allowlist rejects every request (rule no-allowlist).
func ValidateAll(a *Allowlist, reqs []MountRequest, isRootGroup bool) ([]Mount, []Rejection) {
	var mounts []Mount
	var rejs []Rejection
	for i, req := range reqs {
		m, err := a.Validate(req, isRootGroup)
		var re *RejectError
		if err == nil {
			re = conflict(req, m, mounts)
		} else if !errors.As(err, &re) {
			re = reject(req, RuleUnresolvable, "%v", err)
		}
		if re != nil {
			rejs = append(rejs, Rejection{Index: i, Request: req, Err: re})
			continue
		}
		mounts = append(mounts, m)
	}
	return mounts, rejs
}

func conflict(req MountRequest, m Mount, prev []Mount) *RejectError {
	mc := strings.Split(m.Name, "/")
	for _, o := range prev {
		oc := strings.Split(o.Name, "/")
		if within(mc, oc) || within(oc, mc) {
			return reject(req, RuleContainerConflict, "container path %s overlaps %s (from %q)", m.ContainerPath, o.ContainerPath, o.RequestedPath)
		}
	}
	return nil
}

// Recheck verifies, right before the container is created, that m.HostPath
// still resolves to itself (no component has become a symlink) and is still a
// directory or a single-link regular file. See the package documentation for
// the window that remains after it.
func Recheck(m Mount) error {
	req := MountRequest{HostPath: m.RequestedPath, ContainerPath: m.Name}
	if req.HostPath == "" {
		req.HostPath = m.HostPath
	}
	if !filepath.IsAbs(m.HostPath) || filepath.Clean(m.HostPath) != m.HostPath {
		return reject(req, RuleChanged, "host path %q is not an absolute clean path", m.HostPath)
	}
	real, err := filepath.EvalSymlinks(m.HostPath)
	if err != nil {
		return reject(req, RuleChanged, "%s no longer resolves: %v", m.HostPath, err)
	}
	if real != m.HostPath {
		return reject(req, RuleChanged, "%s now resolves to %s", m.HostPath, real)
	}
	if rej := checkFileType(req, real); rej != nil {
		rej.Rule = RuleChanged
		return rej
	}
	return nil
}
