// Package groupfolder owns group folder names and the directories they map to under
// arizukod's data directory.
//
// A Folder is a validated, lowercase, slash-separated name such as "main",
// "main/research" or "main/research/w1". Layout turns a Folder into absolute
// directories under the data directory (group, world share, session, IPC, media,
// logs) and proves that every path it builds stays inside the data directory.
// Layout.Ensure creates those directories without following any symlink below
// the data directory, so a link planted by a container (for example
// groups/main/media -> /etc) can never redirect a mount or a write.
//
// This package is a pure library over the filesystem: it never talks to a
// container engine, the store or the network, and it never touches anything
// outside the data directory it is given.
package groupfolder

import (
	"errors"
	"fmt"
	"strings"

	"github.com/arizuko/arizukod/contract"
)

// Limits on folder names.
const (
	MaxSegmentLen = 63  // bytes per segment
	MaxSegments   = 8   // segments per folder
	MaxFolderLen  = 255 // bytes in the whole name
)

// Rules named by a NameError.
const (
	RuleEmpty         = "empty"
	RuleTooLong       = "too-long"
	RuleTooDeep       = "too-deep"
	RuleAbsolute      = "absolute"
	RuleTrailingSlash = "trailing-slash"
	RuleEmptySegment  = "empty-segment"
	RuleDotSegment    = "dot-segment"
	RuleNUL           = "nul-byte"
	RuleBackslash     = "backslash"
	RuleUppercase     = "uppercase"
	RuleNonASCII      = "non-ascii"
	RuleCharset       = "charset"
	RuleLeadingChar   = "leading-char"
	RuleSegmentLen    = "segment-too-long"
	RuleReserved      = "reserved-name"
)

// ErrInvalidFolder is wrapped by every error Parse returns.
var ErrInvalidFolder = errors.New("invalid group folder")

// NameError says why a folder name was rejected: the name, the offending
// segment (empty when the rule is about the whole name) and the rule.
type NameError struct {
	Name    string
	Segment string
	Rule    string
	Detail  string
}

func (e *NameError) Error() string {
	if e.Segment != "" {
		return fmt.Sprintf("%v %q: segment %q: %s (rule %s)", ErrInvalidFolder, e.Name, e.Segment, e.Detail, e.Rule)
	}
	return fmt.Sprintf("%v %q: %s (rule %s)", ErrInvalidFolder, e.Name, e.Detail, e.Rule)
}

// Unwrap makes errors.Is(err, ErrInvalidFolder) true.
func (e *NameError) Unwrap() error { return ErrInvalidFolder }

// reserved lists segment names that collide with a group directory's own
// contents, the IPC directory's contents, or the container's /workspace layout
// (the group directory is /workspace, so a child folder "main/extra" would sit
// on top of /workspace/extra). They are reserved at every depth.
var reserved = map[string]string{
	"share":             "the world's shared directory groups/<world>/share",
	"media":             "the group's media directory",
	"logs":              "the group's container logs directory",
	"diary":             "the group's diary",
	"episodes":          "the group's episodes",
	"facts":             "the group's facts",
	"users":             "the group's user notes",
	"extra":             "/workspace/extra, where additional mounts land",
	"web":               "/workspace/web, the web assets mount",
	"env":               "the data directory's env directory",
	"env_dir":           "/workspace/env-dir, the credentials mount",
	"skills":            "the skills directory",
	"ipc":               "the IPC directory",
	contract.InputDir:   "the IPC input directory ipc/<folder>/input",
	contract.SidecarDir: "the sidecar socket directory ipc/<folder>/sidecars",
	"sessions":          "the sessions directory",
	"tmp":               "temporary files",
	"global":            "/workspace/global",
	"group":             "/workspace/group",
	"scripts":           "/workspace/scripts",
	"workspace":         "the container's /workspace",
	"task":              "scheduled task containers arizuko-<slug>-task-<id>",
}

// Folder is a validated group folder name. Obtain one with Parse or ParseSlug;
// a Folder made by a plain conversion is re-validated by every Layout method.
type Folder string

// Parse validates name and returns it as a Folder.
//
// Rules: 1 to 8 segments separated by single '/'; each segment 1 to 63 bytes of
// [a-z0-9_], starting with [a-z0-9]; the whole name at most 255 bytes; no
// reserved segment names. '-' is not allowed so that ContainerSlug, which joins
// segments with '-', is injective: "a/b_c" and "a_b/c" give distinct slugs
// "a-b_c" and "a_b-c", and ParseSlug inverts it.
func Parse(name string) (Folder, error) {
	bad := func(seg, rule, detail string) (Folder, error) {
		return "", &NameError{Name: name, Segment: seg, Rule: rule, Detail: detail}
	}
	switch {
	case name == "":
		return bad("", RuleEmpty, "name is empty")
	case strings.IndexByte(name, 0) >= 0:
		return bad("", RuleNUL, "name contains a NUL byte")
	case strings.IndexByte(name, '\\') >= 0:
		return bad("", RuleBackslash, "name contains a backslash")
	case len(name) > MaxFolderLen:
		return bad("", RuleTooLong, fmt.Sprintf("name is %d bytes, limit %d", len(name), MaxFolderLen))
	case name[0] == '/':
		return bad("", RuleAbsolute, "name is an absolute path")
	case name[len(name)-1] == '/':
		return bad("", RuleTrailingSlash, "name ends with '/'")
	}
	segs := strings.Split(name, "/")
	if len(segs) > MaxSegments {
		return bad("", RuleTooDeep, fmt.Sprintf("name has %d segments, limit %d", len(segs), MaxSegments))
	}
	for _, s := range segs {
		if rule, detail := checkSegment(s); rule != "" {
			return bad(s, rule, detail)
		}
	}
	return Folder(name), nil
}

func checkSegment(s string) (rule, detail string) {
	switch {
	case s == "":
		return RuleEmptySegment, "empty segment (doubled '/')"
	case s == "." || s == "..":
		return RuleDotSegment, "'.' and '..' are not allowed"
	case len(s) > MaxSegmentLen:
		return RuleSegmentLen, fmt.Sprintf("segment is %d bytes, limit %d", len(s), MaxSegmentLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80:
			return RuleNonASCII, "only ASCII a-z, 0-9 and '_' are allowed"
		case c >= 'A' && c <= 'Z':
			return RuleUppercase, fmt.Sprintf("uppercase %q is not allowed, use lowercase", c)
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '_':
			if i == 0 {
				return RuleLeadingChar, "segment must start with a-z or 0-9"
			}
		default:
			return RuleCharset, fmt.Sprintf("character %q is not allowed, only a-z, 0-9 and '_'", c)
		}
	}
	if why, ok := reserved[s]; ok {
		return RuleReserved, "reserved name (collides with " + why + ")"
	}
	return "", ""
}

// ParseSlug inverts ContainerSlug: it turns '-' back into '/' and validates.
func ParseSlug(slug string) (Folder, error) {
	if strings.Contains(slug, "/") {
		return "", &NameError{Name: slug, Rule: RuleCharset, Detail: "a slug holds no '/'"}
	}
	return Parse(strings.ReplaceAll(slug, "-", "/"))
}

// Validate re-checks f; useful for a Folder made by conversion.
func (f Folder) Validate() error {
	_, err := Parse(string(f))
	return err
}

// String returns the folder name.
func (f Folder) String() string { return string(f) }

// Segments returns the folder's segments, outermost first.
func (f Folder) Segments() []string { return strings.Split(string(f), "/") }

// Depth is 0 for a world ("main"), 1 for "main/research", and so on.
func (f Folder) Depth() int { return strings.Count(string(f), "/") }

// World returns the first segment: the world the folder belongs to.
func (f Folder) World() Folder {
	if i := strings.IndexByte(string(f), '/'); i >= 0 {
		return f[:i]
	}
	return f
}

// Parent returns the enclosing folder; false for a world.
func (f Folder) Parent() (Folder, bool) {
	i := strings.LastIndexByte(string(f), '/')
	if i < 0 {
		return "", false
	}
	return f[:i], true
}

// IsAncestorOf reports whether f strictly encloses other ("main" encloses
// "main/research" but not "main" nor "mainx").
func (f Folder) IsAncestorOf(other Folder) bool {
	return f != "" && len(other) > len(f) && strings.HasPrefix(string(other), string(f)) && other[len(f)] == '/'
}

// ContainerSlug returns the folder with '/' replaced by '-', for container names
// of the form arizuko-<slug>-<unix_ms>. Segments cannot contain '-', so the
// mapping is injective and ParseSlug inverts it. Note that "arizuko-main-" is a
// prefix of the names of main's child folders too: match names exactly as
// arizuko-<slug>-<digits>, never by prefix.
func (f Folder) ContainerSlug() string { return strings.ReplaceAll(string(f), "/", "-") }
