package mountsec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/arizuko/arizukod/internal/atomicfile"
)

// ErrEnvFile is wrapped by every env file parse error. Errors name the line
// and, when it is well formed, the variable, never a value.
var ErrEnvFile = errors.New("invalid env file")

// ErrEnvName is wrapped when a configured variable name is not allowed.
var ErrEnvName = errors.New("env variable name not allowed")

// DefaultEnvNames returns the variables always taken from the service's env
// file when present.
func DefaultEnvNames() []string { return slices.Clone(defaultEnvNames) }

var (
	defaultEnvNames = []string{"GH_TOKEN", "OPENAI_API_KEY"}
	// gitIdentityNames are filled from the discovered git identity unless the env
	// file sets them.
	gitIdentityNames = []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"}
)

// MaxEnvFileSize bounds the service's env file.
const MaxEnvFileSize = 1 << 20

// MinRedactLen is the shortest value Secrets.Redact replaces; shorter values
// would shred ordinary text and are not credentials.
const MinRedactLen = 4

// ModelCredentialNames are the env file's variables that hold the model credential. They
// never reach a container: the model gateway reads them on the host and adds them to the
// requests it forwards.
var ModelCredentialNames = []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}

// reservedEnv are names the extra list may not add: they would change how the
// container's entrypoint or runtime behaves rather than pass a credential, or they are
// the model credential, which stays on the host.
var reservedEnv = map[string]bool{
	"ANTHROPIC_API_KEY": true, "CLAUDE_CODE_OAUTH_TOKEN": true, "ANTHROPIC_AUTH_TOKEN": true,
	"PATH": true, "HOME": true, "USER": true, "SHELL": true, "IFS": true, "ENV": true, "BASH_ENV": true,
	"PS4": true, "PROMPT_COMMAND": true, "NODE_OPTIONS": true, "PYTHONSTARTUP": true, "PYTHONPATH": true,
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ParseEnvFile parses dotenv text: KEY=VALUE lines, optional "export " prefix,
// blank lines and '#' comments, quoted values (single quotes literal, double
// quotes with escapes \n \r \t \\ \" \$ \`, adjacent quoted words joined as
// in sh), unquoted values trimmed with " #" starting a comment. A later
// duplicate wins. Multi-line values are not supported.
func ParseEnvFile(data []byte) (map[string]string, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if bytes.IndexByte(data, 0) >= 0 {
		line := bytes.Count(data[:bytes.IndexByte(data, 0)], []byte("\n")) + 1
		return nil, fmt.Errorf("%w: line %d: NUL byte", ErrEnvFile, line)
	}
	vars := map[string]string{}
	for n, line := range strings.Split(string(data), "\n") {
		key, val, err := parseEnvLine(strings.TrimSuffix(line, "\r"))
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %s", ErrEnvFile, n+1, err)
		}
		if key != "" {
			vars[key] = val
		}
	}
	return vars, nil
}

// parseEnvLine returns ("", "", nil) for blank and comment lines. Its errors
// never include the value.
func parseEnvLine(line string) (string, string, error) {
	s := strings.TrimLeft(line, " \t")
	if s == "" || s[0] == '#' {
		return "", "", nil
	}
	if rest, ok := strings.CutPrefix(s, "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
		s = strings.TrimLeft(rest, " \t")
	}
	eq := strings.IndexByte(s, '=')
	if eq < 0 {
		return "", "", errors.New("missing '=' (want KEY=VALUE)")
	}
	key := strings.TrimRight(s[:eq], " \t")
	if !validEnvName(key) {
		return "", "", errors.New("invalid variable name (want [A-Za-z_][A-Za-z0-9_]*)")
	}
	raw := s[eq+1:]
	v := strings.TrimLeft(raw, " \t")
	if v != raw && strings.HasPrefix(v, "#") {
		return key, "", nil
	}
	if v == "" || (v[0] != '\'' && v[0] != '"') {
		return key, unquoted(v), nil
	}
	val, err := quoted(v)
	if err != nil {
		return "", "", fmt.Errorf("variable %s: %w", key, err)
	}
	return key, val, nil
}

// unquoted trims v and cuts a comment that starts with whitespace and '#'
// (as in sh, "K=#x" keeps "#x").
func unquoted(v string) string {
	for i := 1; i < len(v); i++ {
		if v[i] == '#' && (v[i-1] == ' ' || v[i-1] == '\t') {
			v = v[:i]
			break
		}
	}
	return strings.TrimRight(v, " \t")
}

// quoted reads a value made of adjacent shell words: single-quoted (literal),
// double-quoted (escapes \n \r \t \\ \" \$ \`) and backslash-escaped
// characters between them, so the form WriteEnvFile uses for a value holding a
// single quote reads back:
//
//	K='it'\''s'
//
// Only whitespace or a comment may follow.
func quoted(v string) (string, error) {
	var b strings.Builder
	i := 0
	for i < len(v) {
		switch c := v[i]; {
		case c == '\'':
			end := strings.IndexByte(v[i+1:], '\'')
			if end < 0 {
				return "", errors.New("unterminated single quote")
			}
			b.WriteString(v[i+1 : i+1+end])
			i += end + 2
		case c == '"':
			j, closed := i+1, false
			for ; j < len(v); j++ {
				if v[j] == '"' {
					closed = true
					break
				}
				if v[j] == '\\' && j+1 < len(v) {
					j++
					switch e := v[j]; e {
					case 'n':
						b.WriteByte('\n')
					case 'r':
						b.WriteByte('\r')
					case 't':
						b.WriteByte('\t')
					case '\\', '"', '$', '`':
						b.WriteByte(e)
					default:
						b.WriteByte('\\')
						b.WriteByte(e)
					}
					continue
				}
				b.WriteByte(v[j])
			}
			if !closed {
				return "", errors.New("unterminated double quote")
			}
			i = j + 1
		case c == '\\' && i+1 < len(v):
			b.WriteByte(v[i+1])
			i += 2
		case c == ' ' || c == '\t':
			if rest := strings.TrimLeft(v[i:], " \t"); rest != "" && rest[0] != '#' {
				return "", errors.New("unexpected text after the closing quote")
			}
			return b.String(), nil
		default:
			return "", errors.New("unexpected text after the closing quote")
		}
	}
	return b.String(), nil
}

// GitIdentity is the author/committer identity handed to containers.
type GitIdentity struct {
	Name  string
	Email string
}

// GitIdentityFunc discovers the git identity; inject a fake in tests.
type GitIdentityFunc func(ctx context.Context) (GitIdentity, error)

// GitConfigIdentity reads user.name and user.email from `git config --global`
// of the service user. A missing git binary or unset keys give empty fields.
func GitConfigIdentity(ctx context.Context) (GitIdentity, error) {
	get := func(key string) (string, error) {
		out, err := exec.CommandContext(ctx, "git", "config", "--global", "--get", key).Output()
		var ee *exec.ExitError
		switch {
		case errors.Is(err, exec.ErrNotFound), errors.As(err, &ee):
			return "", ctx.Err()
		case err != nil:
			return "", fmt.Errorf("mountsec: git config %s: %w", key, err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	name, err := get("user.name")
	if err != nil {
		return GitIdentity{}, err
	}
	email, err := get("user.email")
	if err != nil {
		return GitIdentity{}, err
	}
	return GitIdentity{Name: name, Email: email}, nil
}

// BuildEnvFile collects the variables a container may see: DefaultEnvNames(),
// the git identity variables (GIT_AUTHOR_NAME, ...) and extraAllowed, taken from the dotenv file envFile (""
// for none), then the git identity (when identity is not nil) for any git
// variable the file does not set. Everything else in the file is dropped.
func BuildEnvFile(ctx context.Context, envFile string, extraAllowed []string, identity GitIdentityFunc) (Secrets, error) {
	allowed := map[string]bool{}
	for _, k := range append(DefaultEnvNames(), gitIdentityNames...) {
		allowed[k] = true
	}
	for _, k := range extraAllowed {
		switch {
		case !validEnvName(k):
			return nil, fmt.Errorf("mountsec: %w: %q is not a variable name", ErrEnvName, k)
		case reservedEnv[k] || strings.HasPrefix(k, "LD_") || strings.HasPrefix(k, "DYLD_"):
			return nil, fmt.Errorf("mountsec: %w: %s would change how the container runs or hand it the model credential (the model gateway holds that)", ErrEnvName, k)
		}
		allowed[k] = true
	}
	out := Secrets{}
	if envFile != "" {
		vars, err := ReadEnvFile(envFile)
		if err != nil {
			return nil, err
		}
		for k, v := range vars {
			if allowed[k] {
				out[k] = v
			}
		}
	}
	if identity != nil {
		id, err := identity(ctx)
		if err != nil {
			return nil, fmt.Errorf("mountsec: git identity: %w", err)
		}
		for _, kv := range [][2]string{
			{"GIT_AUTHOR_NAME", id.Name}, {"GIT_COMMITTER_NAME", id.Name},
			{"GIT_AUTHOR_EMAIL", id.Email}, {"GIT_COMMITTER_EMAIL", id.Email},
		} {
			if _, set := out[kv[0]]; !set && kv[1] != "" {
				out[kv[0]] = kv[1]
			}
		}
	}
	return out, nil
}

// ReadEnvFile reads and parses the dotenv file at path: a regular file of at most
// MaxEnvFileSize bytes.
func ReadEnvFile(path string) (map[string]string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("mountsec: env file: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("mountsec: %w: %s is not a regular file", ErrEnvFile, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxEnvFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("mountsec: env file %s: %w", path, err)
	}
	if len(data) > MaxEnvFileSize {
		return nil, fmt.Errorf("mountsec: %w: %s is larger than %d bytes", ErrEnvFile, path, MaxEnvFileSize)
	}
	vars, err := ParseEnvFile(data)
	if err != nil {
		return nil, fmt.Errorf("mountsec: %s: %w", path, err)
	}
	return vars, nil
}

// Secrets maps variable names to values that must never be printed. Every
// fmt verb, slog and encoding/json show the names only; Redact scrubs the
// values from text meant for logs.
type Secrets map[string]string

// Names returns the variable names, sorted.
func (s Secrets) Names() []string {
	names := make([]string, 0, len(s))
	for k := range s {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// String shows the names only.
func (s Secrets) String() string { return "Secrets[" + strings.Join(s.Names(), " ") + "]" }

// Format makes every fmt verb (%v %+v %#v %s %q %x) print String.
func (s Secrets) Format(f fmt.State, _ rune) { io.WriteString(f, s.String()) }

// LogValue makes slog print the names only.
func (s Secrets) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON encodes the names only.
func (s Secrets) MarshalJSON() ([]byte, error) {
	return json.Marshal(s.String())
}

// Redact replaces every value of at least MinRedactLen bytes in text with
// [REDACTED:NAME], longest values first.
func (s Secrets) Redact(text string) string { return s.Redactor()(text) }

// Redactor is Redact for many texts: the values are sorted and matched once, here.
func (s Secrets) Redactor() func(text string) string {
	type kv struct{ k, v string }
	var vals []kv
	for _, k := range s.Names() {
		if v := s[k]; len(v) >= MinRedactLen {
			vals = append(vals, kv{k, v})
		}
	}
	if len(vals) == 0 {
		return func(text string) string { return text }
	}
	sort.SliceStable(vals, func(i, j int) bool { return len(vals[i].v) > len(vals[j].v) })
	args := make([]string, 0, 2*len(vals))
	for _, e := range vals {
		args = append(args, e.v, "[REDACTED:"+e.k+"]")
	}
	return strings.NewReplacer(args...).Replace
}

// WriteEnvFile writes vars as sorted KEY='value' lines a POSIX shell can
// source, atomically (temp file in the same directory, fsync, rename, fsync
// of the directory) with mode 0600. Values holding NUL, CR or LF are refused;
// errors name the variable, never the value.
func WriteEnvFile(path string, vars map[string]string) error {
	var b strings.Builder
	b.WriteString("# Written by arizukod: the allowlisted environment for agent containers. Do not edit.\n")
	for _, k := range Secrets(vars).Names() {
		v := vars[k]
		if !validEnvName(k) {
			return fmt.Errorf("mountsec: %w: %q is not a variable name", ErrEnvName, k)
		}
		if strings.ContainsAny(v, "\x00\r\n") {
			return fmt.Errorf("mountsec: env file %s: value of %s holds a NUL or line break", path, k)
		}
		b.WriteString(k + "='" + strings.ReplaceAll(v, "'", `'\''`) + "'\n")
	}
	if err := atomicfile.Write(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("mountsec: %w", err)
	}
	return nil
}
